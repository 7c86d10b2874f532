"""Where a build happens and how its wheel reaches --out without ever leaving half a file there.

Layout under the cache: `builds/<package>-<version>-<key>/src` (the patched tree, at a path that
stays the same between runs, because ninja's build.ninja holds absolute source paths: a new path
would mean a full rebuild), `build/` (setuptools' build base: ninja objects), `dist/`, `logs/`.
Folder names stay short on purpose: Windows' 260-character MAX_PATH (C1081 "file name too long").
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mambawin.cache import cache_dir, remove_tree


@dataclass(frozen=True)
class Workspace:
    """The folders of one build key."""

    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def build_base(self) -> Path:
        return self.root / "build"

    @property
    def dist(self) -> Path:
        return self.root / "dist"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def new_log(self) -> Path:
        """A fresh log file name for this run (earlier runs' logs are kept)."""
        self.logs.mkdir(parents=True, exist_ok=True)
        return self.logs / time.strftime("build-%Y%m%d-%H%M%S.log")


def builds_root() -> Path:
    """The folder holding every build key's workspace."""
    return cache_dir() / "builds"


def workspace_for(version: str, key: str, package: str = "mamba") -> Workspace:
    """The workspace of one build key of one package (its short name; not created)."""
    return Workspace(builds_root() / f"{package}-{version}-{key}")


@contextmanager
def staging_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary folder inside parent (same file system, so a rename into place is atomic)."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield path
    finally:
        remove_tree(path)


def adopt_source(staged: Path, workspace: Workspace) -> bool:
    """Move a patched tree into the workspace; True when an identical one was already there."""
    if workspace.src.is_dir():
        return True
    workspace.root.mkdir(parents=True, exist_ok=True)
    os.replace(staged, workspace.src)
    return False


def publish(wheel: Path, out_dir: Path) -> Path:
    """Move a finished wheel into out_dir in one rename; an older wheel there stays until then."""
    target = out_dir / wheel.name
    os.replace(wheel, target)
    return target


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()

