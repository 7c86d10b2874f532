"""A lock file that mambawin creates and removes: two runs on one source tree or build folder.

The second run fails at once with a line naming the holder, instead of writing beside the first
(two patch runs would leave a record that disagrees with the tree). os.open(O_CREAT | O_EXCL) is
atomic on every file system mambawin writes to, Windows included. A lock whose holder was a
process of this machine that no longer runs (a killed build) is taken over, once, under a second
O_EXCL file so that two runs cannot both take it.
"""

from __future__ import annotations

import os
import re
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mambawin.errors import MambawinError

_PID = re.compile(r"[1-9][0-9]{0,9}")  # pid 0 would signal this process group, not a process
_HOLDER_MAX = 4096  # "pid N on HOST"; anything bigger is not a lock mambawin wrote


@contextmanager
def hold(path: Path, what: str, error: type[MambawinError]) -> Iterator[None]:
    """Hold the lock file at path for the block; error(one line) when another run holds it."""
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd: int | None = _create(path)
    except FileExistsError:
        fd = _take_over(path)
    except OSError as exc:
        _remove_folders(made)
        msg = f"cannot create the lock file {path} ({exc.strerror or exc}): is {what} writable?"
        raise error(msg) from None
    if fd is None:
        _remove_folders(made)
        raise error(_busy(path, what))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        yield
    finally:  # also on Ctrl-C
        path.unlink(missing_ok=True)
        _remove_folders(made)


def _create(path: Path) -> int:
    return os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)


def _holder(path: Path) -> str | None:
    """What the lock file says, or None: only a small regular file is read (a FIFO planted at
    the lock's name would block the read forever, a link could name anything)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _HOLDER_MAX:
            return None
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _dead_here(holder: str | None) -> bool:
    """holder ("pid N on HOST") names a process of this machine that no longer runs."""
    parts = (holder or "").split()
    # ASCII digits only: isdigit() takes '١٢٣' (which int() reads) and '²' (which it refuses)
    if len(parts) != 4 or parts[0] != "pid" or parts[2] != "on" or not _PID.fullmatch(parts[1]):
        return False
    if parts[3] != socket.gethostname():
        return False  # another machine's process (a shared folder): no way to tell
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError, OSError):
        return False  # it runs (as another user), or the number is not a pid here
    return False


def _take_over(path: Path) -> int | None:
    """A new descriptor for path after removing a dead holder's lock, or None (a live holder,
    or another run taking it over at the same time)."""
    stale = _holder(path)
    if not _dead_here(stale):
        return None
    claim = path.with_name(path.name + ".takeover")
    try:
        os.close(_create(claim))
    except OSError:
        return None  # another run is taking it over (or left a claim when killed: say busy)
    try:
        if _holder(path) != stale:  # taken over and held again meanwhile
            return None
        path.unlink(missing_ok=True)
        return _create(path)
    except OSError:
        return None
    finally:
        claim.unlink(missing_ok=True)


def _busy(path: Path, what: str) -> str:
    holder = _holder(path) or "unknown"
    return (
        f"{what} is in use by another mambawin run ({holder}): wait for it to finish; if no "
        f"mambawin is running, delete {path}"
    )


def _remove_folders(made: list[Path]) -> None:
    """Remove the folders hold() created for the lock, deepest first, if nothing else is in them."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:
            return
