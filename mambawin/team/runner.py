"""`mambawin build --spec`: build every cell this machine can, each in its own torch environment.

Cells of another platform, impossible cells and cells whose wheel already exists are not built.
The rest are grouped by (Python, torch): one environment each (team/envs.py), then the existing
build pipeline runs inside it as `<env python> -m mambawin build ...`, so it compiles against that
environment's torch. A failed cell (or environment) is recorded and the next one goes on.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from mambawin import proc
from mambawin.builder.faces import to_argv
from mambawin.errors import MambawinError
from mambawin.stage import Finished, QuietReporter, Reporter, Status
from mambawin.store.owned import cache_dir
from mambawin.team import envs, toolkits
from mambawin.team.matrix import IMPOSSIBLE, TODO, Cell, cell_request, expand
from mambawin.team.spec import Spec
from mambawin.wheel import naming

BUILT, SKIPPED, FAILED, ELSEWHERE = "built", "skipped", "failed", "elsewhere"
CELL_TIMEOUT = 6 * 3600  # a cold build of every arch on a small machine takes hours


@dataclass(frozen=True)
class RunOptions:
    """How to run the cells (the spec says what to build)."""

    jobs: int | None = None
    force: bool = False  # passed on to each build: go on past failed doctor checks
    platform: str = field(default_factory=naming.platform_tag)
    envs_root: Path | None = None  # default: the cache's envs/


@dataclass(frozen=True)
class CellResult:
    """What happened to one cell."""

    cell: Cell
    outcome: str  # built | skipped | failed | impossible | elsewhere
    wheel: Path | None = None
    seconds: float = 0.0
    detail: str = ""
    log: Path | None = None

    def to_json(self) -> dict[str, object]:
        return {
            **self.cell.to_json(),
            "outcome": self.outcome,
            "built_wheel": str(self.wheel) if self.wheel else None,
            "seconds": round(self.seconds, 1),
            "detail": self.detail,
            "log": str(self.log) if self.log else None,
        }


# Each outcome as the Reporter's verdict: a cell this machine leaves to another is no failure.
OUTCOME_STATUS = {
    BUILT: Status.OK,
    SKIPPED: Status.SKIP,
    FAILED: Status.FAIL,
    IMPOSSIBLE: Status.WARN,
    ELSEWHERE: Status.SKIP,
}


def cell_finished(result: CellResult) -> Finished:
    """A cell's outcome as the Reporter sees it: `built: <wheel>`, or why not."""
    detail = result.wheel.name if result.wheel else result.detail
    return Finished(
        result.cell.id,
        OUTCOME_STATUS[result.outcome],
        f"{result.outcome}: {detail}" if detail else result.outcome,
        seconds=result.seconds or None,
        subject=result,
    )


def run_spec(
    spec: Spec, options: RunOptions, *, reporter: Reporter | None = None
) -> list[CellResult]:
    """Build the cells this machine can; one result per cell of the matrix, in matrix order.
    Each cell's build output is a note of reporter, its outcome a finished item."""
    reporter = reporter or QuietReporter()
    cells = expand(spec)
    results: dict[str, CellResult] = {c.id: r for c in cells if (r := _not_built(c, options))}
    groups: dict[tuple[str, str], list[Cell]] = {}
    for cell in cells:
        if cell.id not in results:
            groups.setdefault((cell.python, cell.torch.version + cell.torch.index), []).append(cell)
    for group in groups.values():
        for result in _run_group(group, spec, options, reporter):
            results[result.cell.id] = result
            reporter.finished(cell_finished(result))
    return [results[cell.id] for cell in cells]


def _not_built(cell: Cell, options: RunOptions) -> CellResult | None:
    """The result of a cell this run will not build, or None when it should be built."""
    if cell.status == IMPOSSIBLE:
        return CellResult(cell, IMPOSSIBLE, detail=cell.reason)
    if cell.status != TODO:
        return CellResult(cell, SKIPPED, detail=f"already {cell.status}: {cell.wheel}")
    if cell.platform != options.platform:
        return CellResult(
            cell,
            ELSEWHERE,
            detail=f"needs a {cell.platform} machine (this one is {options.platform})",
        )
    return None


@dataclass(frozen=True)
class PlannedCell:
    """What `build --spec` would do for one cell: its environment and its build command."""

    cell: Cell
    outcome: str  # "build", or why not: skipped | impossible | elsewhere
    detail: str = ""
    env: Path | None = None
    argv: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            **self.cell.to_json(),
            "outcome": self.outcome,
            "detail": self.detail,
            "environment": str(self.env) if self.env else None,
            "argv": list(self.argv),
        }


