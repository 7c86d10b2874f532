"""The console reporter: build steps with ✓/✗ and ninja's progress as a bar.

torch's BuildExtension runs `ninja -v`, so each status line carries the whole compiler command;
ninja prints it when a job finishes (output is a pipe, not a terminal), so N counts finished
compile units. The file shown is the `-c` input, else the object named by nvcc's
`--dependency-output X.obj.d` or cl's `/FoX.obj`, so even a cut or hard-wrapped line names it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from mambawin.build.ninja import COMPILE_STEP, NinjaStatus
from mambawin.build.pipeline import BuildPlan, BuildResult
from mambawin.ui import console as ui


class ConsoleReporter:
    """Shows build steps with ✓/✗ and durations, and compile progress as a bar with an ETA."""

    def __init__(self) -> None:
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """One named step; the compile bar lives inside it and disappears when it ends."""
        with ui.step(name):
            if name == COMPILE_STEP:
                # ninja reports a unit when it finishes (minutes), so show the bar at once.
                self._open_bar(None, "ninja reports each unit as it finishes")
            try:
                yield
            finally:
                self._close_bar()

    def note(self, text: str) -> None:
        """A line of narration under the current step."""
        ui.console.print(f"  [dim]{text}[/]", soft_wrap=True)

    def progress(self, status: NinjaStatus) -> None:
        """Advance the compile bar to status (created on the first ninja line)."""
        if self._bar is None or self._task is None:
            self._open_bar(status.total, "")
        assert self._bar is not None and self._task is not None
        self._bar.update(self._task, completed=status.done, total=status.total,
                         unit=f"done: {status.unit}")

    def _open_bar(self, total: int | None, unit: str) -> None:
        self._bar = _new_bar()
        self._bar.start()
        self._task = self._bar.add_task("compile", total=total, unit=unit)

    def summary(self, result: BuildPlan | BuildResult) -> None:
        """The result on stdout: a build's wheel, size, sha256, archs, log, or a --plan."""
        if isinstance(result, BuildPlan):
            _show_plan(result)
        else:
            _show_build(result)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar, self._task = None, None


def _new_bar() -> Progress:
    return Progress(
        TextColumn("  compiling"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        TextColumn("[dim]{task.fields[unit]}[/]"),
        console=ui.console,
        transient=True,
    )


def _show_build(result: BuildResult) -> None:
    reuse = " (every object reused: only linked)" if result.reused_objects else ""
    ui.out.print(f"[bold]wheel[/]   {result.wheel}", soft_wrap=True)
    ui.out.print(f"size    {result.size / 1e6:.1f} MB")
    ui.out.print(f"sha256  {result.sha256}")
    ui.out.print(f"archs   {result.archs}   compiled {result.units_compiled} units{reuse}")
    ui.out.print(f"log     {result.log}", soft_wrap=True)


def _show_plan(plan: BuildPlan) -> None:
    up = plan.upstream
    ui.out.print(f"[bold]mamba {up['version']}[/] from {up['repo']} "
                     f"{up['ref'] or ''} at {up['commit'] or '(no git commit)'}", soft_wrap=True)
    table = Table(title="patches (dry run on a throwaway copy)")
    for column in ("patch", "status", "files"):
        table.add_column(column, overflow="fold")
    for patch in plan.patches:
        table.add_row(patch["id"], patch["status"], ", ".join(patch["files"]))
    ui.out.print(table)
    ui.out.print(f"archs   {plan.archs}: nvcc gets "
                     + " ".join(f"-gencode {g}" for g in plan.gencode), soft_wrap=True)
    ui.out.print(f"units   {len(plan.units)} of {plan.ext_name}: "
                     + ", ".join(Path(u).name for u in plan.units), soft_wrap=True)
    ui.out.print(f"jobs    {plan.jobs} (MAX_JOBS), nvcc --threads {plan.nvcc_threads}")
    reuse = "its objects will be reused" if plan.reuses_objects else "new"
    ui.out.print(f"folder  {plan.build_dir} ({reuse})", soft_wrap=True)
    ui.out.print(f"version {up['version']}"
                     + (f"+{plan.local_version}" if plan.local_version else ""))
