"""Rich rendering of verify and bench for people: steps on stderr, the results on stdout."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from mambawin.stage import Finished, Status
from mambawin.ui.console import console, out
from mambawin.verify.bench_report import BenchReport
from mambawin.verify.report import StepResult, VerifyReport


def step_details(item: Finished) -> None:
    """The tables under a finished verify step's line (ui.progress.ConsoleReporter draws the
    line): per dtype for smoke and conv, per block, per upstream test file."""
    step = item.subject
    if not isinstance(step, StepResult):
        return
    if step.name in _TITLES and step.details.get("per_dtype"):
        console.print(smoke_table(step.details, _TITLES[step.name]))
    if step.name == "blocks" and step.details.get("blocks"):
        console.print(blocks_table(step.details))
    runs = {k: v for k, v in step.details.items() if isinstance(v, dict) and "project" in v}
    if step.name == "upstream-tests" and runs:  # a run that wrote no report has only its error
        console.print(tests_table(runs))


_TITLES = {"smoke": "selective scan", "conv": "causal-conv1d"}


def blocks_table(details: dict[str, Any] | Any) -> Table:
    """Per block and dtype: fast path vs reference path errors of output, dx, worst weight grad."""
    table = Table(
        title="Mamba blocks: fast path vs reference path (max abs error)", title_justify="left"
    )
    for column in ("block", "dtype", "status", "out", "dx", "worst param grad"):
        table.add_column(
            column,
            justify="left"
            if column in ("block", "dtype", "status", "worst param grad")
            else "right",
        )
    for block in details["blocks"]:
        rows = block.get("per_dtype") or {}
        if not rows:
            table.add_row(block["block"], "-", block["status"], "-", "-", block["reason"][:60])
        for dtype, row in rows.items():
            errors = row.get("errors", {})
            grads = [(k, e) for k, e in errors.items() if k not in ("out", "dx")]
            worst = f"{grads[0][0]} {grads[0][1]['max_abs']:.3g}" if grads else "-"
            table.add_row(
                block["block"],
                dtype,
                "ok" if row["passed"] else "fail",
                _err(errors.get("out")),
                _err(errors.get("dx")),
                worst,
            )
    return table


def tests_table(details: dict[str, Any] | Any) -> Table:
    """Upstream tests per package: passed / failed / skipped / expected failures."""
    table = Table(title="upstream tests against the installed wheels", title_justify="left")
    for column in ("package", "file", "ref", "passed", "failed", "skipped", "expected fail"):
        table.add_column(
            column,
            justify="right"
            if column in ("passed", "failed", "skipped", "expected fail")
            else "left",
        )
    for run in details.values():
        table.add_row(
            run["project"],
            run["file"],
            run["rev"][:12],
            str(run["passed"]),
            str(run["failed"] + run["errors"]),
            str(run["skipped"]),
            str(run["expected_failures"]),
        )
    return table


def _err(error: dict[str, float] | None) -> str:
    return f"{error['max_abs']:.3g}" if error and error.get("max_abs") is not None else "-"


def smoke_table(details: dict[str, Any] | Any, what: str = "selective scan") -> Table:
    """Per-dtype errors against the float64 reference, with the tolerances used."""
    table = Table(
        title=f"{what} vs float64 reference (seed {details.get('seed')})", title_justify="left"
    )
    for column in ("dtype", "cases", "failed", "max abs err", "max rel err", "rtol", "atol"):
        table.add_column(column, justify="left" if column == "dtype" else "right")
    tolerances = details.get("tolerances", {})
    for dtype, row in details["per_dtype"].items():
        tol = tolerances.get(dtype, {})
        table.add_row(
            dtype,
            str(row["cases"]),
            str(row["failed"]),
            f"{row['max_abs']:.3g}",
            f"{row['max_rel']:.3g}",
            f"{tol.get('rtol', '?')}",
            f"{tol.get('atol', '?')}",
        )
    return table


def render_verify(report: VerifyReport) -> None:
    """The closing summary line; a failure's line comes from the CLI's error handler instead."""
    if report.passed:
        color = "green" if report.gpu_verified else "yellow"
        out.print(f"[{color}]{escape(report.summary())}[/]", soft_wrap=True)
    bench = report.step("bench")
    if bench and bench.status is Status.OK:
        out.print(bench_table(BenchReport.from_json(dict(bench.details))))


def bench_table(report: BenchReport) -> Table:
    """Kernel vs eager reference: times, speedup, GB/s against the copy bandwidth, peak memory."""
    table = Table(
        title=f"{report.device}, torch {report.torch}; copy {report.copy_gbps:.0f} GB/s; "
        f"reference: {report.reference}",
        title_justify="left",  # never centred: piped, a centred title was far indented
    )
    columns = (
        "dtype",
        "b×d×L×n",
        "mode",
        "kernel ms",
        "ref ms",
        "speedup",
        "GB/s",
        "% copy",
        "kernel MiB",
        "ref MiB",
    )
    for column in columns:
        table.add_column(column, justify="left" if column in ("dtype", "mode") else "right")
    for r in report.rows:
        table.add_row(
            r.dtype,
            f"{r.batch}×{r.dim}×{r.seqlen}×{r.dstate}",
            r.mode,
            f"{r.kernel_ms:.3f}",
            _num(r.reference_ms, ".3f", r.note),
            _num(r.speedup, ".1f") + ("x" if r.speedup else ""),
            f"{r.kernel_gbps:.0f}",
            f"{r.bandwidth_fraction:.0%}",
            f"{r.kernel_peak_mb:.0f}",
            _num(r.reference_peak_mb, ".0f"),
        )
    return table


def _num(value: float | None, fmt: str, missing: str = "") -> str:
    return format(value, fmt) if value is not None else (missing or "-")
