"""One error hierarchy; the CLI maps each kind to its own exit code in one place."""

from __future__ import annotations


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


class CommandError(MambawinError):
    """An external program failed; carries the command, exit code and output tail."""

    exit_code = 9

    def __init__(self, msg: str, *, argv: tuple[str, ...] = (), returncode: int | None = None,
                 tail: str = "") -> None:
        super().__init__(msg)
        self.argv = argv
        self.returncode = returncode
        self.tail = tail


class ToolNotFound(CommandError):
    """The program to run is not on PATH."""


class CommandTimeout(CommandError):
    """The program ran past its time limit and was killed."""
