"""`mambawin verify` and `mambawin bench`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mambawin.cli.app import command, examples, fail_json, print_json, split_values
from mambawin.ui.console import console, out

if TYPE_CHECKING:
    from mambawin.verify.options import VerifyOptions
    from mambawin.verify.report import VerifyReport


@command(
    "verify",
    cache=True,
    epilog=examples(
        "mambawin verify wheelhouse",
        "mambawin verify --installed --quick",
        "mambawin verify wheelhouse --upstream-tests --report verify.md",
    ),
)
def verify_command(
    wheel: Annotated[
        Path | None,
        typer.Argument(
            help="A wheel, or a folder of wheels (mamba_ssm and causal_conv1d), installed together "
            "into a throwaway venv."
        ),
    ] = None,
    installed: Annotated[
        bool,
        typer.Option("--installed", help="Verify the mamba-ssm / causal-conv1d installed here."),
    ] = False,
    bench: Annotated[bool, typer.Option("--bench", help="Also benchmark the kernel.")] = False,
    upstream_tests: Annotated[
        bool,
        typer.Option(
            "--upstream-tests",
            help="Also run each package's own tests from its upstream commit "
            "(needs pytest and einops in the environment).",
        ),
    ] = False,
    keyword: Annotated[
        str | None,
        typer.Option(
            "-k",
            "--tests-filter",
            help="Only the upstream tests matching this pytest -k expression.",
        ),
    ] = None,
    skip: Annotated[
        list[str] | None,
        typer.Option(
            "--skip",
            help="Leave out a step (repeat or comma-separate): requirements, load, ops, smoke, "
            "conv, calls, blocks, compile.",
        ),
    ] = None,
    windows_root: Annotated[
        Path | None,
        typer.Option(
            "--windows-root",
            help="The Windows toolchain the load step builds its loader with (a win_amd64 "
            "wheel on Linux); default: the one `mambawin toolchain windows --setup` made.",
        ),
    ] = None,
    seed: Annotated[
        int | None,
        # torch.manual_seed refuses a seed past 2**64 - 1 (the runners add offsets to it): it
        # failed inside the GPU steps, after the install, not as bad input
        typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for the smoke inputs."),
    ] = None,
    quick: Annotated[bool, typer.Option("--quick", help="Fewer smoke cases.")] = False,
    serial: Annotated[
        bool,
        typer.Option(
            "--serial",
            help="Run one step at a time: the GPU steps whole in one process (blocks and "
            "compile not split into parts), upstream's tests as one pytest per file and pip's "
            "resolve after them (each step's time as on a quiet machine; slower).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    report_file: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write what ran, where and each step's result to FILE (.md or .json) and "
            "the other format beside it: the Markdown is ready to paste into an issue.",
        ),
    ] = None,
) -> None:
    """Check wheels: tags, METADATA, GPU code, fit, pair, install, kernels on the GPU, tests.

    A folder holding mamba-ssm and causal-conv1d wheels is installed as a pair."""
    from mambawin.errors import VerifyError
    from mambawin.ui.progress import ConsoleReporter
    from mambawin.ui.verify import render_verify, step_details
    from mambawin.verify import pipeline as core
    from mambawin.verify import send
    from mambawin.verify.options import VerifyOptions

    # Before any work: a report path that cannot be written must not cost a verify run.
    paths = send.report_paths(report_file) if report_file is not None else None
    options = VerifyOptions(
        wheel=wheel,
        installed=installed,
        bench=bench,
        seed=seed,
        upstream_tests=upstream_tests,
        test_keyword=keyword,
        skip=frozenset(split_values(skip)),
        windows_root=windows_root,
        smoke_args=("--seqlens", "1,127,2049", "--per-length", "1") if quick else (),
        conv_args=("--seqlens", "1,128,1025", "--widths", "4") if quick else (),
        bench_args=("--quick",) if quick else (),
        serial=serial,
    )
    report = core.verify(options, reporter=ConsoleReporter(details=step_details))
    if paths is not None and report_file is not None:
        _send(report, options, paths, report_file.name, as_json)
    if as_json and not report.passed:
        raise fail_json(report.summary(), VerifyError.exit_code, **report.to_json())
    if as_json:
        print_json(report.to_json())
        return
    render_verify(report)
    if not report.passed:
        raise VerifyError(report.summary())


def _send(
    report: VerifyReport, options: VerifyOptions, paths: Any, name: str, as_json: bool
) -> None:
    """Write the report whatever the verdict; a refused write is its own exit (10), with the
    verify result still in the JSON document under --json."""
    from mambawin.errors import MambawinError
    from mambawin.verify import send
    from mambawin.verify.target import probe_driver

    machine = send.where(report, probe_driver())
    try:
        send.write(paths, send.document(report, send.command(options, name), machine))
    except MambawinError as exc:
        if as_json:
            raise fail_json(str(exc), exc.exit_code, **report.to_json()) from None
        raise
    console.print(
        f"report written: {paths.markdown} (paste it into an issue) and {paths.json}", markup=False
    )


@command(
    "bench",
    epilog=examples(
        "mambawin bench wheelhouse/mamba_ssm-2.2.6+cu130torch2.10-cp312-cp312-win_amd64.whl",
        "mambawin bench --installed --quick --plot bench.png",
    ),
)
def bench_command(
    wheel: Annotated[Path | None, typer.Argument(help="The wheel to benchmark.")] = None,
    installed: Annotated[
        bool, typer.Option("--installed", help="Benchmark the mamba-ssm installed here.")
    ] = False,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG plot here.")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="One small shape only.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Time the compiled selective scan against an eager torch scan on this GPU.

    A wheel is installed into a throwaway venv first; --installed times the mamba-ssm here."""
    from mambawin.ui.verify import bench_table
    from mambawin.verify import bench as core
    from mambawin.verify.runners.bench import plot as plot_report

    report = core.bench(core.BenchOptions(wheel=wheel, installed=installed, quick=quick))
    if plot is not None and plot_report(report, plot) is None:
        console.print("[yellow]matplotlib is not installed: no plot written[/]")
    if as_json:
        print_json(report.to_json())
    else:
        out.print(bench_table(report))
