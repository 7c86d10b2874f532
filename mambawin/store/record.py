"""What mambawin made: its cache folder, its record of each folder it made (the registry, by
real path) and the marker in each folder that must carry the record's token.

A folder is mambawin's only when its `.mambawin-owned` marker carries the token the registry
holds for exactly its path: a marker copied into another folder, written by hand, or left in a
folder the user moved matches no entry. An older mambawin's marker (no token) counts only inside
the cache, reached without a link, and is recorded then. mambawin.store.owned decides what may be
deleted with it, and is the only module that deletes.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

import platformdirs

from mambawin.errors import FileSystemError, NotOwnedError, UsageError, os_error
from mambawin.store import registry
from mambawin.store.registry import Entry
from mambawin.userfile import env_path, parse_json

MARKER = ".mambawin-owned"
# The licence terms accepted for a toolchain folder (toolchain.licenses writes it): mambawin's own
# record, like the marker, so never one of "the files mambawin did not write there".
LICENCE_RECORD = ".mambawin-licenses.json"
_MARKER_MAX = 4096  # a marker is one short JSON line; a bigger file is not one of ours
CACHE_VAR = "MAMBAWIN_CACHE_DIR"


def write_private(path: Path, data: bytes) -> None:
    """path's new bytes (mode 0o600, as mkstemp makes them), moved into place with one rename:
    the registry and the markers are never half-written."""
    handle, temp = tempfile.mkstemp(prefix=f".mambawin-tmp-{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def cache_dir() -> Path:
    """The user's cache folder for mambawin; MAMBAWIN_CACHE_DIR overrides it (tests, CI).

    FileSystemError when something that is not a folder stands there: every command that uses
    the cache stops on it the same way, before any work."""
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
    _not_a_shared_folder(path, override is not None)
    return path


def _not_a_shared_folder(path: Path, override: bool) -> None:
    """UsageError for a cache that is `/` or a home folder (or holds one): everything inside the
    cache counts as mambawin's (an older mambawin's marker, a kept build's layout), and `cache`
    would walk the whole disk."""
    real = Path(os.path.realpath(path))  # a link to a home folder is that home folder
    homes = [place for what, place in _places() if what == "a home folder"]
    if real == Path(real.anchor) or any(real == h or real in h.parents for h in homes):
        where = f"{CACHE_VAR}={path}" if override else f"mambawin's cache folder {path}"
        msg = (
            f"{where} is the file system's root or a home folder (or holds one), where "
            f"everything would count as mambawin's cache: point {CACHE_VAR} at a folder of its "
            f"own, e.g. {CACHE_VAR}={Path.home() / 'mambawin-cache'}"
        )
        raise UsageError(msg)


def _not_a_folder(path: Path) -> Path | None:
    """The nearest existing path of path and its parents when it is no folder (followed), else
    None: a file there makes every folder below it impossible."""
    for place in (path, *path.parents):
        if os.path.lexists(place):
            return None if place.is_dir() else place
    return None


def registry_path() -> Path:
    """mambawin's record of the folders it made (inside its cache, so MAMBAWIN_CACHE_DIR keeps
    a test's or a CI job's record apart from the user's)."""
    return cache_dir() / "state" / registry.NAME


@contextmanager
def _registry() -> Iterator[dict[str, Entry]]:
    """The entries, locked against other runs, written back (private, atomically) after."""
    with registry.locked(registry_path(), write_private) as entries:
        yield entries


def _key(path: Path) -> str:
    """The registry's key of a folder: its real path (case-folded where the file system is:
    Windows), so every spelling of one folder finds one entry."""
    return os.path.normcase(str(_real(path)))


def entry_of(folder: Path) -> Entry | None:
    """The registry's entry for exactly this folder (its marker not looked at), or None."""
    return registry.load(registry_path()).get(_key(folder))


def forget(path: Path) -> None:
    """Drop the entries of path and of every folder inside it (they are gone)."""
    key = _key(path)

    def under(other: str) -> bool:
        return other == key or other.startswith(key.rstrip(os.sep) + os.sep)

    if not any(map(under, registry.load(registry_path()))):
        return
    with _registry() as entries:
        for other in [k for k in entries if under(k)]:
            del entries[other]


def moved(source: Path, target: Path) -> None:
    """source (a folder mambawin made and recorded) now stands at target: its record follows."""
    old, new = _key(source), _key(target)
    if old not in registry.load(registry_path()):
        return
    with _registry() as entries:
        entry = entries.pop(old, None)
        if entry is not None:
            entries[new] = entry


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
        write_private(folder / MARKER, text.encode("utf-8"))
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
    entry = entry_of(folder)
    if entry is None or entry.what != what or not secrets.compare_digest(entry.token, token):
        return None
    return what


def owning(path: Path) -> tuple[Path, Entry] | None:
    """The recorded folder path is (or lies inside), by its real location, and its entry."""
    real = _real(path)
    for folder in (real, *real.parents):
        if marked_as(folder) is not None:
            entry = entry_of(folder)
            if entry is not None:
                return folder, entry
    return None


def owner(path: Path) -> Path | None:
    """The folder of mambawin's that path is (or lies inside), by its real location; None if
    there is none."""
    found = owning(path)
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


def real_path(path: Path) -> Path:
    """path's real location, its own last part not resolved (as the registry keys folders)."""
    return _real(path)


def _real(path: Path) -> Path:
    """path's real location, its own last part not resolved (a link is judged as a link)."""
    absolute = Path(os.path.abspath(path))
    if absolute == Path(absolute.anchor):
        return absolute
    return Path(os.path.realpath(absolute.parent)) / absolute.name


def check_refill(root: Path, name: str, flag: str = "--root") -> None:
    """Before a download that will replace a recorded root: UsageError when it holds anything
    its manifest does not list (the user's own files, which the swap could not keep)."""
    others = foreign_files(root)
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        msg = (
            f"{flag} {root} holds files mambawin did not write there ({shown}): move them out "
            f"of it so mambawin can set {name} up again, or pass another folder"
        )
        raise UsageError(msg)


def foreign_files(folder: Path) -> list[str]:
    """What lies in a recorded folder that its manifest does not list (relative paths, links
    not followed); [] for a folder mambawin owns whole or has no record of."""
    entry = entry_of(folder)
    if entry is None or entry.files is None:
        return []
    listed = set(entry.files)
    found = []
    for top, dirs, files in os.walk(folder):
        rel_top = PurePosixPath(Path(top).relative_to(folder).as_posix())
        for name in sorted([*dirs, *files]):
            rel = (rel_top / name).as_posix()
            if rel in (MARKER, LICENCE_RECORD) or registry.whole(rel, listed):
                continue
            is_dir = name in dirs and not os.path.islink(os.path.join(top, name))
            if (rel + "/" if is_dir else rel) not in listed:
                found.append(rel + ("/" if is_dir else ""))
        dirs[:] = [d for d in dirs if not registry.whole((rel_top / d).as_posix(), listed)]
    return found


def protected(path: Path) -> str | None:
    """Why path may never be deleted (it is /, a home folder, the current folder or holds one),
    or None."""
    real = real_path(path)
    if real == Path(real.anchor):
        return "it is the file system's root"
    for what, place in _places():
        if place == real or real in place.parents:
            return f"it is {what}" if place == real else f"it holds {what} ({place})"
    return None


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
