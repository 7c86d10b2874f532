"""mambawin's record of the folders it made: the registry's shape, its total parse, its lock,
and the manifests of what mambawin wrote in a folder a user named.

The registry (`<cache>/state/owned.json`, store.owned.registry_path) maps each folder's real
path to its kind, the random token its `.mambawin-owned` marker carries, and its manifest (None
for a folder mambawin made empty itself and owns whole). store.owned decides with it what is
mambawin's; this module only reads, parses and writes it (the writer is passed in).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from filelock import FileLock, Timeout

from mambawin.errors import FileSystemError, os_error
from mambawin.userfile import parse_json

NAME = "owned.json"  # in <cache>/state
_MOST = 256 << 20  # a toolchain's manifest is ~10,000 names; far more is not a record of ours
LOCK_SECONDS = 60.0
WHOLE = "/**"  # a manifest name ending so: a folder mambawin owns with all it holds


@dataclass(frozen=True)
class Entry:
    """One folder mambawin made: its kind, the token its marker carries, and (for a folder a
    user named) the manifest of what mambawin wrote in it; None: the folder is wholly ours."""

    what: str
    token: str
    files: tuple[str, ...] | None = None


def _damaged(path: Path, why: str) -> FileSystemError:
    return FileSystemError(
        f"mambawin's ownership record {path} {why}: move it away (mambawin then counts no "
        "folder as its own, so it deletes nothing until it makes its folders again)"
    )


def load(path: Path) -> dict[str, Entry]:
    """The registry's entries; {} when there is none; FileSystemError when it is damaged."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise os_error(exc, "read mambawin's ownership record") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > _MOST:
        raise _damaged(path, "is not a file mambawin wrote (a link, a FIFO, or too big)")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise os_error(exc, "read mambawin's ownership record") from None
    # A toolchain's manifest makes the record a few MB, read at every ownership question: the
    # same bytes (by their hash, never by a stat an inode's reuse could repeat) parse once.
    seen = (str(path), hashlib.sha256(raw).digest())
    if _last[0] == seen:
        return dict(_last[1])
    try:
        data = parse_json(raw)
    except ValueError:
        raise _damaged(path, "is not valid JSON") from None
    entries = _entries(data)
    if entries is None:
        raise _damaged(path, "does not have the shape mambawin writes")
    _last[:] = [seen, dict(entries)]
    return entries


_last: list[Any] = [None, {}]  # the stat of the record last parsed, and its entries


def _entries(data: object) -> dict[str, Entry] | None:
    """The entries of a parsed registry; None for any other shape (a total parse)."""
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(folders, dict):
        return None
    entries = {}
    for key, raw in folders.items():
        if not isinstance(raw, dict):
            return None
        what, token, files = raw.get("what"), raw.get("token"), raw.get("files")
        if not isinstance(what, str) or not isinstance(token, str) or not token:
            return None
        if files is not None and not (
            isinstance(files, list) and all(isinstance(f, str) and relative(f) for f in files)
        ):
            return None  # a name reaching out of its folder would make the manifest a weapon
        entries[key] = Entry(what, token, None if files is None else tuple(files))
    return entries


def relative(name: str) -> bool:
    """A manifest name: a relative path inside its folder (no `..` part, not absolute, no drive;
    `\\` counts as a separator, as Windows reads it). A plain string test: a record holds
    tens of thousands of names, checked at every read."""
    bare = name.removesuffix(WHOLE)
    if not bare or bare[0] in "/\\" or ":" in bare:
        return False
    return "/../" not in f"/{bare.replace(chr(92), '/')}/"  # chr(92): the backslash


def dump(entries: dict[str, Entry]) -> str:
    folders = {
        key: {
            "what": e.what,
            "token": e.token,
            "files": None if e.files is None else list(e.files),
        }
        for key, e in sorted(entries.items())
    }
    return json.dumps({"schema": 1, "folders": folders}) + "\n"  # no indent: C encoder


@contextmanager
def locked(path: Path, write: Callable[[Path, bytes], object]) -> Iterator[dict[str, Entry]]:
    """The entries at path, locked against other mambawin runs; written back with write (an
    atomic, private write) when the block ends without an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, "create mambawin's state folder") from None
    lock = FileLock(f"{path}.lock", timeout=LOCK_SECONDS)
    try:
        lock.acquire()
    except Timeout:
        msg = (
            f"another mambawin has held {path}.lock for {LOCK_SECONDS:.0f} s: let it finish "
            "(the lock is released when that process ends)"
        )
        raise FileSystemError(msg) from None
    except OSError as exc:
        raise os_error(exc, "lock mambawin's ownership record") from None
    try:
        entries = load(path)
        yield entries
        try:
            write(path, dump(entries).encode("utf-8"))
        except OSError as exc:
            raise os_error(exc, "write mambawin's ownership record") from None
    finally:
        lock.release()


def manifest(folder: Path, owned_whole: Iterable[str], marker: str) -> list[str]:
    """Every entry of a tree mambawin has just written: files and links by relative path,
    folders ending in `/`; each name in owned_whole (a top-level folder) as one `name/**`; the
    marker is not listed (it goes with the record)."""
    wholes = set(owned_whole)
    names = [f"{name}{WHOLE}" for name in sorted(wholes)]
    for top, dirs, files in os.walk(folder):
        rel_top = PurePosixPath(Path(top).relative_to(folder).as_posix())
        if rel_top == PurePosixPath("."):
            dirs[:] = [d for d in dirs if d not in wholes]
            files = [f for f in files if f != marker and f not in wholes]
        for name in [*dirs, *files]:
            rel = (rel_top / name).as_posix()
            real_dir = name in dirs and not os.path.islink(os.path.join(top, name))
            names.append(rel + "/" if real_dir else rel)
    return [name for name in names if relative(name)]  # an odd name stays unlisted: kept


def whole(rel: str, listed: set[str]) -> bool:
    """rel is, or lies inside, a folder the manifest owns whole."""
    parts = PurePosixPath(rel).parts
    return any("/".join(parts[:n]) + WHOLE in listed for n in range(1, len(parts) + 1))
