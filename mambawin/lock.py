"""A lock file that mambawin creates and removes: two runs on one source tree or build folder.

The second run fails at once with a line naming the holder, instead of writing beside the first
(two patch runs would leave a record that disagrees with the tree). os.open(O_CREAT | O_EXCL) is
atomic on every file system mambawin writes to, Windows included.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mambawin.errors import MambawinError


@contextmanager
def hold(path: Path, what: str, error: type[MambawinError]) -> Iterator[None]:
    """Hold the lock file at path for the block; error(one line) when another run holds it."""
    made = [folder for folder in (path.parent, *path.parent.parents) if not folder.exists()]
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        _remove_folders(made)
        raise error(_busy(path, what)) from None
    except OSError as exc:
        _remove_folders(made)
        msg = f"cannot create the lock file {path} ({exc.strerror or exc}): is {what} writable?"
        raise error(msg) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        yield
    finally:  # also on Ctrl-C
        path.unlink(missing_ok=True)
        _remove_folders(made)


def _busy(path: Path, what: str) -> str:
    try:
        holder = path.read_text(encoding="utf-8").strip() or "unknown"
    except OSError:
        holder = "unknown"
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
