"""Toolchain probes behind `mambawin doctor`; mambawin.env is the public entry point."""
