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
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin.builder import kept
from mambawin.errors import FileSystemError, UsageError
from mambawin.store.atomic import probe_writable
from mambawin.store.owned import cache_dir, claim, remove_tree
from mambawin.wheel.provenance import ensure_replaceable


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


# What a workspace held before mambawin marked its folders (store.owned): such a workspace of
# an older version is adopted as it is.
WORKSPACE_NAMES = (
    "src",
    "build",
    "dist",
    "logs",
    "KEY",
    "py",
    "build.json",
    "build.cfg",
    "build.lock",
    ".mambawin-*",
)


def builds_root() -> Path:
    """The folder holding every build key's workspace."""
    return cache_dir() / "builds"


def workspace_for(slot: str) -> Workspace:
    """The workspace of one toolchain slot (not created)."""
    return Workspace(builds_root() / slot)


def adopt_source(staged: Path, workspace: Workspace, key: str, keep_limit: int) -> bool:
    """Put the tree of key into the workspace; True when its objects are there to reuse (it was
    the slot's last build, or a kept one moved back). The key leaving the slot is kept."""
    claim(workspace.root, "build-workspace", WORKSPACE_NAMES)  # refused when not ours
    marker = workspace.root / "KEY"
    if workspace.src.is_dir() and _read(marker) == key:
        return True
    leaving = _read(marker)
    marker.unlink(missing_ok=True)  # no KEY while src/ is being swapped: a crash means "rebuild"
    if leaving:
        kept.shelve(workspace.root, leaving)
    reused = kept.restore(workspace.root, key)
    if not reused:
        remove_tree(workspace.src)  # a tree no KEY names (a crash mid-swap) is not reusable
        remove_tree(workspace.build_base)
        os.replace(staged, workspace.src)
    marker.write_text(key + "\n", encoding="utf-8")
    kept.evict(keep_limit)
    return reused


def clamp_mtimes(tree: Path, epoch: int) -> None:
    """Date every file of a staged tree (ours: a fresh checkout or copy) at epoch.

    nvcc's -lineinfo writes each source file's modification time into the object (the DWARF
    line table), and a checkout dates its files when it was made: two builds of one commit would
    differ in those bytes. Objects compiled from it are always newer than epoch, so ninja's
    up-to-date checks still hold (a new key never reuses another tree's objects)."""
    for path in tree.rglob("*"):
        if ".git" in path.relative_to(tree).parts or path.is_symlink() or not path.is_file():
            continue
        os.utime(path, (epoch, epoch))


def holds(workspace: Workspace, key: str) -> bool:
    """Whether the objects built from the tree of key are there to reuse (in the workspace, or
    kept for it)."""
    if workspace.build_base.is_dir() and _read(workspace.root / "KEY") == key:
        return True
    return (kept.kept_root() / key / "build").is_dir()


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
    """Move a finished wheel into out_dir in one rename; an older wheel there stays until then.

    A file of that name that mambawin did not write is refused (the wheel stays in the build
    folder, named in the error)."""
    target = out_dir / wheel.name
    ensure_replaceable(target, wheel)
    os.replace(wheel, target)
    return target


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---- the user's folders: --source in, --out out ---------------------------------------------

_COPY_IGNORE = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__")


def copy_source(source: Path, dest: Path) -> None:
    """Copy a --source tree to dest without following a symlink out of it or in circles.

    A link whose target lies outside the tree is refused (the build would read, and a patch could
    write, a file that is not part of the source). Links inside are copied as links, made
    relative, so they point into the copy, never back into the user's tree.
    """
    root = source.resolve()
    inside = _links_inside(root)
    shutil.copytree(root, dest, symlinks=True, ignore=_COPY_IGNORE)
    for link, target in inside:
        copied = dest / link.relative_to(root)
        if copied.is_symlink():
            copied.unlink()
            copied.symlink_to(os.path.relpath(dest / target, copied.parent))


def _links_inside(root: Path) -> list[tuple[Path, Path]]:
    """Every symlink of the tree with its target (relative to root); UsageError for one that
    leaves the tree or does not resolve."""
    found = []
    for folder, dirs, files in os.walk(root):  # followlinks=False: a link is never entered
        for name in (*dirs, *files):
            link = Path(folder) / name
            if not link.is_symlink():
                continue
            try:
                target = link.resolve(strict=True)
            except (OSError, RuntimeError):
                msg = (
                    f"--source: {link} is a symlink that does not resolve (missing or in a "
                    "loop): fix or remove it, or copy the tree without it"
                )
                raise UsageError(msg) from None
            if target != root and root not in target.parents:
                msg = (
                    f"--source: {link} points outside the tree, to {target}: copy that file "
                    "into the tree or remove the link"
                )
                raise UsageError(msg)
            found.append((link, target.relative_to(root)))
    return found


# A one-arch mamba-ssm wheel is about 19 MB (docs/benchmarks.md §2); the complex kernels about
# double it. The check wants room for the wheel twice: staged in --out, then the rewrite.
WHEEL_MB_PER_ARCH = 20


def check_out(
    out: Path,
    archs: int,
    keep_complex: bool,
    *,
    disk_usage: Callable[[Path], Any] = shutil.disk_usage,
) -> None:
    """--out can take the wheel, checked before any fetch or compile: a folder (or one that can
    be made), writable, with room for the expected wheel."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file: pass a folder for the wheel")
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        msg = f"--out {out}: {existing} is a file, not a folder: pass another --out"
        raise UsageError(msg)
    # a real write says more than os.access (read-only mounts, ACLs, root); the refusal names
    # the folder, not the probe's temp name (`cannot write the wheel into …/tmpc2jq0e_6`)
    probe_writable(existing, "--out's folder")
    need = WHEEL_MB_PER_ARCH * max(archs, 1) * (2 if keep_complex else 1) * 2 * 1_000_000
    free = disk_usage(existing).free
    if free < need:
        msg = (
            f"--out {out}: {free / 1e6:.0f} MB free on its drive, and the wheel needs about "
            f"{need / 1e6:.0f} MB: free some space or choose another --out"
        )
        raise FileSystemError(msg)
