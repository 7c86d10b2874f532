"""Shared fixtures. Unit tests never run a real build: the guard below makes one fail loudly."""

from __future__ import annotations

import os
from pathlib import Path

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


@pytest.fixture(autouse=True)
def _forbid_real_build(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside `slow` tests a real setup.py build raises instead of compiling for minutes.

    mambawin.builder.compile checks MAMBAWIN_FORBID_REAL_BUILD right before it starts
    setup.py; only a hand-written fake upstream (it has a MAMBAWIN_FAKE_UPSTREAM file) may
    then be built.
    """
    if request.node.get_closest_marker("slow") is None:
        monkeypatch.setenv("MAMBAWIN_FORBID_REAL_BUILD", "1")


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
