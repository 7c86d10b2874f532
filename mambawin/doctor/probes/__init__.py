"""Toolchain probes behind `mambawin doctor`; mambawin.doctor.checks is the public entry point."""
