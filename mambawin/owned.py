"""What mambawin owns, proven by its own record, and the one way it deletes or changes a mode.

The root of what it owns is its cache folder (cache_dir: mirrors, build folders, kept builds,
the Windows toolchain, logs). Ownership is mambawin's own record, never a file anyone can copy:

- the **registry** (`<cache>/state/owned.json`, written atomically under a lock) holds, for each
  folder mambawin made, its real path, the kind of folder, a random token and, for a folder a
  user named (a `--root`), the **manifest**: the files mambawin wrote there (relative paths; a
  name ending in `/` is a folder mambawin owns whole, such as wine's prefix). A folder without a
  manifest was made empty by mambawin itself (a staging, build or kept folder) and is its whole;
- the folder's **marker**, `.mambawin-owned`, carries the same token. A folder is mambawin's only
  when both agree for exactly that path: a marker copied into another folder, or written by
  hand, matches no entry.

remove_tree deletes a path only when it is such a folder or lies inside one, and never:

- follows a symlink: a link inside an owned tree is removed as a link, a link standing where the
  tree should be is removed only when it lies inside an owned folder, otherwise it is refused;
- crosses a mount: a mount point inside the tree (or the tree itself mounted) is refused before
  anything is deleted;
- deletes what a manifest does not list: in a user's folder the files mambawin wrote go, the
  user's own stay (and so do the folders holding them);
- changes the mode of anything outside the tree: read-only folders inside it are made writable
  (POSIX refuses to delete an entry of a read-only folder; Windows a read-only file) entry by
  entry, each looked at with lstat, never through a link;
- touches `/`, a home folder, the current folder, or a folder holding any of them.

Every deletion of a tree and every mode change in mambawin goes through this module (a test
keeps shutil.rmtree and chmod here). A refusal is NotOwnedError (exit 10) naming the path.
Folders an older mambawin made inside the cache (a marker without a token, or no marker) are
adopted (recorded) by the code that knows their layout (see adopt); never a folder outside it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath, PureWindowsPath

import platformdirs
from filelock import FileLock, Timeout

from mambawin.errors import FileSystemError, NotOwnedError, UsageError, os_error
from mambawin.userfile import env_path, parse_json

MARKER = ".mambawin-owned"
_MARKER_MAX = 4096  # a marker is one short JSON line; a bigger file is not one of ours
REGISTRY = "owned.json"  # in <cache>/state: what mambawin made, by real path
_REGISTRY_MAX = 256 << 20  # a toolchain's manifest is ~10,000 names; far more is not ours
_LOCK_SECONDS = 60.0
WHOLE = "/**"  # a manifest name ending so: a folder mambawin owns with all it holds
IsMount = Callable[[Path], bool]


@dataclass(frozen=True)
class Entry:
    """One folder mambawin made: its kind, the token its marker carries, and (for a folder a
    user named) the manifest of what mambawin wrote in it; None: the folder is wholly ours."""

    what: str
    token: str
    files: tuple[str, ...] | None = None


# ---- the registry -------------------------------------------------------------------------------


def registry_path() -> Path:
    """mambawin's record of the folders it made (inside its cache, so MAMBAWIN_CACHE_DIR keeps
    a test's or a CI job's record apart from the user's)."""
    return cache_dir() / "state" / REGISTRY


def _damaged(path: Path, why: str) -> FileSystemError:
    return FileSystemError(
        f"mambawin's ownership record {path} {why}: move it away (mambawin then counts no "
        "folder as its own, so it deletes nothing until it makes its folders again)"
    )


