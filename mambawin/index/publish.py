"""Publishing into an index folder: a name is published once with one content, files are
copied (a reflink where possible) world-readable, one run's files go in all together or not at
all, runs take turns, and a killed run's leftovers are recognised by their marker and removed."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from packaging.utils import (
    canonicalize_name,
    canonicalize_version,
    parse_wheel_filename,
)

from mambawin.errors import MambawinError, UsageError, WheelError, os_error
from mambawin.store.atomic import (
    TEMP_PREFIX,
    Move,
    make_parents,
    probe_writable,
    staging_dir,
    swapping,
    write_file,
)
from mambawin.store.owned import marked_as, remove_tree, set_mode
from mambawin.userfile import parse_json
from mambawin.wheel.info import sha256_file

# mambawin made this folder: an index, and what it published (written when --out is created).
MARKER = ".mambawin-index.json"


# What a fresh --out holds until its first run's files go in.
EMPTY_MARKER = json.dumps({"schema": 1, "torches": [], "wheels": {}}, indent=2) + "\n"


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


def conflicts(
    sources: Iterable[tuple[str, str]], published: Iterable[tuple[str, str]]
) -> dict[str, str]:
    """For each source (file name, sha256): the published name it already is, or itself when
    new. UsageError naming both sha256 when a published name (in any spelling) would get other
    bytes, or two sources claim one name with different bytes."""
    seen = {identity(name): (name, digest) for name, digest in published}
    names = {}
    for name, digest in sources:
        key = identity(name)
        first, known = seen.setdefault(key, (name, digest))
        if known != digest:
            msg = (
                f"{name} (sha256 {digest}) has other bytes than the published "
                f"{first} (sha256 {known}): a published wheel never changes; "
                "nothing was added. Give the new build another version or local label"
            )
            raise UsageError(msg)
        names[name] = first
    return names


def copy_file(source: Path, target: Path, sha256: str) -> None:
    """A real copy of source's bytes (through a symlink), world-readable; a reflink (copy on
    write) where the file system has one, so a big wheel costs no space twice. WheelError when
    the bytes are not the ones checked (the wheel changed after it was read)."""
    with source.open("rb") as reader, target.open("wb") as writer:
        if not _reflink(reader, writer):
            shutil.copyfileobj(reader, writer, _COPY_CHUNK)
    set_mode(target, FILE_MODE)
    if sha256_file(target) != sha256:
        msg = f"{source} changed while it was published: nothing was added; run index again"
        raise WheelError(msg)


def _reflink(reader: Any, writer: Any) -> bool:
    if sys.platform != "linux":
        return False
    import fcntl

    try:
        fcntl.ioctl(writer.fileno(), _FICLONE, reader.fileno())
    except OSError:
        return False
    return True


# ---- one run's files, all or none ---------------------------------------------------------------


class Publication:
    """Every file of one run, staged in a marked hidden folder inside the index and then moved
    into place in order (wheels before the pages that link them, the marker last). A failure
    before the last move puts back what was there, bytes and modes: a replaced file returns from
    the staging folder, a new file and a new folder are removed.

    move: os.replace (tests pass one that fails at the n-th call, as a full disk does).
    """

    def __init__(self, out: Path, move: Move = os.replace) -> None:
        self.out, self._move = out, move
        self._staged: list[tuple[str, Path]] = []
        self._stack = ExitStack()
        try:
            # atomic.staging_dir: the one way mambawin makes (and removes) a staging folder
            self.staging = self._stack.enter_context(staging_dir(out, STAGING_PREFIX))
        except OSError as exc:
            self._stack.close()
            raise os_error(exc, "stage files in the index") from None

    def __enter__(self) -> Publication:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    def copy(self, source: Path, rel: str, sha256: str) -> Path:
        """Stage a copy of source as rel; the staged file (its mtime is the published one's)."""
        staged = self._stage_path(rel)
        copy_file(source, staged, sha256)
        self._staged.append((rel, staged))
        return staged

    def write(self, rel: str, data: bytes) -> None:
        """Stage rel with data; nothing is staged when rel already holds exactly that."""
        target = self.out / rel
        if _holds(target, data):
            return
        staged = self._stage_path(rel)
        staged.write_bytes(data)
        set_mode(staged, FILE_MODE)
        self._staged.append((rel, staged))

    def commit(self) -> None:
        """Move every staged file into place, or (on any error, Ctrl-C too) none."""
        try:
            with swapping(self._move) as swap:
                for number, (rel, staged) in enumerate(self._staged):
                    target = self.out / rel
                    swap.made(make_dir(target.parent))
                    swap.put(staged, target, self.staging / f"old-{number}")
        except OSError as exc:
            raise os_error(exc, "publish into the index") from None

    def _stage_path(self, rel: str) -> Path:
        return self.staging / f"new-{len(self._staged)}-{Path(rel).name}"


def _holds(target: Path, data: bytes) -> bool:
    """target is a regular file of the published mode holding exactly data."""
    try:
        info = target.lstat()
        return (
            stat.S_ISREG(info.st_mode)
            and stat.S_IMODE(info.st_mode) == FILE_MODE
            and info.st_size == len(data)
            and target.read_bytes() == data
        )
    except OSError:
        return False


def remove_staging(folder: Path) -> None:
    """Remove a staging folder a killed run left (a real folder holding the staging marker), else
    leave it: mambawin removes only what it can tell it made. Best effort: one it cannot remove
    stays hidden, and the run goes on."""
    if is_staging(folder):
        with suppress(OSError, MambawinError):
            remove_tree(folder)


def is_staging(folder: Path) -> bool:
    """folder is a run's staging folder: a real folder atomic.staging_dir marked as its own."""
    return marked_as(folder) == "staging"


def _left_by_a_run(path: Path) -> bool:
    """What a first run killed before its marker was moved in leaves: the lock, staging."""
    return path.name == LOCK or (path.name.startswith(STAGING_PREFIX) and is_staging(path))


def make_dir(folder: Path) -> list[Path]:
    """A folder of the index, world-readable so a web server running as its own user serves it;
    the folders it made, outermost first."""
    made = make_parents(folder)
    for path in made:
        set_mode(path, DIR_MODE)
    return made


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
    """Remove the staging folders and temp files of a run that was killed midway: a staging
    folder only when it holds the staging marker, a temp file only when it is a regular file
    with the name mambawin gives its own (symlinks are never followed or removed)."""
    for path in sorted(out.rglob(".mambawin-*"), key=lambda p: len(p.parts), reverse=True):
        if path.name.startswith(STAGING_PREFIX):
            remove_staging(path)
        elif path.name.startswith(TEMP_PREFIX) and stat.S_ISREG(path.lstat().st_mode):
            path.unlink(missing_ok=True)


def start_index(out: Path) -> None:
    """Mark a new --out as an index before anything else goes in (a run killed later leaves a
    folder the next run recognises as its own)."""
    write_file(out / MARKER, EMPTY_MARKER.encode("utf-8"), mode=FILE_MODE)


def remove_if_fresh(out: Path) -> None:
    """A failed first run leaves no folder behind: only its lock and empty marker are there."""
    try:
        names = {p.name for p in out.iterdir()}
        if names <= {LOCK, MARKER} and (
            MARKER not in names or (out / MARKER).read_text(encoding="utf-8") == EMPTY_MARKER
        ):
            (out / MARKER).unlink(missing_ok=True)
            (out / LOCK).unlink(missing_ok=True)
            out.rmdir()
    except OSError:
        pass


# ---- wheels ------------------------------------------------------------------------------------


def published_wheels(files: Path) -> list[Path]:
    """The wheels in the index's files/ (none before the first run)."""
    if not files.is_dir():
        return []
    return sorted(p for p in files.glob("*.whl") if stat.S_ISREG(p.lstat().st_mode))


def check_targets(out: Path, rels: Iterable[str]) -> None:
    """Every path a run would write lies in real folders of the index and is a regular file or
    absent: a symlink or a folder planted there is not the index's to replace or write through."""
    checked: set[Path] = set()
    for rel in rels:
        target = out / rel
        for path in [*target.relative_to(out).parents][:-1][::-1]:
            folder = out / path
            if folder not in checked:
                _must_be(folder, stat.S_ISDIR, "a folder")
                checked.add(folder)
        _must_be(target, stat.S_ISREG, "a file")


def _must_be(path: Path, test: Callable[[int], bool], what: str) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise os_error(exc, "read the index") from None
    if not test(mode):
        found = "a symlink" if stat.S_ISLNK(mode) else "something else"
        msg = (
            f"{path} is {found} where the index keeps {what}: mambawin writes only what it "
            "made there; remove it, or publish into a new --out"
        )
        raise UsageError(msg)


def is_index(out: Path) -> bool:
    """out holds the marker an index run writes: a regular file (a symlink could make any folder
    look like one) holding a JSON object with its wheels."""
    marker = out / MARKER
    try:
        if not stat.S_ISREG(marker.lstat().st_mode):
            return False
        data = parse_json(marker.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return False
    except OSError as exc:
        raise os_error(exc, "read the index marker") from None
    return isinstance(data, dict) and isinstance(data.get("wheels"), dict)


def check_out(out: Path) -> None:
    """--out is a folder mambawin may write: absent, empty, or an index of its own."""
    if out.exists() and not out.is_dir():
        msg = f"{out} is a file, not a folder: pass a folder for the index as --out"
        raise UsageError(msg)
    existing = next((p for p in (out, *out.parents) if p.is_dir()), None)
    if existing is not None:  # a read-only --out is refused now, not after the wheels are read
        where = f"--out {out}" if existing == out else f"the folder above --out {out}"
        probe_writable(existing, where)
    if not (out / LOCK).exists():  # else another run is making it: checked again under the lock
        claim(out)


def claim(out: Path) -> None:
    """Refuse a non-empty folder that is not a mambawin index: its files are not ours to change."""
    if out.is_dir() and not is_index(out) and not all(map(_left_by_a_run, out.iterdir())):
        msg = (
            f"{out} is not empty and holds no mambawin index ({MARKER} missing, or not one "
            "mambawin wrote): pass a new or empty --out folder, or the folder of an earlier "
            "`mambawin index` run"
        )
        raise UsageError(msg)
