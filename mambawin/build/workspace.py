"""Where a build happens and how its wheel reaches --out without ever leaving half a file there.

Layout under the cache: `builds/<package>-<slot>/src` (the patched tree), `build/` (setuptools'
build base: ninja objects), `dist/`, `logs/`, `KEY` (the build key of the tree in src/) and `py`
(a link to the site-packages holding torch). The slot is a hash of the toolchain and options only
(not the upstream commit nor the Python), so every compiler command of a slot has the same paths:
ninja's build.ninja holds absolute paths (a new path would be a full rebuild), and a compiler
cache hashes the arguments and the paths in preprocessed output (v2.2.6 and v2.2.6.post3, whose
kernels are identical, compile to cache hits only from one folder). Another tree in the same
slot replaces src/; its files are all newer than the objects, so ninja rebuilds every unit and
no stale object survives.
One build per slot at a time: a second build of another tree in the same slot would swap src/
under the first.
Folder names stay short on purpose: Windows' 260-character MAX_PATH (C1081 "file name too long").
"""

from __future__ import annotations

import hashlib
import importlib.util
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


def workspace_for(slot: str) -> Workspace:
    """The workspace of one toolchain slot (not created)."""
    return Workspace(builds_root() / slot)


@contextmanager
def staging_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A temporary folder inside parent (same file system, so a rename into place is atomic)."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield path
    finally:
        remove_tree(path)


def adopt_source(staged: Path, workspace: Workspace, key: str) -> bool:
    """Move a patched tree into the workspace; True when the tree of key was already there."""
    marker = workspace.root / "KEY"
    if workspace.src.is_dir() and _read(marker) == key:
        return True
    workspace.root.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)  # no KEY while src/ is being swapped: a crash means "rebuild"
    remove_tree(workspace.src)
    os.replace(staged, workspace.src)
    marker.write_text(key + "\n", encoding="utf-8")
    return False


def holds(workspace: Workspace, key: str) -> bool:
    """Whether the workspace has objects built from the tree of key (ninja will reuse them)."""
    return workspace.build_base.is_dir() and _read(workspace.root / "KEY") == key


def torch_link(workspace: Workspace) -> Path | None:
    """`<workspace>/py`, a link to the site-packages that holds torch, or None if not possible.

    torch's include paths come from torch.__file__; with this folder first on PYTHONPATH they
    read `<workspace>/py/torch/include` from every venv, so another venv with the same torch
    compiles to the same commands (ninja reuses objects, the compiler cache hits). A directory
    junction on Windows: it needs no administrator rights, unlike a symlink.
    """
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return None
    target = Path(spec.origin).resolve().parent.parent
    link = workspace.root / "py"
    try:
        if link.is_symlink() or link.exists():
            if link.resolve() == target:
                return link
            _unlink_dir(link)
        workspace.root.mkdir(parents=True, exist_ok=True)
        _link_dir(target, link)
    except OSError:
        return None  # no links on this file system: builds work, only hits across venvs drop
    return link


def _link_dir(target: Path, link: Path) -> None:
    if os.name == "nt":
        import _winapi  # CPython's own; os.symlink on Windows needs developer mode or admin

        _winapi.CreateJunction(str(target), str(link))  # type: ignore[attr-defined]
    else:
        os.symlink(target, link, target_is_directory=True)


def _unlink_dir(link: Path) -> None:
    # os.rmdir removes a junction (never its target's files); os.unlink removes a symlink.
    if os.name == "nt" and not link.is_symlink():
        os.rmdir(link)
    else:
        link.unlink()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


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

