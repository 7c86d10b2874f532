"""The one way mambawin deletes a tree or a file, or changes a mode; and the checks of a --root.

What is mambawin's is decided by its record (mambawin.store.record: the registry's entry and the
folder's marker must agree for exactly that path). remove_tree deletes a path only when it is
such a folder or lies inside one, and never:

- follows a symlink: a link inside an owned tree is removed as a link; a link standing where the
  tree should be only when it lies inside an owned folder;
- crosses a mount: a mount point inside the tree (or the tree itself mounted) is refused before
  anything is deleted;
- deletes what a manifest does not list: in a folder a user named (a --root) only the files
  mambawin wrote go; the user's own stay, and so do the folders holding them;
- changes the mode of anything outside the tree (read-only folders inside it are made writable
  entry by entry, each looked at with lstat, never through a link);
- touches `/`, a home folder, the current folder, or a folder holding any of them.

shutil.rmtree and chmod appear in this module alone (a test keeps it so). A refusal is
NotOwnedError (exit 10) naming the path.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path, PurePosixPath

from mambawin.errors import NotOwnedError, UsageError, os_error
from mambawin.store import registry
from mambawin.store.record import CACHE_VAR as CACHE_VAR
from mambawin.store.record import LICENCE_RECORD, forget, owning
from mambawin.store.record import MARKER as MARKER
from mambawin.store.record import adopt as adopt
from mambawin.store.record import cache_dir as cache_dir
from mambawin.store.record import check_refill as check_refill
from mambawin.store.record import claim as claim
from mambawin.store.record import inside_cache as inside_cache
from mambawin.store.record import mark as mark
from mambawin.store.record import marked_as as marked_as
from mambawin.store.record import moved as moved
from mambawin.store.record import owner as owner
from mambawin.store.record import protected as protected
from mambawin.store.record import real_path as real_path
from mambawin.store.record import registry_path as registry_path
from mambawin.store.registry import WHOLE

IsMount = Callable[[Path], bool]


# ---- the one atomic write -----------------------------------------------------------------------


TEMP_PREFIX = ".mambawin-tmp-"  # a file write_file leaves only when the process is killed


def write_file(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write bytes through a temp file beside path and os.replace it into place (the one atomic
    write; mambawin.store.atomic.write_file is this, for callers above this module).

    mode: the file's permissions; None gives what a plain open() would (0o666 less the umask),
    not the 0o600 of the temp file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        set_mode(Path(temp), mode if mode is not None else 0o666 & ~_umask())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


# ---- a --root: checked before any work ----------------------------------------------------------


def check_root(
    root: Path,
    what: str,
    name: str,
    legacy: Callable[[set[str]], bool] = lambda _: False,
    *,
    ismount: IsMount = os.path.ismount,
    flag: str = "--root",
) -> bool:
    """Whether the --root of a folder of kind what (name: how a refusal calls it) exists;
    UsageError, before anything is changed, when mambawin may not fill it: no real folder (a
    link, a file, a FIFO), a mount point, a folder it made for something else, or one holding
    someone else's files (not recorded and not empty, unless legacy takes its entries: an older
    mambawin's layout). Reads only."""
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise os_error(exc, "read --root") from exc
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{flag} {root} is {_kind(mode)}: pass a folder of its own for {name}")
    _not_the_cache(root, name, flag)
    if ismount(root):
        msg = (
            f"{flag} {root} is a mount point: mambawin moves a whole folder into place and never "
            "deletes across a mount; pass a folder inside it"
        )
        raise UsageError(msg)
    marked = marked_as(root)
    if marked not in (None, what):
        msg = f"{flag} {root} is a folder mambawin made for something else ({marked}): pass another"
        raise UsageError(msg)
    try:
        entries = set(os.listdir(root))
    except OSError as exc:
        raise os_error(exc, "read --root") from exc
    if marked is None and entries and not legacy(entries):
        msg = (
            f"{flag} {root} is not empty and is not {name} (mambawin has no record of making "
            "it): mambawin never deletes what it did not make; pass a new or empty folder"
        )
        raise UsageError(msg)
    return True