def _load(path: Path) -> dict[str, Entry]:
    """The registry's entries; {} when there is none; FileSystemError when it is damaged."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise os_error(exc, "read mambawin's ownership record") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > _REGISTRY_MAX:
        raise _damaged(path, "is not a file mambawin wrote (a link, a FIFO, or too big)")
    try:
        data = parse_json(path.read_bytes())
    except OSError as exc:
        raise os_error(exc, "read mambawin's ownership record") from None
    except ValueError:
        raise _damaged(path, "is not valid JSON") from None
    entries = _entries_of(data)
    if entries is None:
        raise _damaged(path, "does not have the shape mambawin writes")
    return entries


def _entries_of(data: object) -> dict[str, Entry] | None:
    """The entries of a parsed registry; None for any other shape (a total parse)."""
    folders = data.get("folders") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("schema") != 1 or not isinstance(folders, dict):
        return None
    entries = {}
    for key, raw in folders.items():
        if not isinstance(raw, dict):
            return None
        what, token, files = raw.get("what"), raw.get("token"), raw.get("files")
        if not isinstance(what, str) or not isinstance(token, str) or not token:
            return None
        if files is not None and not (
            isinstance(files, list) and all(isinstance(f, str) and _relative(f) for f in files)
        ):
            return None  # a name reaching out of its folder would make the manifest a weapon
        entries[key] = Entry(what, token, None if files is None else tuple(files))
    return entries


def _relative(name: str) -> bool:
    """A manifest name: a relative path inside its folder (no `..`, not absolute, not empty)."""
    bare = name.removesuffix(WHOLE)
    paths = (PurePosixPath(bare), PureWindowsPath(bare))  # Windows reads `\\` as a separator too
    return bool(bare) and not any(p.is_absolute() or p.anchor or ".." in p.parts for p in paths)


def _dump(entries: dict[str, Entry]) -> str:
    folders = {
        key: {
            "what": e.what,
            "token": e.token,
            "files": None if e.files is None else list(e.files),
        }
        for key, e in sorted(entries.items())
    }
    return json.dumps({"schema": 1, "folders": folders}, indent=1) + "\n"


@contextmanager
def _registry() -> Iterator[dict[str, Entry]]:
    """The entries, locked against other mambawin runs; written back (atomically) when the block
    ends without an error."""
    path = registry_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise os_error(exc, "create mambawin's state folder") from None
    lock = FileLock(f"{path}.lock", timeout=_LOCK_SECONDS)
    try:
        lock.acquire()
    except Timeout:
        msg = (
            f"another mambawin has held {path}.lock for {_LOCK_SECONDS:.0f} s: let it finish "
            "(the lock is released when that process ends)"
        )
        raise FileSystemError(msg) from None
    except OSError as exc:
        raise os_error(exc, "lock mambawin's ownership record") from None
    try:
        entries = _load(path)
        yield entries
        try:
            write_file(path, _dump(entries).encode("utf-8"), mode=0o600)
        except OSError as exc:
            raise os_error(exc, "write mambawin's ownership record") from None
    finally:
        lock.release()


def _key(path: Path) -> str:
    return str(_real(path))


def _record(folder: Path) -> Entry | None:
    return _load(registry_path()).get(_key(folder))


def _forget(path: Path) -> None:
    """Drop the entries of path and of every folder inside it (they are gone)."""
    key = _key(path)

    def under(other: str) -> bool:
        return other == key or other.startswith(key.rstrip(os.sep) + os.sep)

    if not any(map(under, _load(registry_path()))):
        return
    with _registry() as entries:
        for other in [k for k in entries if under(k)]:
            del entries[other]


def moved(source: Path, target: Path) -> None:
    """source (a folder mambawin made and recorded) now stands at target: its record follows."""
    old, new = _key(source), _key(target)
    if old not in _load(registry_path()):
        return
    with _registry() as entries:
        entry = entries.pop(old, None)
        if entry is not None:
            entries[new] = entry


TEMP_PREFIX = ".mambawin-tmp-"  # a file write_file leaves only when the process is killed


def write_file(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write bytes through a temp file beside path and os.replace it into place (the one atomic
    write; mambawin.atomic.write_file is this, for callers above this module).

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


# ---- markers ------------------------------------------------------------------------------------


def mark(
    folder: Path, what: str, *, files: Iterable[str] | None = None, final: Path | None = None
) -> None:
    """Record that mambawin made folder (what: the kind of folder, e.g. "windows-toolchain").

    files: the manifest of a folder a user named (only what it lists is ever deleted); None for
    a folder mambawin made empty itself. final: where folder will be moved (its record is kept
    by that path; a tree filled beside its target is moved into place whole)."""
    token = secrets.token_hex(16)
    listed = None if files is None else tuple(sorted(set(files)))
    with _registry() as entries:  # the record first: a marker without one proves nothing
        entries[_key(final or folder)] = Entry(what, token, listed)
    text = json.dumps({"owner": "mambawin", "what": what, "token": token}) + "\n"
    try:
        write_file(folder / MARKER, text.encode("utf-8"))
    except OSError as exc:
        raise os_error(exc, "mark the folder") from None


def _read_marker(folder: Path) -> tuple[str, str | None] | None:
    """(kind, token) a marker in folder says, or None: folder is a real folder (not a link)
    holding a small regular-file marker in mambawin's shape. token None: an older mambawin's."""
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
    what, token = data.get("what"), data.get("token")
    if token is not None and not isinstance(token, str):
        return None
    return (what if isinstance(what, str) else ""), token


def marked_as(folder: Path) -> str | None:
    """The kind of folder mambawin made folder as, or None: its marker carries the token the
    registry holds for exactly this path. An older mambawin's marker (no token) counts only
    inside the cache, reached without a link, and is recorded then."""
    found = _read_marker(folder)
    if found is None:
        return None
    what, token = found
    if token is None:
        if not inside_cache(folder):
            return None
        mark(folder, what)  # the cache is mambawin's: an older run's folder there is its own
        return what
    entry = _record(folder)
    if entry is None or entry.what != what or not secrets.compare_digest(entry.token, token):
        return None
    return what


def _owning(path: Path) -> tuple[Path, Entry] | None:
    """The recorded folder path is (or lies inside), by its real location, and its entry."""
    real = _real(path)
    for folder in (real, *real.parents):
        if marked_as(folder) is not None:
            entry = _record(folder)
            if entry is not None:
                return folder, entry
    return None


def owner(path: Path) -> Path | None:
    """The folder of mambawin's that path is (or lies inside), by its real location; None if
    there is none."""
    found = _owning(path)
    return None if found is None else found[0]


def inside_cache(path: Path) -> bool:
    """path lies inside mambawin's cache by its real location (a link out of it is not)."""
    try:
        real = Path(os.path.realpath(path))
        cache = Path(os.path.realpath(cache_dir()))
    except (OSError, FileSystemError):
        return False
    return cache in real.parents


