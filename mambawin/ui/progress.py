"""The console reporter: build steps with ✓/✗ and ninja's progress as a bar in a terminal, and as
plain lines where nobody sees a bar (a CI log, a pipe): one per finished unit, or every ~15 s.

torch's BuildExtension runs `ninja -v`, so each status line carries the whole compiler command;
ninja prints it when a job finishes (output is a pipe, not a terminal), so N counts finished
compile units. The file shown is the `-c` input, else the object named by nvcc's
`--dependency-output X.obj.d` or cl's `/FoX.obj`, so even a cut or hard-wrapped line names it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from mambawin.builder.results import BuildPlan, BuildResult
from mambawin.stage import COMPILE_STEP, HEARTBEAT_S, Finished, NinjaStatus
from mambawin.toolchain.download import DownloadStatus
from mambawin.ui import console as ui


class ConsoleReporter:
    """The one view of the Reporter protocol (stage.py), on stderr: steps with ✓/✗
    and durations, notes, compile progress as a bar with an ETA, and a line per finished piece
    of work (a unit under wine, a verify step, a spec cell); `details` draws more of a finished
    item's own result (verify's tables).

    Where stderr is not a terminal the bar becomes plain lines (PlainProgress): no ANSI codes.
    """

    def __init__(self, details: Callable[[Finished], None] = lambda _: None) -> None:
        self._bar: Progress | PlainProgress | None = None
        self._task: TaskID | None = None
        self._details = details

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
        """A line of narration under the current step (text, never markup: it may hold '[')."""
        ui.console.print(f"  [dim]{escape(text)}[/]", highlight=False)

    def finished(self, item: Finished) -> None:
        """`✓ [3/7] name (1.2s) summary`: one line as each piece of work finishes."""
        count = f" \\[{item.count[0]}/{item.count[1]}]" if item.count else ""
        took = f" [dim]({item.seconds:.1f}s)[/]" if item.seconds is not None else ""
        summary = f" {escape(item.summary)}" if item.summary else ""
        ui.console.print(
            f"{ui.MARKS[item.status]}{count} [bold]{escape(item.name)}[/]{took}{summary}",
            highlight=False,
        )
        self._details(item)

    def progress(self, status: NinjaStatus) -> None:
        """Advance the compile bar to status (created on the first ninja line)."""
        if self._bar is None or self._task is None:
            self._open_bar(status.total, "")
        assert self._bar is not None and self._task is not None
        self._bar.update(
            self._task, completed=status.done, total=status.total, unit=f"done: {status.unit}"
        )

    def _open_bar(self, total: int | None, unit: str) -> None:
        self._bar = _new_bar() if ui.console.is_terminal else PlainProgress(_print_plain)
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


class PlainProgress:
    """Progress as plain lines: `[5/7] 71% x.cu 38 s, eta 40 s` per finished unit, and a line
    every HEARTBEAT_S seconds while nothing finishes (one nvcc unit takes minutes).

    Quacks like the part of rich's Progress that ConsoleReporter uses.
    """

    def __init__(
        self,
        emit: Callable[[str], None],
        heartbeat: float = HEARTBEAT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._emit, self._heartbeat, self._clock = emit, heartbeat, clock
        self._start = self._last = clock()
        self._done, self._total = 0, 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="progress-heartbeat", daemon=True)

    def start(self) -> None:
        self._start = self._last = self._clock()
        self._ticker.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._ticker.is_alive():
            self._ticker.join()

    def add_task(self, description: str, total: int | None, unit: str) -> TaskID:
        self._total = total or 0
        return TaskID(0)

    def update(self, task: TaskID, completed: int, total: int, unit: str) -> None:
        """A unit finished: print its line at once."""
        with self._lock:
            self._done, self._total = completed, total
            self._say(
                line(completed, total, unit.removeprefix("done: "), self._clock() - self._start)
            )

    def _tick(self) -> None:
        while not self._stopped.wait(self._heartbeat / 3):
            with self._lock:
                if self._clock() - self._last >= self._heartbeat:
                    self._say(
                        line(self._done, self._total, "compiling", self._clock() - self._start)
                    )

    def _say(self, text: str) -> None:
        self._last = self._clock()
        self._emit(text)


def line(done: int, total: int, unit: str, elapsed: float) -> str:
    """`[5/7] 71% selective_scan_bwd_fp16_real.cu 38 s, eta 40 s` (no total yet: `[0/?]`)."""
    if not total:
        return f"  [{done}/?] {unit} {elapsed:.0f} s"
    eta = f", eta {elapsed / done * (total - done):.0f} s" if done else ""
    return f"  [{done}/{total}] {done * 100 // total}% {unit} {elapsed:.0f} s{eta}"


def download_line(status: DownloadStatus) -> str:
    """`  [3/7] nvidia_cuda_nvcc-13.0.88-py3-none-win_amd64.whl: 612 MB so far, 8.1 MB/s, this
    wheel 12/40 MB, eta 4 s`: what pip is fetching, how fast, and how long this wheel takes."""
    mb = 1_000_000
    head = f"  [{status.index}/{status.count}] {status.wheel or 'starting pip'}"
    line = f"{head}: {status.done / mb:.0f} MB so far, {status.rate / mb:.1f} MB/s"
    if status.current_size is not None:
        line += f", this wheel {status.current_done / mb:.0f}/{status.current_size / mb:.0f} MB"
    if status.eta is not None:
        line += f", eta {status.eta:.0f} s"
    return line


def show_download(status: DownloadStatus) -> None:
    """A download's progress as one plain line on stderr (a CI log sees it as a terminal does)."""
    _print_plain(download_line(status))