def plan_spec(spec: Spec, options: RunOptions) -> list[PlannedCell]:
    """`build --spec --plan`: what each cell would do; creates, installs and compiles nothing."""
    planned = []
    for cell in expand(spec):
        skipped = _not_built(cell, options)
        if skipped is not None:
            planned.append(PlannedCell(cell, skipped.outcome, skipped.detail))
            continue
        env = envs.env_dir(cell.python, cell.torch, options.envs_root)
        argv = build_argv(cell, envs.env_python(env), spec, options)
        planned.append(PlannedCell(cell, "build", env=env, argv=tuple(argv)))
    return planned


def _run_group(
    cells: list[Cell], spec: Spec, options: RunOptions, reporter: Reporter
) -> list[CellResult]:
    """Find the group's CUDA toolkit, make its environment once, then build each cell in it."""
    first = cells[0]
    toolkit, note = toolkits.find_toolkit(first.torch.cuda, envs.clean_environ())
    if toolkit is None:
        return [CellResult(c, FAILED, detail=note) for c in cells]
    if note:
        reporter.note(f"note: {note}")
    start = time.monotonic()
    try:
        env = envs.ensure_env(
            first.python, first.torch, root=options.envs_root, on_line=reporter.note
        )
    except MambawinError as exc:
        spent = time.monotonic() - start
        return [CellResult(c, FAILED, seconds=spent, detail=f"environment: {exc}") for c in cells]
    environ = toolkits.toolkit_environ(toolkit, envs.child_environ(env))
    return [_build_cell(cell, env, environ, spec, options, reporter) for cell in cells]


def _build_cell(
    cell: Cell,
    env: envs.BuildEnv,
    environ: dict[str, str],
    spec: Spec,
    options: RunOptions,
    reporter: Reporter,
) -> CellResult:
    """Run the build pipeline for one cell in env; the wheel must appear in the wheelhouse."""
    reporter.note(f"{cell.id}: building in the environment {env.root}")
    log = _log_path(cell)
    before = _wheels(spec.wheelhouse)
    start = time.monotonic()
    with log.open("w", encoding="utf-8") as stream:

        def on_line(text: str) -> None:
            stream.write(text + "\n")
            reporter.note(text)

        try:
            done = proc.run(
                build_argv(cell, env.python, spec, options),
                timeout=CELL_TIMEOUT,
                check=False,
                env=environ,
                on_line=on_line,
            )
        except MambawinError as exc:
            return CellResult(cell, FAILED, None, time.monotonic() - start, str(exc), log)
    spent = time.monotonic() - start
    wheel = _produced(cell, spec.wheelhouse, before)
    if done.returncode != 0 or wheel is None:
        why = _last_line(done.stdout) or f"exit code {done.returncode}"
        if done.returncode == 0:
            why = f"the build wrote no {cell.wheel or 'wheel'} into {spec.wheelhouse}"
        return CellResult(cell, FAILED, None, spent, why, log)
    return CellResult(cell, BUILT, wheel, spent, "", log)


def build_argv(cell: Cell, python: Path, spec: Spec, options: RunOptions) -> list[str]:
    """`<env python> -m mambawin build` for this cell: its request (matrix.cell_request, the
    one the judge validated) as arguments, with how this run builds (--jobs, --force)."""
    request = replace(cell_request(cell, spec), jobs=options.jobs, force=options.force)
    return [str(python), "-m", "mambawin", *to_argv(request)]


def package_args(name: str) -> list[str]:
    """`--package NAME` for every package but mamba-ssm (build's default)."""
    return [] if name == "mamba-ssm" else ["--package", name]


def _log_path(cell: Cell) -> Path:
    folder = cache_dir() / "team-logs"
    folder.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9._+-]+", "-", cell.id)  # a branch ref may hold '/'
    return folder / time.strftime(f"{name}-%Y%m%d-%H%M%S.log")


def _wheels(folder: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime for p in folder.glob("*.whl")} if folder.is_dir() else {}


def _produced(cell: Cell, wheelhouse: Path, before: dict[str, float]) -> Path | None:
    """The cell's wheel if the build wrote it (or, with an unknown version, the new wheel)."""
    after = _wheels(wheelhouse)
    if cell.wheel:
        return wheelhouse / cell.wheel if cell.wheel in after else None
    new = [
        n
        for n, t in after.items()
        if before.get(n) != t and n.startswith(cell.package.upstream.import_name + "-")
    ]
    return wheelhouse / new[0] if len(new) == 1 else None


def _last_line(text: str) -> str:
    """A failed build's reason: its last line starting with `error`, else its last line."""
    return proc.reason(text, markers=("error",), strip_marker=False)
