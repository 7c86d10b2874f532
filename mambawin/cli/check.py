"""`mambawin check --windows`: does a ref compile with the real Windows compilers?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mambawin.builder import backends
from mambawin.builder.backends import help_of
from mambawin.cli.app import command, fail_json, print_json, split_values
from mambawin.cli.build import (
    PackageOption,
    RefOption,
    RepoOption,
    given_options,
    jobs_option,
)
from mambawin.errors import CheckFailed, UsageError

if TYPE_CHECKING:
    from mambawin.check.pipeline import CheckReport


@command("check", cache=True)
def check_command(
    ctx: typer.Context,
    windows: Annotated[
        bool, typer.Option("--windows", help="Compile with cl.exe and nvcc.exe under wine.")
    ] = False,
    ref: RefOption = None,
    repo: RepoOption = None,
    package: PackageOption = "mamba-ssm",
    arch: Annotated[str, typer.Option("--arch", help="CUDA archs, e.g. '90' or '86;89'.")] = "90",
    stock: Annotated[
        bool, typer.Option("--stock", help="Compile upstream's unpatched sources.")
    ] = False,
    cpython: Annotated[
        Path | None,
        typer.Option(
            "--cpython",
            help="CPython source tree at your Python's tag (Include/, PC/pyconfig.h): "
            "compiles the binding file and checks the link.",
        ),
    ] = None,
    unit: Annotated[
        list[str] | None,
        typer.Option(
            "--unit",
            help="Only this unit, as the table lists it or by file name (repeatable); no link "
            "check.",
        ),
    ] = None,
    jobs: Annotated[int | None, jobs_option("$MAX_JOBS, else one per CPU")] = None,
    root: Annotated[
        Path | None,
        typer.Option(
            "--windows-root",
            "--root",
            help="The Windows toolchain folder.",
            show_default="mambawin's cache (`mambawin toolchain windows --setup`)",
        ),
    ] = None,
    plan_only: Annotated[bool, typer.Option("--plan", help=help_of("--plan"))] = False,
    as_json: Annotated[bool, typer.Option("--json", help=help_of("--json"))] = False,
) -> None:
    """Compile every unit of a ref with Microsoft's cl.exe and NVIDIA's Windows nvcc under wine,
    with the flags a Windows build would pass, then check that the objects link."""
    from mambawin.archs import parse_archs
    from mambawin.builder.options import resolve_jobs
    from mambawin.check.pipeline import CheckOptions, build_result, check_windows, plan_check
    from mambawin.packages import get_package
    from mambawin.toolchain import wine, wine_server
    from mambawin.ui import check as ui
    from mambawin.ui.progress import ConsoleReporter

    if not windows:
        raise UsageError("check needs a target: pass --windows")
    # The windows-check backend: its toolchain folder, then every option, before any work.
    backends.validate(backends.WINDOWS_CHECK, given_options(ctx))
    launcher = "" if plan_only else wine_server.need_wine()  # a plan never starts wine
    chosen = get_package(package)
    options = CheckOptions(
        package=chosen,
        ref=ref,
        repo=repo or chosen.default_repo,
        archs=parse_archs(arch),
        toolchain=wine.toolchain_at(root or wine.default_root()),
        wine=launcher,
        stock=stock,
        jobs=resolve_jobs(jobs, None),
        cpython=cpython,
        units=split_values(unit),
    )
    reporter = ConsoleReporter()  # narration on stderr, as every backend's; results on stdout
    if plan_only:
        plan = plan_check(options, reporter=reporter)
        if as_json:
            print_json(plan.to_json())
            return
        reporter.summary(plan)
        return
    report = check_windows(options, reporter=reporter)
    failed = _failure(report)
    result = build_result(report)  # the one shape every backend's --json prints
    if as_json and not report.ok:  # the result, with the keys every error document has
        raise fail_json(failed, CheckFailed.exit_code, **result.to_json())
    if as_json:
        print_json(result.to_json())
        return
    ui.render(report)
    if not report.ok:
        raise CheckFailed(failed)


def _failure(report: CheckReport) -> str:
    """What failed, in one line: the units that do not compile (the first named), or the link."""
    broken = [u.source for u in report.units if u.status == "error"]
    if broken:
        more = f" and {len(broken) - 1} more" if len(broken) > 1 else ""
        what = f"{broken[0]}{more} do not compile"
    else:
        what = "its objects do not link"
    return f"{report.package} {report.ref} does not build on Windows as checked: {what}"
