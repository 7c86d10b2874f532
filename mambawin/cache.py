"""Where mambawin keeps its cache (mirrors, build folders, logs); mambawin.owned removes
its folders."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from mambawin.envvars import env_path
from mambawin.errors import FileSystemError

CACHE_VAR = "MAMBAWIN_CACHE_DIR"


def cache_dir() -> Path:
    """The user's cache folder for mambawin; MAMBAWIN_CACHE_DIR overrides it (tests, CI).

    FileSystemError when something that is not a folder stands there: every command that uses
    the cache stops on it the same way, before any work."""
    override = env_path(CACHE_VAR)
    path = override or Path(platformdirs.user_cache_dir("mambawin", False))
    if os.path.lexists(path) and not path.is_dir():
        where = f"{CACHE_VAR}={path}" if override else f"mambawin's cache folder {path}"
        msg = (
            f"{where} is not a folder (a file, a FIFO or a broken link stands there): "
            f"point {CACHE_VAR} at a folder, or move that file away"
        )
        raise FileSystemError(msg)
    return path
