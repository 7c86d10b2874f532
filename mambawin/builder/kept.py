"""Every build's objects are kept: a rebuild of a key after other refs reuses them, no cache needed.

A slot folder (`builds/<package>-<slot>/`) is where every build of its toolchain happens, at one
fixed path: ninja's build.ninja and a compiler cache's hashes hold absolute paths. When another
key takes the slot, what the key leaving it owns (`src/`, `build/`, `dist/` with the wheel setup.py
built, `build.json`) is moved, not deleted, to `kept/<key>/`; when that key comes back it is moved
into the same slot again: the build reuses its wheel, or ninja finds every object newer than its
sources. Moves are renames within the cache: no copying, mtimes unchanged.

Kept builds are bounded by size (MAMBAWIN_KEEP_MB, default 10000 MB): after each move the least
recently used are removed. `mambawin cache` lists them; `mambawin cache --prune` applies a bound.

A kept build is a folder mambawin marked when it made it (store.owned); one an older mambawin
made before markers counts as its own when its kept.json names the folder's key. Anything else
under kept/ (a link, a file, a folder of someone else's, a mount point) is foreign: listed,
never removed. A kept/ that is itself a link (or no real folder, or a mount point) is never
walked: it is listed as the one foreign entry, and nothing through it is kept or removed.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from mambawin.store.owned import cache_dir, claim, inside_cache, mark, marked_as, remove_tree
from mambawin.userfile import env_int, parse_json

KEEP_MB_VAR = "MAMBAWIN_KEEP_MB"
DEFAULT_KEEP_MB = 10_000
KEEP_MB_BOUND = 10**9  # a petabyte: a bigger MAMBAWIN_KEEP_MB or --keep-mb is a typo
_LAST_MOMENT = 253_402_300_799  # 9999-12-31: a later last_used (or NaN, inf) is not a time
MOVED = ("src", "build", "dist", "build.json")  # what a key owns in its slot
META = "kept.json"
OWNED_AS = "kept-build"  # the kind in a kept build's ownership marker


@dataclass(frozen=True)
class Kept:
    """One kept build."""

    key: str
    slot: str
    size: int  # bytes
    last_used: float  # seconds since the epoch
    path: Path


@dataclass(frozen=True)
class Foreign:
    """An entry under kept/ that mambawin did not make: listed, never removed or changed."""

    name: str
    kind: str  # "symlink", "folder", "file" or "other" (a FIFO, a socket, a device)
    path: Path


def kept_root() -> Path:
    """Where kept builds live."""
    return cache_dir() / "kept"


def keep_limit(env: Mapping[str, str] | None = None) -> int:
    """The size bound in bytes, from MAMBAWIN_KEEP_MB; UsageError on a value that is no size."""
    mb = env_int(KEEP_MB_VAR, minimum=0, maximum=KEEP_MB_BOUND, unit="MB", example=20000, env=env)
    return (DEFAULT_KEEP_MB if mb is None else mb) * 1_000_000


def shelve(slot_root: Path, key: str) -> Path | None:
    """Move the slot's tree and objects of key to kept/<key>/; None when there is nothing."""
    present = [name for name in MOVED if (slot_root / name).exists()]
    if not key or "src" not in present:
        return None
    target = kept_root() / key
    if _ours(target):
        _adopt(target)
        remove_tree(target)  # a stale copy of the same key: the slot's is newer
    claim(target, OWNED_AS)  # refused when something of someone else's stands there
    for name in present:
        os.replace(slot_root / name, target / name)
    _write_meta(target, key, slot_root.name)
    return target


def restore(slot_root: Path, key: str) -> bool:
    """Move kept/<key>/ back into its slot; False when the key was not kept (or not whole)."""
    source = kept_root() / key
    if not _ours(source):
        return False
    _adopt(source)
    meta = _read_meta(source)
    if meta.get("slot") != slot_root.name or not (source / "src").is_dir():
        return False
    for name in MOVED:
        if (source / name).exists():
            remove_tree(slot_root / name)
            os.replace(source / name, slot_root / name)
    remove_tree(source)
    return True


