"""What mambawin's cache folder holds, by kind, and how big each is (`mambawin cache`).

Before, `cache` listed only the kept builds: it said 0 bytes while the folder held a 1.8 GB
Windows toolchain. Every entry of the folder is counted: one mambawin did not name is "other",
so the total is the folder's.
"""

from __future__ import annotations

import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mambawin.errors import FileSystemError
from mambawin.store.owned import CACHE_VAR, cache_dir


def usable_cache() -> Path:
    """The cache folder, made and proven writable: the one check every command that uses the
    cache runs before any work (the `command` decorator's cache=True), so a cache under a file or
    on a read-only disk stops at once, not after minutes of work or never (a listing)."""
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        # a real write, not os.access: a read-only mount or an ACL is what a build would meet
        handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        where = f"{CACHE_VAR}={path}" if os.environ.get(CACHE_VAR) else f"mambawin's cache {path}"
        reason = exc.strerror or type(exc).__name__
        msg = (
            f"{where} cannot be written ({reason}): point {CACHE_VAR} at a folder you can "
            "write to, or fix that folder's permissions"
        )
        raise FileSystemError(msg) from None
    return path


# Each top-level folder of the cache: what it is, and the command that fills it.
KINDS: tuple[tuple[str, str], ...] = (
    ("windows-toolchain", "Windows toolchain (`toolchain windows --setup`)"),
    ("windows-toolchain-overlay", "Windows toolchain's torch overlay (`check`)"),
    ("torch-windows", "torch for Windows (verify's load step)"),
    ("linux-cuda", "CUDA for Linux (`toolchain linux --setup`)"),
    ("mirrors", "upstream mirrors (`fetch`, `build`)"),
    ("src", "source checkouts (`fetch`)"),
    ("builds", "build folders (`build`)"),
    ("kept", "kept builds (`cache --prune` bounds them)"),
    ("cross", "cross-build trees (`build --platform win_amd64`)"),
    ("check", "check trees (`check`)"),
    ("envs", "team build environments (`build --spec`)"),
    ("team-logs", "team build logs (`build --spec`)"),
    ("sdists", "upstream sdists from the package index (`--source-from index`)"),
    ("kernel-caches", "Triton and inductor kernel caches (`verify`)"),
    ("state", "mambawin's record of the folders it made"),
)
OTHER = "other (not a folder mambawin names)"


@dataclass(frozen=True)
class Usage:
    """One entry of the cache folder and the bytes under it."""

    name: str  # the entry's name in the cache folder
    what: str
    size: int  # bytes of the files under it (links not followed)
    unreadable: int = 0  # folders that could not be listed (their files not counted)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "what": self.what, "bytes": self.size}


@dataclass(frozen=True)
class CacheUsage:
    """The cache folder, each entry in it by kind, and the total."""

    folder: Path
    entries: tuple[Usage, ...]

    @property
    def total(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def how_to_move(self) -> str:
        return f"set {CACHE_VAR} to a folder on a larger disk (move this one there first)"

    def to_json(self) -> dict[str, object]:
        return {
            "folder": str(self.folder),
            "bytes": self.total,
            "entries": [e.to_json() for e in self.entries],
            "move_with": CACHE_VAR,
        }


def usage(folder: Path | None = None) -> CacheUsage:
    """What folder (mambawin's cache) holds, in KINDS' order, then any other entry by name."""
    root = cache_dir() if folder is None else folder
    names = sorted(os.listdir(root)) if root.is_dir() else []
    known = dict(KINDS)
    order = [n for n, _ in KINDS if n in names] + [n for n in names if n not in known]
    return CacheUsage(root, tuple(_measure(root / n, known.get(n, OTHER)) for n in order))


def _measure(path: Path, what: str) -> Usage:
    """The bytes of every file under path, links counted as themselves, never followed."""
    size, unreadable = 0, 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            info = current.lstat()
        except OSError:
            unreadable += 1
            continue
        if not stat.S_ISDIR(info.st_mode):
            size += info.st_size
            continue
        try:
            with os.scandir(current) as entries:
                stack.extend(Path(e.path) for e in entries)
        except OSError:
            unreadable += 1
    return Usage(path.name, what, size, unreadable)


def human(size: int) -> str:
    """1.8 GB, 340 MB, 12 kB, 0 B."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return (
                f"{size / scale:.1f} {unit}" if size < 10 * scale else f"{size / scale:.0f} {unit}"
            )
    return f"{size} B"
