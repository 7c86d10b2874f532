"""Shared fixtures. Unit tests never run a real build: the guard below makes one fail loudly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
WINDOWS = FIXTURES / "windows"


def recorded(name: str) -> str:
    """The body of a recorded Windows tool output from tests/fixtures/windows (header removed)."""
    text = (WINDOWS / name).read_text(encoding="utf-8")
    for sep in ("# ---\n", "# ---\r\n"):
        if sep in text:
            return text.split(sep, 1)[1]
    raise AssertionError(f"{name} has no '# ---' header separator")


@pytest.fixture(autouse=True)
def _isolated_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every test gets its own cache folder, so nothing touches the user's real cache."""
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


FAKE_MARKER = "MAMBAWIN_FAKE_UPSTREAM"  # a hand-written fake upstream carries this file


@pytest.fixture(autouse=True)
def _forbid_real_build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside `slow` tests a real setup.py build raises instead of compiling for minutes.

    The guard sits at the process boundary, in the tests alone: every program mambawin runs goes
    through mambawin.proc.run, and a `setup.py bdist_wheel` there may only build a hand-written
    fake upstream (one with a MAMBAWIN_FAKE_UPSTREAM file).
    """
    if request.node.get_closest_marker("slow") is not None:
        return
    from mambawin import proc

    real_run = proc.run

    def guarded(argv: Any, *args: Any, **kwargs: Any) -> Any:
        words = [str(a) for a in argv]
        cwd = kwargs.get("cwd")
        building = "setup.py" in words and "bdist_wheel" in words and cwd is not None
        if building and not (Path(cwd) / FAKE_MARKER).is_file():
            msg = (
                f"a unit test tried to start a real build of {cwd}: mark the test "
                f"@pytest.mark.slow or build a fake upstream that has a {FAKE_MARKER} file"
            )
            raise RuntimeError(msg)
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(proc, "run", guarded)


@pytest.fixture(autouse=True)
def _offline_unless_network(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only `network` tests ask the package index: verify's pip step is skipped everywhere else."""
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setenv("MAMBAWIN_OFFLINE", "1")
    else:
        monkeypatch.delenv("MAMBAWIN_OFFLINE", raising=False)


@pytest.fixture
def upstream_repo() -> Path:
    """The real upstream mirror named by MAMBAWIN_TEST_UPSTREAM; the test is skipped without it."""
    value = os.environ.get("MAMBAWIN_TEST_UPSTREAM")
    if not value:
        pytest.skip("MAMBAWIN_TEST_UPSTREAM is not set (path to a state-spaces/mamba git repo)")
    return Path(value)