def _not_the_cache(root: Path, name: str, flag: str) -> None:
    """UsageError for a --root that is mambawin's cache folder or holds it: the finished tree is
    moved in whole where the cache (and mambawin's record in it) stands, so the move fails after
    the whole download, and the record would name the cache as the root."""
    real, cache = real_path(root), Path(os.path.realpath(cache_dir()))  # the cache may be a link
    if real == cache or real in cache.parents:
        what = "is mambawin's cache folder" if real == cache else f"holds mambawin's cache {cache}"
        msg = (
            f"{flag} {root} {what}: pass a folder of its own for {name} (leave {flag} out to "
            "keep it inside the cache)"
        )
        raise UsageError(msg)


def _kind(mode: int) -> str:
    """What a path of this lstat mode is, said of a --root that is no folder."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISREG(mode):
        return "a file, not a folder"
    return "not a folder (a FIFO, a socket or a device)"


# ---- deleting, and changing a mode --------------------------------------------------------------


def remove_tree(path: Path, *, ismount: IsMount = os.path.ismount) -> None:
    """Delete a tree (or a file) mambawin owns: in a folder with a manifest only what it lists;
    a missing path is fine; NotOwnedError for a path mambawin did not make (or one across a
    mount), FileSystemError when the system refuses."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise os_error(exc, "look at") from exc
    why = protected(path)
    if why is not None:
        raise NotOwnedError(
            f"refusing to remove {path}: {why}; mambawin removes only its own folders"
        )
    found = owning(path)
    if found is None:
        msg = (
            f"refusing to remove {path}: mambawin did not make it (it has no record of it or of "
            "a folder above it); move it away, or delete it yourself if it is a leftover"
        )
        raise NotOwnedError(msg)
    folder, entry = found
    rel = real_path(path).relative_to(folder).as_posix()
    listed = None if entry.files is None else set(entry.files)
    try:
        if stat.S_ISDIR(info.st_mode) and not _is_link(info):
            _same_mount(path, folder, ismount)
            if listed is None or registry.whole(rel, listed):
                _make_removable(path, info, ismount)
                shutil.rmtree(path)
            else:
                _remove_listed(folder, listed, rel, ismount)
        elif listed is None or rel in listed or registry.whole(rel, listed):
            _unlink(path, info)  # a file or a link of ours: the entry itself, never a target
        else:
            msg = (
                f"refusing to remove {path}: mambawin did not write it (its record of {folder} "
                "does not list it)"
            )
            raise NotOwnedError(msg)
    except OSError as exc:
        raise os_error(exc, "remove") from exc
    if not os.path.lexists(path) or rel == ".":
        forget(path)


def set_mode(path: Path, mode: int) -> None:
    """chmod a file or folder mambawin wrote, never through a link: a link standing there is
    refused (NotOwnedError), its target left as it is."""
    if _is_link(os.lstat(path)):
        raise NotOwnedError(f"refusing to change the mode of {path}: it is a link")
    os.chmod(path, mode)


def _same_mount(path: Path, folder: Path, ismount: IsMount) -> None:
    """NotOwnedError when path, or a folder between the recorded folder and it, is another
    file system's mount point: nothing is deleted across a mount."""
    device = os.lstat(folder).st_dev
    step = real_path(path)
    if ismount(step):
        raise NotOwnedError(_across(path, step))
    while step != folder and step != step.parent:
        if os.lstat(step).st_dev != device or ismount(step):
            raise NotOwnedError(_across(path, step))
        step = step.parent


def _across(path: Path, mount: Path) -> str:
    return (
        f"refusing to remove {path}: {mount} is a mount point and mambawin never deletes "
        "across a mount; unmount it first"
    )


