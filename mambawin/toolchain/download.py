"""How far pip's downloads are: bytes, rate and time left, measured, not guessed.

`toolchain windows --setup` fetches 1.8 GB with pip and pip draws its bar only on a terminal, so
a CI log stayed silent for over a minute. pip runs with its temporary folder inside the download
folder; the meter reads pip's lines for the wheel it is on and its size (`Downloading x.whl
(40.3 MB)`), and measures the bytes on disk: the finished wheels plus the one growing in pip's
temporary folder. A ticker thread hands a `DownloadStatus` to the caller every few seconds.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INTERVAL_S = 5.0  # a status this often: a log line per 5 s of a 1.8 GB download
PIP_TMP = ".pip-tmp"  # pip's temporary folder, inside the download folder (not a wheel: not *.whl)

_STARTED = re.compile(r"^\s*(Downloading|Using cached) (\S+)(?: \(([0-9.]+) ([kMG]?B)\))?\s*$")
_SCALE = {"B": 1, "kB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000}


@dataclass(frozen=True)
class DownloadStatus:
    """One reading of the downloads."""

    wheel: str  # the file pip is on ("" before the first)
    index: int  # which of the asked-for wheels it is, from 1 (0 before the first)
    count: int  # how many wheels were asked for
    done: int  # bytes on disk: finished wheels and the part of the current one
    current_done: int  # bytes of the current wheel so far
    current_size: int | None  # its size as pip announced it (None: not announced, or cached)
    seconds: float  # since the downloads began

    @property
    def rate(self) -> float:
        """Bytes per second since the start."""
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds until the current wheel is whole, at the rate so far; None when unknown."""
        if self.current_size is None or self.rate <= 0:
            return None
        return max(self.current_size - self.current_done, 0) / self.rate


class DownloadMeter:
    """Feed it pip's lines (`line`); it reports a DownloadStatus every interval while started."""

    def __init__(
        self,
        dest: Path,
        count: int,
        report: Callable[[DownloadStatus], None],
        *,
        interval: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.dest, self.count, self._report = dest, count, report
        self._interval, self._clock = interval, clock
        self._start = clock()
        self._wheel, self._index = "", 0
        self._size: int | None = None
        self._before = 0  # bytes of wheels finished before the current one
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None

    @property
    def scratch(self) -> Path:
        """pip's temporary folder (TMPDIR for pip): the growing download is measured there."""
        return self.dest / PIP_TMP

    def line(self, text: str) -> None:
        """One line of pip's output: a new wheel starts (or comes from pip's cache)."""
        found = _STARTED.match(text)
        if found is None:
            return
        with self._lock:
            self._before = _wheels_bytes(self.dest)
            self._wheel = found.group(2).rsplit("/", 1)[-1]
            self._index = min(self._index + 1, self.count)
            number, unit = found.group(3), found.group(4)
            cached = found.group(1) == "Using cached"
            self._size = None if cached or number is None else int(float(number) * _SCALE[unit])

    def status(self) -> DownloadStatus:
        """The downloads now."""
        with self._lock:
            finished = _wheels_bytes(self.dest)
            partial = _wheels_bytes(self.scratch, recursive=True)
            current = max(finished - self._before, 0) + partial
            return DownloadStatus(
                self._wheel,
                self._index,
                self.count,
                finished + partial,
                current,
                self._size,
                self._clock() - self._start,
            )

    def start(self) -> None:
        self._start = self._clock()
        self.scratch.mkdir(parents=True, exist_ok=True)
        self._ticker = threading.Thread(target=self._tick, name="download-meter", daemon=True)
        self._ticker.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._ticker is not None:
            self._ticker.join()
        self._report(self.status())  # the last word: everything downloaded

    def _tick(self) -> None:
        while not self._stopped.wait(self._interval):
            self._report(self.status())


def _wheels_bytes(folder: Path, *, recursive: bool = False) -> int:
    """The bytes of the files in folder (below it too when recursive) whose name is a wheel's or
    one pip is still writing; 0 for a folder that is not there."""
    total = 0
    for path in _files(folder, recursive):
        try:
            total += path.stat().st_size
        except OSError:
            continue  # pip moved or removed it meanwhile
    return total


def _files(folder: Path, recursive: bool) -> list[Path]:
    if not recursive:
        return list(folder.glob("*.whl"))
    found: list[Path] = []
    for root, _dirs, names in os.walk(folder):
        found += [Path(root) / n for n in names]
    return found


def pip_environment(meter: DownloadMeter, base: dict[str, str]) -> dict[str, str]:
    """base with pip's temporary folder in the meter's scratch (TMPDIR, and TEMP/TMP on
    Windows), so the growing download can be measured, and pip's output unbuffered."""
    scratch = str(meter.scratch)
    # PYTHONUNBUFFERED: piped, pip's lines came in 8 kB blocks, so the meter heard of a wheel
    # after later ones were done and showed `this wheel 374/30 MB` against the wrong one
    unbuffered = {"PYTHONUNBUFFERED": "1"}
    return {**base, "TMPDIR": scratch, "TEMP": scratch, "TMP": scratch, **unbuffered}