def _print_plain(text: str) -> None:
    # markup=False: a file name with [brackets] is text, not a style.
    ui.console.print(text, markup=False, highlight=False, soft_wrap=True)


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
    ui.out.print(f"[bold]wheel[/]   {escape(str(result.wheel))}", soft_wrap=True)
    ui.out.print(f"size    {result.size / 1e6:.1f} MB")
    ui.out.print(f"sha256  {result.sha256}")
    ui.out.print(f"archs   {result.archs}   compiled {result.units_compiled} units{reuse}")
    for line in (result.front_end or {}).get("said", ()):
        ui.out.print(line, markup=False)
    if result.glibc:
        ui.out.print(f"glibc   {result.glibc} or newer: the oldest Linux it loads on")
    if result.cache:
        cache = result.cache
        ui.out.print(
            f"cache   {cache['tool']}: {cache['hits']} hits, {cache['misses']} misses "
            "(compile steps)"
        )
    if result.log is not None:
        ui.out.print(f"log     {result.log}", soft_wrap=True, markup=False)


def _show_plan(plan: BuildPlan) -> None:
    up = plan.upstream
    # values are escaped: a `--repo /tmp/[red]r` was shown as `/tmp/r`, a path that is not there
    ui.out.print(
        f"[bold]{escape(plan.package)} {escape(str(up['version']))}[/] from "
        f"{escape(str(up['repo']))} {escape(up['ref'] or '')} at "
        f"{escape(up['commit'] or '(no git commit)')}",
    )
    if plan.wheel:
        ui.out.print(f"wheel   {plan.wheel}", soft_wrap=True, markup=False)
    for fact in plan.facts:
        note = f" ({fact['note']})" if fact.get("note") else ""
        # wrapped between words at the width (a path or a flag stays whole on its line)
        ui.out.print(f"{fact['name']:<9}{fact['value']}: {fact['source']}{note}", markup=False)
    for line in plan.unchecked:
        ui.out.print(f"not checked: {line}", markup=False)
    rows = [(p["id"], p["status"], ", ".join(p["files"])) for p in plan.patches]
    title = "patches (dry run on a throwaway copy)"
    ui.out.print(ui.Fitted(title, ("patch", "status", "files"), rows))
    # Long lists of words: piped, they wrap between words at the width (never inside a flag)
    ui.out.print(
        f"archs   {plan.archs}: nvcc gets " + " ".join(f"-gencode {g}" for g in plan.gencode)
    )
    for line in (plan.front_end or {}).get("said", ()):
        ui.out.print(line, markup=False)
    ui.out.print(
        f"units   {len(plan.units)} of {plan.ext_name}: "
        + ", ".join(Path(u).name for u in plan.units)
    )
    ui.out.print(f"jobs    {plan.jobs} (MAX_JOBS), nvcc --threads {plan.nvcc_threads}")
    reuse = "its objects will be reused" if plan.reuses_objects else "new"
    ui.out.print(f"folder  {plan.build_dir} ({reuse})", soft_wrap=True, markup=False)
    if plan.estimate:
        ui.out.print(
            f"time    about {plan.estimate['seconds']} s with {plan.estimate['jobs']} jobs on "
            f"{plan.estimate['cores']} cores "
            f"({plan.estimate['basis']})",
            markup=False,
        )
