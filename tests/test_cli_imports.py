"""`mambawin --help` and `--version` load no command module: the count of modules they import is
bounded (a count, not a timing: the same on a slow CI runner as on a laptop).

Before command modules loaded lazily, both imported 84 mambawin modules (the builder, the
verifier, the toolchains) and `packaging`, and took visibly long to answer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# mambawin, .__main__, .cli, .cli.app, .cli.registry, .cli.lazy, .errors, .stage, .ui, .ui.console
MAMBAWIN_BOUND = 10
# Modules only a command needs; none may load for the root's help or version.
HEAVY = ("packaging", "wheel", "torch", "numpy", "tomllib", "mambawin.builder", "mambawin.verify")


# Runs mambawin as `python -m mambawin` does, then names every module loaded, after a marker.
_SCRIPT = """
import runpy, sys
sys.argv = ["mambawin", *sys.argv[1:]]
try:
    runpy.run_module("mambawin", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("\\n@@modules@@")
print("\\n".join(sys.modules))
"""


def _imported(*args: str) -> list[str]:
    """The modules `python -m mambawin ARGS` imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return done.stdout.rpartition("@@modules@@")[2].split()


@pytest.mark.parametrize("args", [("--help",), ("--version",), ()], ids=["help", "version", "bare"])
def test_the_root_help_and_version_load_no_command(args: tuple[str, ...]) -> None:
    names = _imported(*args)
    ours = sorted(n for n in names if n == "mambawin" or n.startswith("mambawin."))
    assert "mambawin.cli.app" in ours  # the measurement sees our modules
    assert len(ours) <= MAMBAWIN_BOUND, ours
    assert not [n for n in ours if n.startswith("mambawin.cli.") and n not in _ROOT_MODULES], ours
    heavy = [n for n in names if n.startswith(HEAVY)]
    assert heavy == [], heavy


_ROOT_MODULES = {"mambawin.cli.app", "mambawin.cli.registry", "mambawin.cli.lazy"}


def test_a_command_loads_its_module_when_it_runs() -> None:
    """The laziness is real: the command's own help imports its module (and only then)."""
    names = _imported("patches", "--help")
    assert "mambawin.cli.patch" in names
    assert "mambawin.cli.build" not in names
