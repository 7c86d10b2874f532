"""The typer layer: parse options, call one core function, map errors to exit codes.

Core modules never import typer or print results; the modules here render what they return.
Each command module registers itself on `app` when imported, and `app` imports it only when its
command is used (cli/registry.py lists them), so `mambawin --help` stays quick.
"""

from __future__ import annotations

from mambawin.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