def adopt(folder: Path, what: str, names: Iterable[str]) -> bool:
    """Record a folder an older mambawin made inside its cache before records existed: an
    unmarked real folder whose every entry matches one of names (glob patterns). True when
    folder is (now) mambawin's. Never a folder outside the cache: there a layout proves
    nothing."""
    if marked_as(folder) is not None:
        return True
    if not inside_cache(folder):
        return False
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
    """folder, made and marked when absent; an existing one must be mambawin's (recorded, or
    inside a recorded folder, or an older mambawin's in the cache whose entries all match
    legacy); NotOwnedError otherwise."""
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        ours = owner(folder) is not None or adopt(folder, what, legacy)
        if folder.is_symlink() or not folder.is_dir() or not ours:
            msg = (
                f"{folder} is not a folder mambawin made (mambawin has no record of it, and it "
                "holds files mambawin does not write there): move it away and run again"
            )
            raise NotOwnedError(msg) from None
        return folder
    except OSError as exc:
        raise os_error(exc, "create the folder") from exc
    mark(folder, what)
    return folder


# ---- a --root: checked before any work ----------------------------------------------------------


def check_root(
    root: Path,
    what: str,
    name: str,
    legacy: Callable[[set[str]], bool] = lambda _: False,
    *,
    ismount: IsMount = os.path.ismount,
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
        raise UsageError(f"--root {root} is {_kind(mode)}: pass a folder of its own for {name}")
    if ismount(root):
        msg = (
            f"--root {root} is a mount point: mambawin moves a whole folder into place and never "
            "deletes across a mount; pass a folder inside it"
        )
        raise UsageError(msg)
    marked = marked_as(root)
    if marked not in (None, what):
        msg = f"--root {root} is a folder mambawin made for something else ({marked}): pass another"
        raise UsageError(msg)
    try:
        entries = set(os.listdir(root))
    except OSError as exc:
        raise os_error(exc, "read --root") from exc
    if marked is None and entries and not legacy(entries):
        msg = (
            f"--root {root} is not empty and is not {name} (mambawin has no record of making "
            "it): mambawin never deletes what it did not make; pass a new or empty folder"
        )
        raise UsageError(msg)
    return True


def check_refill(root: Path, name: str) -> None:
    """Before a download that will replace a recorded root: UsageError when it holds anything
    its manifest does not list (the user's own files, which the swap could not keep)."""
    others = foreign_files(root)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        msg = (
            f"--root {root} holds files mambawin did not write there ({shown}): move them out "
            f"of it so mambawin can set {name} up again, or pass another folder"
        )
        raise UsageError(msg)


def foreign_files(folder: Path) -> list[str]:
    """What lies in a recorded folder that its manifest does not list (relative paths, links
    not followed); [] for a folder mambawin owns whole or has no record of."""
    entry = _record(folder)
    if entry is None or entry.files is None:
        return []
    listed = set(entry.files)
    found = []
    for top, dirs, files in os.walk(folder):
        rel_top = PurePosixPath(Path(top).relative_to(folder).as_posix())
        for name in sorted([*dirs, *files]):
            rel = (rel_top / name).as_posix()
            if rel == MARKER or _whole(rel, listed):
                continue
            is_dir = name in dirs and not os.path.islink(os.path.join(top, name))
            if (rel + "/" if is_dir else rel) not in listed:
                found.append(rel + ("/" if is_dir else ""))
        dirs[:] = [d for d in dirs if not _whole((rel_top / d).as_posix(), listed)]
    return found


def manifest(folder: Path, whole: Iterable[str] = ()) -> list[str]:
    """Every entry of a tree mambawin has just written: files and links by relative path,
    folders ending in `/`; each name in whole (a top-level folder) as one `name/**`."""
    wholes = set(whole)
    names = [f"{name}{WHOLE}" for name in sorted(wholes)]
    for top, dirs, files in os.walk(folder):
        rel_top = PurePosixPath(Path(top).relative_to(folder).as_posix())
        if rel_top == PurePosixPath("."):
            dirs[:] = [d for d in dirs if d not in wholes]
            files = [f for f in files if f != MARKER and f not in wholes]
        for name in [*dirs, *files]:
            rel = (rel_top / name).as_posix()
            real_dir = name in dirs and not os.path.islink(os.path.join(top, name))
            names.append(rel + "/" if real_dir else rel)
    return [name for name in names if _relative(name)]  # an odd name stays unlisted: kept


def _whole(rel: str, listed: set[str]) -> bool:
    """rel is, or lies inside, a folder the manifest owns whole."""
    parts = PurePosixPath(rel).parts
    return any("/".join(parts[:n]) + WHOLE in listed for n in range(1, len(parts) + 1))


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
    found = _owning(path)
    if found is None:
        msg = (
            f"refusing to remove {path}: mambawin did not make it (it has no record of it or of "
            "a folder above it); move it away, or delete it yourself if it is a leftover"
        )
        raise NotOwnedError(msg)
    folder, entry = found
    rel = _real(path).relative_to(folder).as_posix()
    listed = None if entry.files is None else set(entry.files)
    try:
        if stat.S_ISDIR(info.st_mode) and not _is_link(info):
            _same_mount(path, folder, ismount)
            if listed is None or _whole(rel, listed):
                _make_removable(path, info, ismount)
                shutil.rmtree(path)
            else:
                _remove_listed(folder, listed, rel, ismount)
        elif listed is None or rel in listed or _whole(rel, listed):
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
        _forget(path)


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
    step = _real(path)
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
            _make_removable(path, info, ismount)
            shutil.rmtree(path)
        elif stat.S_ISREG(info.st_mode) or _is_link(info):
            _unlink(path, info)  # a FIFO or a folder now standing at the name is not what we wrote
    for name in mine:
        if name.endswith("/") and not name.endswith(WHOLE):
            with suppress(OSError):  # one holding the user's files stays, with them
                (folder / name).rmdir()
    if under == ".":
        marker = folder / MARKER
        with suppress(FileNotFoundError):
            if stat.S_ISREG(os.lstat(marker).st_mode):
                marker.unlink()
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


def real_path(path: Path) -> Path:
    """path's real location, its own last part not resolved (as the registry keys folders)."""
    return _real(path)


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
