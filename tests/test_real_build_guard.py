"""The guard in tests/conftest.py: a unit test that would start a real setup.py build fails
loudly instead of compiling for minutes; a hand-written fake upstream may still be built."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mambawin import proc


def test_a_real_tree_is_refused(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("raise SystemExit('must not run')\n", encoding="utf-8")
    with pytest.raises(RuntimeError, match="tried to start a real build"):
        proc.run([sys.executable, "setup.py", "bdist_wheel"], cwd=tmp_path)


def test_a_fake_upstream_may_be_built(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("print('fake build')\n", encoding="utf-8")
    (tmp_path / "MAMBAWIN_FAKE_UPSTREAM").write_text("fake\n", encoding="utf-8")
    done = proc.run([sys.executable, "setup.py", "bdist_wheel"], cwd=tmp_path)
    assert "fake build" in done.stdout
