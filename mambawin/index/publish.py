"""Publishing into an index folder: a name is published once with one content, files are
copied (a reflink where possible) world-readable, runs take turns, and a killed run's leftovers
are recognised and removed."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from packaging.utils import (
    canonicalize_name,
    canonicalize_version,
    parse_wheel_filename,
)

from mambawin.atomic import TEMP_PREFIX, write_text
from mambawin.errors import UsageError
from mambawin.index.model import sha256_file

MARKER = ".mambawin-index.json"


LOCK = ".mambawin-index.lock"


STAGING_PREFIX = ".mambawin-add-"
FILE_MODE, DIR_MODE = 0o644, 0o755  # published: readable by a web server's own user


_COPY_CHUNK = 1 << 20


_FICLONE = 0x40049409  # linux/fs.h: share the source's blocks (btrfs, XFS, bcachefs)


Identity = tuple[str, str, str, tuple[str, ...]]


def identity(file_name: str) -> Identity:
    """What makes two wheel file names the same distribution file for pip: the normalized
    project (PEP 503), the normalized version (2.2.6.0 is 2.2.6), the build tag and the tags."""
    name, version, build, tags = parse_wheel_filename(file_name)
    return (
        str(canonicalize_name(name)),
        canonicalize_version(version, strip_trailing_zero=True),
        "".join(map(str, build)),
        tuple(sorted(str(t) for t in tags)),
    )


def new_wheels(sources: list[Path], files: Path) -> list[Path]:
    """The sources not yet published; UsageError naming both sha256 when a published name (in any
    spelling) would get other bytes, or two sources claim one name with different bytes."""
    seen: dict[Identity, tuple[str, str]] = {}
    if files.is_dir():
        for path in wheel_files(files):
            seen[identity(path.name)] = (path.name, sha256_file(path))
    new = []
    for path in sources:
        digest, key = sha256_file(path), identity(path.name)
        if key in seen:
            name, published = seen[key]
            if published != digest:
                msg = (
                    f"{path.name} (sha256 {digest}) has other bytes than the published "
                    f"{name} (sha256 {published}): a published wheel never changes; "
                    "nothing was added. Give the new build another version or local label"
                )
                raise UsageError(msg)
            continue
        seen[key] = (path.name, digest)
        new.append(path)
    return new


def copy_in(new: list[Path], files: Path) -> tuple[str, ...]:
    """Copy the new wheels into files/ (never a link: a published file must not follow the
    wheelhouse): all staged in one hidden folder first, then each moved into place."""
    if not new:
        return ()
    scratch = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=files))
    try:
        for source in new:
            copy_file(source, scratch / source.name)
        for source in new:
            os.replace(scratch / source.name, files / source.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return tuple(source.name for source in new)


def copy_file(source: Path, target: Path) -> None:
    """A real copy of source's bytes (through a symlink), world-readable; a reflink (copy on
    write) where the file system has one, so a big wheel costs no space twice."""
    with source.open("rb") as reader, target.open("wb") as writer:
        if not _reflink(reader, writer):
            shutil.copyfileobj(reader, writer, _COPY_CHUNK)
    os.chmod(target, FILE_MODE)


def _reflink(reader: Any, writer: Any) -> bool:
    if sys.platform != "linux":
        return False
    import fcntl

    try:
        fcntl.ioctl(writer.fileno(), _FICLONE, reader.fileno())
    except OSError:
        return False
    return True


def write_page(path: Path, text: str) -> Path:
    make_dir(path.parent)
    return write_text(path, text, mode=FILE_MODE)


def make_dir(folder: Path) -> None:
    """A folder of the index, world-readable so a web server running as its own user serves it."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    for made in missing:
        os.chmod(made, DIR_MODE)


# ---- one run at a time, and what a killed run left ------------------------------------------


@contextmanager
def locked(out: Path, timeout: float) -> Iterator[None]:
    lock = FileLock(out / LOCK, timeout=timeout)
    try:
        with lock:
            yield
    except Timeout:
        msg = (
            f"another `mambawin index` has held {out / LOCK} for {timeout:.0f} s: let it "
            "finish, or stop it; the lock is released when that process ends"
        )
        raise UsageError(msg) from None


def clean_leftovers(out: Path) -> None:
    """Remove the staging folders and temp files of a run that was killed midway (only names
    mambawin gives its own temporary files, inside an index it owns)."""
    for path in sorted(out.rglob(".mambawin-*"), key=lambda p: len(p.parts), reverse=True):
        if path.name.startswith(STAGING_PREFIX) and path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        elif path.name.startswith(TEMP_PREFIX) and path.is_file():
            path.unlink(missing_ok=True)


def remove_if_only_lock(out: Path) -> None:
    """A failed first run leaves no folder behind (only the lock file was written there)."""
    try:
        if {p.name for p in out.iterdir()} <= {LOCK}:
            (out / LOCK).unlink(missing_ok=True)
            out.rmdir()
    except OSError:
        pass


# ---- wheels ------------------------------------------------------------------------------------


def wheel_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        msg = f"{folder} is not a folder of wheels: pass the wheelhouse that holds your .whl files"
        raise UsageError(msg)
    return sorted(p for p in folder.glob("*.whl") if p.is_file())


def check_out(out: Path) -> None:
    """--out is a folder mambawin may write: absent, empty, or an index of its own."""
    if out.exists() and not out.is_dir():
        msg = f"{out} is a file, not a folder: pass a folder for the index as --out"
        raise UsageError(msg)
    if not (out / LOCK).exists():  # else another run is making it: checked again under the lock
        claim(out)


def claim(out: Path) -> None:
    """Refuse a non-empty folder that is not a mambawin index: its files are not ours to change."""
    if out.is_dir() and {p.name for p in out.iterdir()} - {LOCK} and not (out / MARKER).is_file():
        msg = (
            f"{out} is not empty and holds no mambawin index ({MARKER} missing): pass a new or "
            "empty --out folder, or the folder of an earlier `mambawin index` run"
        )
        raise UsageError(msg)
