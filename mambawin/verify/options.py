"""What the user asked verify for: the options, and which steps may be left out."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from mambawin.stage import Status
from mambawin.verify.packages import WheelRef
from mambawin.verify.report import StepResult, Target, named
from mambawin.verify.tools import Tools


@dataclass(frozen=True)
class VerifyOptions:
    """What to verify and how; `target` injects the GPU/torch facts (tests), else probed."""

    wheel: Path | None = None
    installed: bool = False
    bench: bool = False
    target: Target | None = None
    seed: int | None = None
    smoke_args: tuple[str, ...] = ()
    conv_args: tuple[str, ...] = ()
    bench_args: tuple[str, ...] = ()
    upstream_tests: bool = False
    test_keyword: str | None = None  # pytest -k for --upstream-tests
    skip: frozenset[str] = frozenset()  # steps the user left out (--skip), from SKIPPABLE
    python: str = sys.executable
    windows_root: Path | None = None  # the load step's Windows toolchain (None: the cache's)
    timeout: float = 1800.0  # each runner's own limit (a worker gets one per runner it runs)
    # One GPU worker, every step whole (no parts), nothing overlapping: each step's time as on
    # a quiet machine (--serial).
    serial: bool = False
    tools: Tools = field(default_factory=Tools)  # the collaborators; tests pass fakes


SKIPPABLE = ("requirements", "load", "ops", "smoke", "conv", "calls", "blocks", "compile")


def skipped(name: str, options: VerifyOptions, ref: WheelRef | None = None) -> StepResult | None:
    """The skip result of a step the user left out with --skip, else None; a per-wheel step
    is named for its wheel's package, as when it runs."""
    if name not in options.skip:
        return None
    shown = named(name, ref.project) if ref is not None else name
    return StepResult(shown, Status.SKIP, f"left out (--skip {name})")
