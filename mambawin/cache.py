"""Where mambawin keeps its cache (upstream mirrors, build folders, logs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The user's cache folder for mambawin; MAMBAWIN_CACHE_DIR overrides it (tests, CI)."""
    override = os.environ.get("MAMBAWIN_CACHE_DIR")
    return Path(override) if override else Path(platformdirs.user_cache_dir("mambawin", False))
