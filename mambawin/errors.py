"""One error hierarchy; the CLI maps each kind to its own exit code in one place."""

from __future__ import annotations

import errno


class MambawinError(Exception):
    """Base of every error mambawin reports; the message is one line with a hint."""

    exit_code = 1


class UsageError(MambawinError):
    """Bad input on the command line (an arch list, a path, a flag combination)."""

    exit_code = 2


class SpecError(UsageError):
    """A team spec (TOML) is unreadable, has an unknown key or a value of the wrong type."""


class UpstreamError(MambawinError):
    """The upstream repository or ref could not be fetched, found or read."""

    exit_code = 3


class PatchError(MambawinError):
    """A patch could not be applied: its anchor is missing (upstream drifted)."""

    exit_code = 4


class ToolchainError(MambawinError):
    """A required toolchain check failed (nvcc, MSVC, torch, ...)."""

    exit_code = 5


class BuildError(MambawinError):
    """The wheel build itself failed."""

    exit_code = 6


class WheelError(MambawinError):
    """A wheel is corrupt, not a wheel, or cannot be rewritten safely."""

    exit_code = 7


class VerifyError(MambawinError):
    """A wheel failed verification."""

    exit_code = 8


class CheckFailed(MambawinError):
    """The Windows compile check found a unit that does not compile or a symbol that no object
    or library defines."""

    exit_code = 11


class UnprovenReleases(MambawinError):
    """`patches --check-new` found upstream releases the patch set has not been proven on."""

    exit_code = 12


class MachineDiffers(MambawinError):
    """`rebuild`: this machine cannot give a wheel's bytes (another torch, CUDA, compiler,
    Python, mambawin or platform than the wheel's provenance records); nothing was built."""

    exit_code = 13


class RebuildDiffers(MambawinError):
    """`rebuild`: a wheel rebuilt from its provenance is not byte for byte the published one."""

    exit_code = 14


class CommandError(MambawinError):
    """An external program failed; carries the command, exit code and output tail."""

    exit_code = 9

    def __init__(
        self, msg: str, *, argv: tuple[str, ...] = (), returncode: int | None = None, tail: str = ""
    ) -> None:
        super().__init__(msg)
        self.argv = argv
        self.returncode = returncode
        self.tail = tail


class ToolNotFound(CommandError):
    """The program to run is not on PATH."""


class CommandTimeout(CommandError):
    """The program ran past its time limit and was killed."""


class FileSystemError(MambawinError):
    """The operating system refused a file operation (no space, read-only, permission, ...)."""

    exit_code = 10


class NotOwnedError(FileSystemError):
    """mambawin refused to delete or repair a path it did not make (no marker of its own, a
    symlink, the current folder, a home folder or /)."""


# errno -> how a user fixes it; the message always names the path and the system's own words.
_OS_HINTS = {
    errno.ENOSPC: "free some space there or choose another folder",
    errno.EDQUOT: "free some space there or choose another folder",
    errno.EROFS: "the file system is read-only; choose a writable folder",
    errno.EACCES: "check its permissions or choose a folder you can write to",
    errno.EPERM: "check its permissions or choose a folder you can write to",
    errno.ENOTDIR: "a part of the path is a file, not a folder; choose another path",
    errno.EISDIR: "it is a folder; give a file path",
    errno.ENAMETOOLONG: "the path is too long; choose a shorter one",
    errno.ENOENT: "check that the path exists",
    errno.EEXIST: "something already stands there; remove it or choose another path",
    errno.ELOOP: "the path runs through a symlink loop; fix the link",
    errno.EPIPE: "the program reading it stopped before the end; let it read everything",
}


def os_error(exc: OSError, action: str = "use") -> FileSystemError:
    """One line for an OSError: the action, the path, the system's reason and the fix."""
    path = exc.filename if exc.filename is not None else "a file"
    reason = exc.strerror or type(exc).__name__
    hint = _OS_HINTS.get(exc.errno or -1, "check the path and its permissions")
    target = f"{path} -> {exc.filename2}" if exc.filename2 is not None else f"{path}"
    return FileSystemError(f"cannot {action} {target}: {reason}; {hint}")
