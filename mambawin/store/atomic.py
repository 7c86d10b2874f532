"""Leave nothing half-written: one file, one folder, or a set of files, all or nothing.

Every write goes to a temporary name beside its target (the same file system, so the final
os.replace is atomic) and is moved into place only when complete; a failure, or Ctrl-C, removes
the temporary and leaves the target as it was. Temporary names start with `.mambawin-`, so a
later run that owns the folder can recognise and remove what a killed run left. A staging folder
is marked as mambawin's when it is made (mambawin.store.owned), so the one tree remover accepts it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path

from mambawin.errors import os_error
from mambawin.store import owned, registry
from mambawin.store.owned import mark, remove_tree

TEMP_PREFIX = owned.TEMP_PREFIX  # a file write_file leaves only when the process is killed


def write_text(path: Path, text: str, *, mode: int | None = None) -> Path:
    """write_file for UTF-8 text."""
    return write_file(path, text.encode("utf-8"), mode=mode)


def write_file(path: Path, data: bytes, *, mode: int | None = None) -> Path:
    """Write bytes through a temp file beside path and os.replace it into place.

    mode: the file's permissions; None gives what a plain open() would (0o666 less the umask),
    not the 0o600 of the temp file.
    """
    return owned.write_file(path, data, mode=mode)


def probe_writable(
    folder: Path, what: str, *, make: Callable[..., tuple[int, str]] = tempfile.mkstemp
) -> None:
    """Before any work: a file can be made (and removed) in folder; FileSystemError naming the
    folder otherwise (read-only, no permission, a full disk), not minutes later at the write.
    make: tempfile.mkstemp (a test hands in a read-only file system's refusal)."""
    try:
        handle, temp = make(prefix=f"{TEMP_PREFIX}probe.", dir=folder)
    except OSError as exc:  # named by the folder: the probe's temp name means nothing to a user
        named = OSError(exc.errno, exc.strerror, str(folder))
        raise os_error(named, f"write in {what}") from None
    os.close(handle)
    owned.unlink(Path(temp))


@contextmanager
def staging_dir(parent: Path, prefix: str = ".mambawin-") -> Iterator[Path]:
    """A temporary folder inside parent (holding only mambawin's marker), removed afterwards
    whatever happens."""
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        mark(path, "staging")
    except BaseException:
        # made empty just now and never recorded (a damaged record, a full disk): removing it
        # through remove_tree was refused ("mambawin did not make it"), which hid the cause
        # and left the folder behind
        os.rmdir(path)
        raise
    try:
        yield path
    finally:
        remove_tree(path)


def fill_dir(
    target: Path,
    fill: Callable[[Path], object],
    *,
    what: str | None = None,
    whole: Iterable[str] = (),
) -> None:
    """Fill a temp sibling folder, then move it into place as target; on failure nothing stays.

    fill gets an empty folder (git clone accepts it) inside the marked staging folder. what:
    target is a folder a user named (a --root), recorded as mambawin's kind what with the
    manifest of what fill wrote (whole: its top-level folders owned whole, such as wine's
    prefix); an earlier fill of target loses what its manifest lists only now, once the new
    tree is whole, and never anything else. Without what, fill marks the tree itself when
    target is a folder mambawin may later delete (mambawin.store.owned), and when another process
    moved its own copy into place first (a shared cache), that one is kept.
    An empty folder at target is replaced.
    """
    with staging_dir(target.parent, f".{target.name}.") as staging:
        tmp = staging / "tree"
        tmp.mkdir()
        fill(tmp)
        if what is not None:
            _swap_in(tmp, target, what, registry.manifest(tmp, whole, owned.MARKER))
            return
        with suppress(OSError):  # an empty folder there (a new --root) holds nothing to keep
            target.rmdir()
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            return
        owned.moved(tmp, target)


def _swap_in(tmp: Path, target: Path, what: str, files: list[str]) -> None:
    """The filled tree replaces target: the old fill's listed files go (the new tree is already
    whole), target's record names the new files, and one rename puts them in place."""
    if owned.owner(target) == owned.real_path(target):
        remove_tree(target)
    with suppress(OSError):  # an empty folder (a new --root, or the old fill's, now emptied)
        target.rmdir()
    mark(tmp, what, files=files, final=target)
    os.replace(tmp, target)


def write_files(root: Path, changes: Mapping[str, bytes | None]) -> None:
    """Write (or delete, for None) every file under root, or none: an OSError while writing or
    moving undoes what was done and is raised again; Ctrl-C undoes it too. File modes are kept
    (an executable stays executable, a read-only file read-only); a folder made for a new file
    is removed again on failure."""
    with swapping(replace_file) as swap:
        staged = _stage(root, changes, swap)
        try:
            for rel, tmp in staged:
                target = root / rel
                swap.put(tmp, target, target.with_name(f".{target.name}.mambawin-old"))
        except BaseException:
            _discard(tmp for _, tmp in staged)  # before swapping's undo removes their folders
            raise
    _discard(swap.backups())


def make_parents(folder: Path) -> list[Path]:
    """mkdir -p folder; the folders it made, outermost first."""
    missing = [p for p in (folder, *folder.parents) if not os.path.lexists(p)]
    folder.mkdir(parents=True, exist_ok=True)
    return missing[::-1]


Move = Callable[[Path, Path], None]


class Swap:
    """Files moved into place one at a time, each file one replaces set aside first, so that
    undo() puts back every byte and mode that was there, and removes what was new."""

    def __init__(self, move: Move) -> None:
        self._move = move
        self._moved: list[tuple[Path, Path | None]] = []  # (target, its backup or None if new)
        self._made: list[Path] = []

    def put(self, staged: Path | None, target: Path, backup: Path) -> None:
        """Set target aside as backup (when something is there), then move staged in (None:
        target is deleted)."""
        kept = None
        if os.path.lexists(target):
            self._move(target, backup)
            kept = backup
        self._moved.append((target, kept))  # listed once the backup holds the old file
        if staged is not None:
            self._move(staged, target)

    def made(self, folders: Iterable[Path]) -> None:
        """Folders made for the targets (outermost first), removed again by undo()."""
        self._made.extend(folders)

    def backups(self) -> list[Path]:
        """What the moves set aside: the caller's to discard once every move is done."""
        return [backup for _, backup in self._moved if backup is not None]

    def undo(self) -> None:
        # os.replace, not the injected move: the undo must not fail where the move was made to
        for target, backup in reversed(self._moved):
            _unlink(target)
            if backup is not None:
                os.replace(backup, target)
        for folder in reversed(self._made):
            with suppress(OSError):  # one something else has since put a file in stays
                folder.rmdir()


@contextmanager
def swapping(move: Move = os.replace) -> Iterator[Swap]:
    """A Swap whose moves are all undone when the block raises (Ctrl-C too)."""
    swap = Swap(move)
    try:
        yield swap
    except BaseException:
        swap.undo()
        raise


def write_through(target: Path, make: Callable[[Path], object]) -> Path:
    """make writes a file at the path it is given (target's own name, in a marked staging folder
    beside target: a writer that derives names from the file name, as WheelFile does, sees the
    final one); it is moved into place with one rename only when make returns."""
    with staging_dir(target.parent) as scratch:
        partial = scratch / target.name
        make(partial)
        os.replace(partial, target)
    return target


def _stage(
    root: Path, changes: Mapping[str, bytes | None], swap: Swap
) -> list[tuple[str, Path | None]]:
    """Phase 1: every new content in a temp file next to its target, with the target's mode."""
    staged: list[tuple[str, Path | None]] = []
    try:
        for rel, data in changes.items():
            if data is None:
                staged.append((rel, None))
                continue
            target = root / rel
            swap.made(make_parents(target.parent))
            tmp = target.with_name(f".{target.name}.mambawin-new")
            staged.append((rel, tmp))
            write_staged(tmp, data, target)
    except BaseException:
        _discard(tmp for _, tmp in staged)
        raise
    return staged


def write_staged(tmp: Path, data: bytes, target: Path) -> None:
    """Write tmp, then give it target's mode (tests make the n-th write fail here)."""
    tmp.write_bytes(data)
    if target.exists():
        shutil.copymode(target, tmp)


def replace_file(src: Path, dst: Path) -> None:
    """os.replace (tests make the n-th rename fail here, as Windows does when a file is open)."""
    os.replace(src, dst)


def _discard(paths: Iterable[Path | None]) -> None:
    for path in paths:
        if path is not None:
            _unlink(path)


def _unlink(path: Path) -> None:
    """Delete path if it is there; Windows refuses a read-only file until it is made writable."""
    owned.unlink(path)
