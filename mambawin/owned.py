"""What mambawin owns, and the one way it deletes a tree.

The root of what it owns is its cache folder (cache_dir: mirrors, build folders, kept builds,
the Windows toolchain, logs).

Every folder mambawin may delete, empty or repair (a toolchain root, a build workspace, a kept
build, a team environment, a mirror, a cross or check work folder, a staging folder) carries a
marker file, `.mambawin-owned`, that mambawin wrote when it made the folder. remove_tree deletes
a path only when it is such a folder or lies inside one, and never:

- follows a symlink: a link inside a marked tree is removed as a link, a link standing where the
  tree should be is removed only when it lies inside a marked folder, otherwise it is refused;
- changes the mode of anything outside the tree: read-only folders inside it are made writable
  (POSIX refuses to delete an entry of a read-only folder; Windows a read-only file) entry by
  entry, each looked at with lstat, never through a link;
- touches `/`, a home folder, the current folder, or a folder holding any of them.

A refusal is NotOwnedError (exit 10) naming the path. Folders made by mambawin versions before
the marker are adopted (marked) by the code that knows their layout (see adopt).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from contextlib import suppress
from fnmatch import fnmatch
from pathlib import Path

import platformdirs

from mambawin.errors import FileSystemError, NotOwnedError, UsageError, os_error
from mambawin.userfile import env_path, parse_json

MARKER = ".mambawin-owned"
_MARKER_MAX = 4096  # a marker is one short JSON line; a bigger file is not one of ours


def mark(folder: Path, what: str) -> None:
    """Record that mambawin made folder (what: the kind of folder, e.g. "windows-toolchain")."""
    text = json.dumps({"owner": "mambawin", "what": what}) + "\n"
    (folder / MARKER).write_text(text, encoding="utf-8")


def marked_as(folder: Path) -> str | None:
    """The kind a valid marker in folder names, or None: folder is a real folder (not a link)
    holding a regular-file marker that mambawin wrote."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return None
        marker = folder / MARKER
        info = os.lstat(marker)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MARKER_MAX:
            return None
        data = parse_json(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("owner") != "mambawin":
        return None
    what = data.get("what")
    return what if isinstance(what, str) else ""


def owner(path: Path) -> Path | None:
    """The marked folder path is (or lies inside), by its real location; None if there is none."""
    real = _real(path)
    for folder in (real, *real.parents):
        if marked_as(folder) is not None:
            return folder
    return None


def adopt(folder: Path, what: str, names: Iterable[str]) -> bool:
    """Mark a folder an older mambawin made before markers existed: an unmarked real folder
    whose every entry matches one of names (glob patterns). True when folder is (now) marked."""
    if marked_as(folder) is not None:
        return True
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False
        entries = os.listdir(folder)
    except OSError:
        return False
    patterns = tuple(names)
    if not all(any(fnmatch(entry, p) for p in patterns) for entry in entries):
        return False
    mark(folder, what)
    return True


def claim(folder: Path, what: str, legacy: Iterable[str] = ()) -> Path:
    """folder, made and marked when absent; an existing one must be mambawin's (marked or inside
    a marked folder, empty, or an older mambawin's whose entries all match legacy);
    NotOwnedError otherwise."""
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        ours = owner(folder) is not None or adopt(folder, what, legacy)
        if folder.is_symlink() or not folder.is_dir() or not ours:
            msg = (
                f"{folder} is not a folder mambawin made (no {MARKER} in it, and it holds "
                "files mambawin does not write there): move it away and run again"
            )
            raise NotOwnedError(msg) from None
        return folder
    except OSError as exc:
        raise os_error(exc, "create the folder") from exc
    mark(folder, what)
    return folder


def check_root(
    root: Path, what: str, name: str, legacy: Callable[[set[str]], bool] = lambda _: False
) -> bool:
    """Whether the --root of a folder of kind what (name: how a refusal calls it) exists;
    UsageError, before anything is changed, when mambawin may not fill it: no real folder (a
    link, a file, a FIFO), a folder it made for something else, or one holding someone else's
    files (unmarked and not empty, unless legacy takes its entries: an older mambawin's layout,
    which the caller marks when it acts). Reads only."""
    try:
        mode = os.lstat(root).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise os_error(exc, "read --root") from exc
    if not stat.S_ISDIR(mode):
        raise UsageError(f"--root {root} is {_kind(mode)}: pass a folder of its own for {name}")
    marked = marked_as(root)
    if marked not in (None, what):
        msg = f"--root {root} is a folder mambawin made for something else ({marked}): pass another"
        raise UsageError(msg)
    entries = set(os.listdir(root))
    if marked is None and entries and not legacy(entries):
        msg = (
            f"--root {root} is not empty and is not {name} (no {MARKER}): "
            "mambawin never deletes what it did not make; pass a new or empty folder"
        )
        raise UsageError(msg)
    return True


def _kind(mode: int) -> str:
    """What a path of this lstat mode is, said of a --root that is no folder."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISREG(mode):
        return "a file, not a folder"
    return "not a folder (a FIFO, a socket or a device)"


def protected(path: Path) -> str | None:
    """Why path may never be deleted (it is /, a home folder, the current folder or holds one),
    or None."""
    real = _real(path)
    if real == Path(real.anchor):
        return "it is the file system's root"
    for what, place in _places():
        if place == real or real in place.parents:
            return f"it is {what}" if place == real else f"it holds {what} ({place})"
    return None


def remove_tree(path: Path) -> None:
    """Delete a tree (or a file) mambawin owns; a missing path is fine; NotOwnedError for a path
    mambawin did not make, FileSystemError when the system refuses."""
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
    if owner(path) is None:
        msg = (
            f"refusing to remove {path}: mambawin did not make it (no {MARKER} in it or in a "
            "folder above it); move it away, or delete it yourself if it is a leftover"
        )
        raise NotOwnedError(msg)
    try:
        if stat.S_ISDIR(info.st_mode) and not _is_link(info):
            _make_removable(path, info)
            shutil.rmtree(path)
        else:  # a file or a link inside a marked folder: the entry itself, never a link's target
            _unlink(path, info)
    except OSError as exc:
        raise os_error(exc, "remove") from exc


def _make_removable(folder: Path, info: os.stat_result) -> None:
    """Give each folder of the tree (and on Windows each read-only file) the write permission
    its deletion needs; links are never followed, nothing outside the tree is changed."""
    if info.st_mode & stat.S_IRWXU != stat.S_IRWXU:
        os.chmod(folder, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
    with os.scandir(folder) as entries:
        children = list(entries)
    for entry in children:
        child = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(child.st_mode) and not _is_link(child):
            _make_removable(Path(entry.path), child)
        elif _windows_read_only(child):
            # git marks pack files read-only; Windows refuses to delete them (WinError 5).
            os.chmod(entry.path, stat.S_IMODE(child.st_mode) | stat.S_IWRITE)


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


def _real(path: Path) -> Path:
    """path's real location, its own last part not resolved (a link is judged as a link)."""
    absolute = Path(os.path.abspath(path))
    if absolute == Path(absolute.anchor):
        return absolute
    return Path(os.path.realpath(absolute.parent)) / absolute.name


def _places() -> list[tuple[str, Path]]:
    """The folders never to delete: the current folder and every home folder."""
    places: list[tuple[str, Path]] = []
    with suppress(OSError):  # the current folder was deleted under us: nothing to protect
        places.append(("the current folder", Path(os.path.realpath(Path.cwd()))))
    homes: set[Path] = set()
    with suppress(RuntimeError, KeyError):  # no HOME and no password entry: no home to protect
        homes.add(Path.home())
    if sys.platform != "win32":
        import pwd

        homes |= {Path(entry.pw_dir) for entry in pwd.getpwall() if entry.pw_dir}
    places += [("a home folder", Path(os.path.realpath(home))) for home in homes]
    return places


# ---- the cache folder: the root of what mambawin owns -------------------------------------------

CACHE_VAR = "MAMBAWIN_CACHE_DIR"


def cache_dir() -> Path:
    """The user's cache folder for mambawin; MAMBAWIN_CACHE_DIR overrides it (tests, CI).

    FileSystemError when something that is not a folder stands there or above it (the cache
    could never be made): every use of the cache stops on it the same way."""
    override = env_path(CACHE_VAR)
    path = override or Path(platformdirs.user_cache_dir("mambawin", False))
    blocker = _not_a_folder(path)
    if blocker is not None:
        where = f"{CACHE_VAR}={path}" if override else f"mambawin's cache folder {path}"
        under = f"lies under {blocker}, which is no folder"
        under = "is not a folder" if blocker == path else under
        msg = (
            f"{where} {under} (a file, a FIFO or a broken link stands there): "
            f"point {CACHE_VAR} at a folder, or move that file away"
        )
        raise FileSystemError(msg)
    return path


def _not_a_folder(path: Path) -> Path | None:
    """The nearest existing path of path and its parents when it is no folder (followed), else
    None: a file there makes every folder below it impossible."""
    for place in (path, *path.parents):
        if os.path.lexists(place):
            return None if place.is_dir() else place
    return None


def usable_cache() -> Path:
    """The cache folder, made and proven writable: the one check every command that uses the
    cache runs before any work (the `command` decorator's cache=True), so a cache under a file or
    on a read-only disk stops at once, not after minutes of work or never (a listing)."""
    path = cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
        # a real write, not os.access: a read-only mount or an ACL is what a build would meet
        handle, probe = tempfile.mkstemp(prefix=".write-probe-", dir=path)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        where = f"{CACHE_VAR}={path}" if os.environ.get(CACHE_VAR) else f"mambawin's cache {path}"
        reason = exc.strerror or type(exc).__name__
        msg = (
            f"{where} cannot be written ({reason}): point {CACHE_VAR} at a folder you can "
            "write to, or fix that folder's permissions"
        )
        raise FileSystemError(msg) from None
    return path
