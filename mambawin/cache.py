"""Where mambawin keeps its cache (mirrors, build folders, logs), and how it removes its folders."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The user's cache folder for mambawin; MAMBAWIN_CACHE_DIR overrides it (tests, CI)."""
    override = os.environ.get("MAMBAWIN_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("mambawin", False))


def remove_tree(path: Path) -> None:
    """Delete a folder tree mambawin made, read-only files included; a missing folder is fine."""
    if not path.exists():
        return
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=_make_writable_and_retry)
    else:
        shutil.rmtree(path, onerror=_make_writable_and_retry)


def _make_writable_and_retry(func: Callable[[str], object], name: str, _exc: object) -> None:
    # git marks pack files read-only; Windows refuses to delete them (WinError 5) until cleared.
    os.chmod(name, stat.S_IWRITE)
    func(name)


# Temp files write_atomic leaves only when the process is killed mid-write; a later run that owns
# the folder may remove them (index.simple does).
TEMP_PREFIX = ".mambawin-tmp-"


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> Path:
    """Write text through a temp file in the same folder and os.replace it into place."""
    return write_atomic_bytes(path, text.encode("utf-8"), mode=mode)


def write_atomic_bytes(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write bytes through a temp file in the same folder and os.replace it into place.

    mode: the file's permissions; None gives what a plain open() would (0o666 less the umask),
    not the 0o600 of the temp file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp, mode if mode is not None else 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path
