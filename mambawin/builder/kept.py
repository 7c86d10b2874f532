"""Every build's objects are kept: a rebuild of a key after other refs reuses them, no cache needed.

A slot folder (`builds/<package>-<slot>/`) is where every build of its toolchain happens, at one
fixed path: ninja's build.ninja and a compiler cache's hashes hold absolute paths. When another
key takes the slot, what the key leaving it owns (`src/`, `build/`, `dist/` with the wheel setup.py
built, `build.json`) is moved, not deleted, to `kept/<key>/`; when that key comes back it is moved
into the same slot again: the build reuses its wheel, or ninja finds every object newer than its
sources. Moves are renames within the cache: no copying, mtimes unchanged.

Kept builds are bounded by size (MAMBAWIN_KEEP_MB, default 10000 MB): after each move the least
recently used are removed. `mambawin cache` lists them; `mambawin cache --prune` applies a bound.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from mambawin.cache import cache_dir, remove_tree
from mambawin.errors import UsageError

KEEP_MB_VAR = "MAMBAWIN_KEEP_MB"
DEFAULT_KEEP_MB = 10_000
MOVED = ("src", "build", "dist", "build.json")  # what a key owns in its slot
META = "kept.json"


@dataclass(frozen=True)
class Kept:
    """One kept build."""

    key: str
    slot: str
    size: int  # bytes
    last_used: float  # seconds since the epoch
    path: Path


def kept_root() -> Path:
    """Where kept builds live."""
    return cache_dir() / "kept"


def keep_limit(env: Mapping[str, str] | None = None) -> int:
    """The size bound in bytes, from MAMBAWIN_KEEP_MB; UsageError on a value that is no size."""
    text = (os.environ if env is None else env).get(KEEP_MB_VAR, "").strip()
    if not text:
        return DEFAULT_KEEP_MB * 1_000_000
    if not text.isdigit():
        msg = f"{KEEP_MB_VAR}={text!r} is not a whole number of MB: set e.g. {KEEP_MB_VAR}=20000"
        raise UsageError(msg)
    return int(text) * 1_000_000


def shelve(slot_root: Path, key: str) -> Path | None:
    """Move the slot's tree and objects of key to kept/<key>/; None when there is nothing."""
    present = [name for name in MOVED if (slot_root / name).exists()]
    if not key or "src" not in present:
        return None
    target = kept_root() / key
    remove_tree(target)  # a stale copy of the same key: the slot's is newer
    target.mkdir(parents=True)
    for name in present:
        os.replace(slot_root / name, target / name)
    _write_meta(target, key, slot_root.name)
    return target


def restore(slot_root: Path, key: str) -> bool:
    """Move kept/<key>/ back into its slot; False when the key was not kept (or not whole)."""
    source = kept_root() / key
    meta = _read_meta(source)
    if meta.get("slot") != slot_root.name or not (source / "src").is_dir():
        return False
    for name in MOVED:
        if (source / name).exists():
            remove_tree(slot_root / name)
            os.replace(source / name, slot_root / name)
    remove_tree(source)
    return True


def listing() -> list[Kept]:
    """Every kept build, most recently used first."""
    found = []
    for folder in _folders():
        meta = _read_meta(folder)
        used = meta.get("last_used")
        when = float(used) if isinstance(used, (int, float)) else folder.stat().st_mtime
        found.append(Kept(folder.name, str(meta.get("slot", "?")), _size(folder), when, folder))
    return sorted(found, key=lambda k: k.last_used, reverse=True)


def evict(limit: int) -> list[Kept]:
    """Remove the least recently used kept builds until the rest fit in limit bytes."""
    removed = []
    kept = listing()
    total = sum(k.size for k in kept)
    for entry in reversed(kept):
        if total <= limit:
            break
        remove_tree(entry.path)
        total -= entry.size
        removed.append(entry)
    return removed


def _folders() -> Iterator[Path]:
    root = kept_root()
    if root.is_dir():
        yield from (p for p in root.iterdir() if p.is_dir())


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
    try:
        data = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
