"""`mambawin check`: does a ref compile with the real Windows compilers?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mambawin.builder import backends
from mambawin.builder.backends import help_of
from mambawin.cli.app import command, examples, fail_json, print_json, split_values
from mambawin.cli.build import given_options
from mambawin.cli.options import (
    OldRootOption,
    PackageOption,
    RefOption,
    RepoOption,
    SourceFromOption,
    WindowsRootOption,
    jobs_option,
    windows_root_of,
)
from mambawin.errors import CheckFailed

if TYPE_CHECKING:
    from mambawin.check.pipeline import CheckReport


@command(
    "check",
    cache=True,
    epilog=examples(
        "mambawin check --plan",
        "mambawin check --ref v2.2.6 --arch 86",
        "mambawin check --package causal-conv1d --unit causal_conv1d.cpp",
    ),
)
def check_command(
    ctx: typer.Context,
    ref: RefOption = None,
    repo: RepoOption = None,
    package: PackageOption = "mamba-ssm",
    source_from: SourceFromOption = None,
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
    windows_root: WindowsRootOption = None,
    old_root: OldRootOption = None,
    windows: Annotated[
        bool, typer.Option("--windows", hidden=True, help="The only target; may be left out.")
    ] = False,
    plan_only: Annotated[bool, typer.Option("--plan", help=help_of("--plan"))] = False,
    as_json: Annotated[bool, typer.Option("--json", help=help_of("--json"))] = False,
) -> None:
    """Compile every unit of a ref with Microsoft's cl.exe and NVIDIA's Windows nvcc under wine.

    The flags are those a Windows build would pass; then it checks that the objects link. Windows
    is its only target (`--windows` is still accepted)."""
    from mambawin.archs import parse_archs
    from mambawin.builder.options import resolve_jobs
    from mambawin.check.pipeline import CheckOptions, build_result, check_windows, plan_check
    from mambawin.fetch.sdist import source_choice
    from mambawin.packages import get_package
    from mambawin.toolchain import wine, wine_server
    from mambawin.ui import check as ui
    from mambawin.ui.progress import ConsoleReporter

    root = windows_root_of(windows_root, old_root)
    given = given_options(ctx)
    if root is not None:  # given under its old name too: checked as --windows-root
        given["--windows-root"] = root
    # The windows-check backend: its toolchain folder, then every option, before any work.
    backends.validate(backends.WINDOWS_CHECK, given)
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
        source_from=source_choice(source_from),
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