def _remove_listed(folder: Path, listed: set[str], under: str, ismount: IsMount) -> None:
    """Remove what the manifest lists at or below under (relative to folder), deepest first:
    files and links, folders owned whole, then the listed folders left empty. A name whose
    folder on the way is now a link or a mount is left (never reached through it)."""
    prefix = "" if under == "." else under + "/"
    mine = sorted(
        (n for n in listed if n.startswith(prefix) or n.rstrip("/") == under),
        key=lambda n: n.count("/"),
        reverse=True,
    )
    device = os.lstat(folder).st_dev
    for name in mine:
        if name.endswith("/") and not name.endswith(WHOLE):
            continue  # a folder: removed below once its content is gone
        bare = name.removesuffix(WHOLE)
        path = folder / bare
        if not _reachable(folder, bare, device, ismount):
            continue
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            continue
        if name.endswith(WHOLE) and stat.S_ISDIR(info.st_mode) and not _is_link(info):
            if info.st_dev != device or ismount(path):
                continue  # another file system mounted at wine's prefix, say: never entered
            _make_removable(path, info, ismount)
            shutil.rmtree(path)
        elif stat.S_ISREG(info.st_mode) or _is_link(info):
            _unlink(path, info)  # a FIFO or a folder now standing at the name is not what we wrote
    for name in mine:
        if name.endswith("/") and not name.endswith(WHOLE):
            with suppress(OSError):  # one holding the user's files stays, with them
                (folder / name).rmdir()
    if under == ".":
        for own in (MARKER, LICENCE_RECORD):  # mambawin's records in the folder go with it
            with suppress(FileNotFoundError):
                if stat.S_ISREG(os.lstat(folder / own).st_mode):
                    (folder / own).unlink()
        with suppress(OSError):
            folder.rmdir()
    else:
        with suppress(OSError):
            (folder / under).rmdir()


def _reachable(folder: Path, rel: str, device: int, ismount: IsMount) -> bool:
    """Every folder between folder and rel is a real folder on folder's file system."""
    step = folder
    for part in PurePosixPath(rel).parts[:-1]:
        step = step / part
        try:
            info = os.lstat(step)
        except OSError:
            return False
        if not stat.S_ISDIR(info.st_mode) or _is_link(info) or info.st_dev != device:
            return False
        if ismount(step):
            return False
    return True


def _make_removable(folder: Path, info: os.stat_result, ismount: IsMount) -> None:
    """Give each folder of the tree (and on Windows each read-only file) the write permission
    its deletion needs; links are never followed, nothing outside the tree is changed, and a
    mount point inside is refused before rmtree reaches it."""
    if info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
        os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
    with os.scandir(folder) as entries:
        children = list(entries)
    for entry in children:
        child = entry.stat(follow_symlinks=False)
        path = Path(entry.path)
        if stat.S_ISDIR(child.st_mode) and not _is_link(child):
            if child.st_dev != info.st_dev or ismount(path):
                raise NotOwnedError(_across(folder, path))
            _make_removable(path, child, ismount)
        elif _windows_read_only(child):
            # git marks pack files read-only; Windows refuses to delete them (WinError 5).
            os.chmod(entry.path, stat.S_IMODE(child.st_mode) | stat.S_IWRITE)


def unlink(path: Path) -> None:
    """Delete one file mambawin wrote if it is there (a link as a link); Windows refuses a
    read-only file until it is made writable."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    _unlink(path, info)


def _unlink(path: Path, info: os.stat_result) -> None:
    if _windows_read_only(info):
        os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IWRITE)
    try:
        path.unlink()
    except OSError:
        if sys.platform != "win32" or not _is_link(info):
            raise
        os.rmdir(path)  # a directory link or junction: rmdir removes the link, not the target


def _is_link(info: os.stat_result) -> bool:
    """A symlink, or on Windows any reparse point (a junction): never entered, never changed."""
    reparse = getattr(info, "st_file_attributes", 0) & getattr(
        stat, "FILE_ATTRIBUTE_REPARSE_POINT", 0
    )
    return stat.S_ISLNK(info.st_mode) or bool(reparse)


def _windows_read_only(info: os.stat_result) -> bool:
    return (
        sys.platform == "win32" and stat.S_ISREG(info.st_mode) and not info.st_mode & stat.S_IWRITE
    )


# ---- the cache folder: the root of what mambawin owns -------------------------------------------
