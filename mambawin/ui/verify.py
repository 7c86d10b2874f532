"""Rich rendering of verify and bench for people: steps on stderr, the results on stdout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

from mambawin.ui.console import FAIL, OK, SKIP, console, out

if TYPE_CHECKING:
    from mambawin.verify.pipeline import StepResult, VerifyReport
    from mambawin.verify.runners.bench import BenchReport

_MARK = {"ok": OK, "fail": FAIL, "skip": SKIP}


def render_step(step: StepResult) -> None:
    """One line per step as soon as it finishes: ✓/✗/- name summary."""
    console.print(f"{_MARK[step.status]} [bold]{step.name}[/] {step.summary}", soft_wrap=True)
    if step.name == "smoke" and step.details.get("per_dtype"):
        console.print(smoke_table(step.details))


def smoke_table(details: dict[str, Any] | Any) -> Table:
    """Per-dtype errors against the float64 reference, with the tolerances used."""
    table = Table(title=f"selective scan vs float64 reference (seed {details.get('seed')})")
    for column in ("dtype", "cases", "failed", "max abs err", "max rel err", "rtol", "atol"):
        table.add_column(column, justify="left" if column == "dtype" else "right")
    tolerances = details.get("tolerances", {})
    for dtype, row in details["per_dtype"].items():
        tol = tolerances.get(dtype, {})
        table.add_row(dtype, str(row["cases"]), str(row["failed"]), f"{row['max_abs']:.3g}",
                      f"{row['max_rel']:.3g}", f"{tol.get('rtol', '?')}", f"{tol.get('atol', '?')}")
    return table


def render_verify(report: VerifyReport) -> None:
    """The closing summary line; a failure's line comes from the CLI's error handler instead."""
    if report.passed:
        color = "green" if report.gpu_verified else "yellow"
        out.print(f"[{color}]{report.summary()}[/]", soft_wrap=True)
    bench = report.step("bench")
    if bench and bench.status == "ok":
        from mambawin.verify.runners.bench import BenchReport

        out.print(bench_table(BenchReport.from_json(dict(bench.details))))


def bench_table(report: BenchReport) -> Table:
    """Kernel vs eager reference: times, speedup, GB/s against the copy bandwidth, peak memory."""
    table = Table(title=f"{report.device}, torch {report.torch}; copy {report.copy_gbps:.0f} GB/s; "
                        f"reference: {report.reference}")
    columns = ("dtype", "b×d×L×n", "mode", "kernel ms", "ref ms", "speedup", "GB/s", "% copy",
               "kernel MiB", "ref MiB")
    for column in columns:
        table.add_column(column, justify="left" if column in ("dtype", "mode") else "right")
    for r in report.rows:
        table.add_row(r.dtype, f"{r.batch}×{r.dim}×{r.seqlen}×{r.dstate}", r.mode,
                      f"{r.kernel_ms:.3f}", _num(r.reference_ms, ".3f", r.note),
                      _num(r.speedup, ".1f") + ("x" if r.speedup else ""), f"{r.kernel_gbps:.0f}",
                      f"{r.bandwidth_fraction:.0%}", f"{r.kernel_peak_mb:.0f}",
                      _num(r.reference_peak_mb, ".0f"))
    return table


def _num(value: float | None, fmt: str, missing: str = "") -> str:
    return format(value, fmt) if value is not None else (missing or "-")
