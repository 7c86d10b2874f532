"""Where mambawin keeps its cache (mirrors, build folders, logs), and how it removes its folders."""

from __future__ import annotations

import os
import shutil
import stat
import sys
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