def listing(*, ismount: IsMount = os.path.ismount) -> list[Kept]:
    """Every kept build, most recently used first (foreign entries are not kept builds)."""
    found = []
    for folder in _entries(ismount):
        if not _ours(folder):
            continue
        meta = _read_meta(folder)
        when = _moment(meta.get("last_used"))
        if when is None:  # kept.json is in a folder of ours, but a person may have edited it
            when = folder.stat().st_mtime
        found.append(Kept(folder.name, str(meta.get("slot", "?")), _size(folder), when, folder))
    return sorted(found, key=lambda k: k.last_used, reverse=True)


IsMount = Callable[[Path], bool]


def evict(limit: int, *, ismount: IsMount = os.path.ismount) -> list[Kept]:
    """Remove the least recently used kept builds until the rest fit in limit bytes."""
    removed = []
    kept = listing(ismount=ismount)
    total = sum(k.size for k in kept)
    for entry in reversed(kept):
        if total <= limit:
            break
        _adopt(entry.path)
        remove_tree(entry.path, ismount=ismount)
        total -= entry.size
        removed.append(entry)
    return removed


def foreign(*, ismount: IsMount = os.path.ismount) -> list[Foreign]:
    """Every entry under kept/ that is not a kept build of mambawin's, by name; kept/ itself
    when it is a link, no folder, or a mount point (then nothing in it is looked at)."""
    root = kept_root()
    if _walkable(root, ismount) is False:
        return [Foreign(root.name, _kind(root, ismount), root)]
    return [
        Foreign(p.name, _kind(p, ismount), p)
        for p in _entries(ismount, keep_mounts=True)
        if not _ours(p) or ismount(p)
    ]


def _walkable(root: Path, ismount: IsMount) -> bool | None:
    """kept/ is a real folder of the cache (None: there is none yet); False for a link out of
    the cache, a file, or another file system mounted there: never walked, never pruned."""
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return None
    except OSError:
        return False
    return stat.S_ISDIR(mode) and not ismount(root)


def _entries(ismount: IsMount, *, keep_mounts: bool = False) -> Iterator[Path]:
    """The entries of a walkable kept/; a mount point among them is no kept build."""
    root = kept_root()
    if _walkable(root, ismount):
        for path in sorted(root.iterdir()):
            if keep_mounts or not ismount(path):
                yield path


def _ours(folder: Path) -> bool:
    """A kept build: marked by mambawin, or (made before markers) a real folder whose kept.json
    names its key."""
    what = marked_as(folder)
    if what is not None:
        return what == OWNED_AS
    if folder.is_symlink() or not folder.is_dir() or not inside_cache(folder):
        return False  # an older layout proves something only inside mambawin's own cache
    meta = _read_meta(folder)
    return meta.get("key") == folder.name and isinstance(meta.get("slot"), str)


def _moment(value: object) -> float | None:
    """A kept.json's last_used as seconds since the epoch; None for what is no time (a string,
    NaN, 1e400: they broke the table's date and the JSON document's validity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 <= value <= _LAST_MOMENT else None


def _adopt(folder: Path) -> None:
    """Mark a kept build an older mambawin made, so the one tree remover accepts it."""
    if marked_as(folder) is None:
        mark(folder, OWNED_AS)


def _kind(path: Path, ismount: IsMount = os.path.ismount) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "other"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode) and ismount(path):
        return "mount"
    if stat.S_ISDIR(mode):
        return "folder"
    return "file" if stat.S_ISREG(mode) else "other"


def _size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def _write_meta(folder: Path, key: str, slot: str) -> None:
    meta = {"key": key, "slot": slot, "last_used": time.time()}
    (folder / META).write_text(json.dumps(meta) + "\n", encoding="utf-8")


def _read_meta(folder: Path) -> dict[str, object]:
    meta = folder / META
    try:  # a regular file of ours, never a link, FIFO or device planted there
        info = os.lstat(meta)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 65536:
            return {}
        data = parse_json(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
