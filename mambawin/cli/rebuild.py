"""`mambawin rebuild`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mambawin.builder.backends import help_of
from mambawin.cli.app import command, examples, fail_json, print_json
from mambawin.errors import MachineDiffers, RebuildDiffers

if TYPE_CHECKING:
    from mambawin.builder.rebuild import Planned, RebuildReport

MACHINE = "This machine"


@command(
    "rebuild",
    cache=True,
    epilog=examples(
        "mambawin rebuild wheelhouse/mamba_ssm-2.3.2+cu130torch2.11-cp312-cp312-linux_x86_64.whl",
        "mambawin rebuild wheelhouse/*.whl --plan",
        "mambawin rebuild WHEEL --keep rebuilt --json",
    ),
)
def rebuild_command(
    ctx: typer.Context,
    wheels: Annotated[
        list[Path],
        typer.Argument(
            metavar="WHEEL...",
            help="Published wheels mambawin built (each carries its provenance).",
        ),
    ],
    keep: Annotated[
        Path | None,
        typer.Option(
            "--keep",
            help="Keep each rebuilt wheel in this folder.",
            show_default="removed after the comparison",
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            rich_help_panel=MACHINE,
            help=help_of("--jobs"),
            show_default="$MAX_JOBS, else doctor's",
        ),
    ] = None,
    repo: Annotated[
        str | None,
        typer.Option(
            "--repo",
            rich_help_panel=MACHINE,
            help="A clone to fetch the wheel's commit from (one the provenance names the same: "
            "needed for a wheel built from a local clone).",
            show_default="the repository the provenance names",
        ),
    ] = None,
    windows_root: Annotated[
        Path | None,
        typer.Option(
            "--windows-root",
            rich_help_panel=MACHINE,
            help="The Windows toolchain a win_amd64 wheel is rebuilt with.",
            show_default="mambawin's cache",
        ),
    ] = None,
    plan_only: Annotated[
        bool,
        typer.Option(
            "--plan", help="Show each wheel's build and this machine's checks; build nothing."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=help_of("--json"))] = False,
) -> None:
    """Rebuild published wheels from their provenance and compare the bytes.

    Each WHEEL's provenance names what made it: the upstream commit or sdist (pinned: another is
    refused), archs, ABI, patches left out and build date; its file name the Python, platform
    and label. This machine must have the mambawin, torch, CUDA, compilers and Python the wheel
    was built with, or nothing is built and each difference is named with its fix. Each wheel
    is rebuilt into a folder of mambawin's own and compared member by member. Exit 0 when every
    wheel is identical, 14 when one differs, 13 when this machine cannot give the same bytes."""
    from mambawin.builder import rebuild
    from mambawin.builder.rebuild_target import read_target
    from mambawin.builder.request import Tools

    obj: dict[str, Any] = ctx.obj if isinstance(ctx.obj, dict) else {}
    host = obj.get("host")
    targets = [
        read_target(w, host=host, jobs=jobs, windows_root=windows_root, repo=repo) for w in wheels
    ]
    probe = obj.get("machine_facts") or _machine_facts(Tools(doctor=obj.get("doctor")))
    if plan_only:
        show_plan(rebuild.plan(targets, probe), as_json=as_json)
        return
    build = obj.get("build") or _build(Tools(doctor=obj.get("doctor")))
    report = rebuild.rebuild(targets, build=build, probe=probe, keep=keep)
    show_report(report, as_json=as_json)


def _machine_facts(tools: Any) -> Callable[..., Any]:
    from mambawin.dispatch import machine_facts

    return lambda request: machine_facts(request, tools)


def _build(tools: Any) -> Callable[..., Any]:
    from mambawin.dispatch import run
    from mambawin.ui.progress import ConsoleReporter

    reporter = ConsoleReporter()  # narration on stderr; the comparison is the result
    return lambda request: run(request, tools=tools, reporter=reporter)


def show_plan(planned: tuple[Planned, ...], *, as_json: bool) -> None:
    """Each wheel's build command and checks on stdout; refused (after it) when one fails."""
    from mambawin.builder.rebuild import refuse_machine

    document = {"wheels": [p.to_json() for p in planned], "ready": all(p.ready for p in planned)}
    try:
        refuse_machine(planned)
    except MachineDiffers as exc:
        if as_json:
            raise fail_json(str(exc), exc.exit_code, **document) from None
        _print_plan(planned)
        raise
    if as_json:
        print_json(document)
        return
    _print_plan(planned)


def _print_plan(planned: tuple[Planned, ...]) -> None:
    for each in planned:
        typer.echo(f"{each.target.wheel}:")
        typer.echo(f"  {each.to_json()['command']}")
        typer.echo(f"  source: {each.target.pin.describe()}")
        for check in each.checks:
            verdict = (
                "ok" if check.ok else f"this machine has {check.machine or 'none'}: {check.fix}"
            )
            typer.echo(f"  {check.what} {check.wheel}: {verdict}")


def show_report(report: RebuildReport, *, as_json: bool) -> None:
    """One line per wheel (or the JSON document); RebuildDiffers when one is not its rebuild."""
    from mambawin.builder.rebuild import refuse_differences

    try:
        refuse_differences(report)
    except RebuildDiffers as exc:
        if as_json:
            raise fail_json(str(exc), exc.exit_code, **report.to_json()) from None
        _print_report(report)
        raise
    if as_json:
        print_json(report.to_json())
        return
    _print_report(report)


def _print_report(report: RebuildReport) -> None:
    for each in report.wheels:
        compared = each.comparison
        if compared.identical:
            typer.echo(f"{each.wheel}: identical (sha256 {compared.sha256})")
        else:
            typer.echo(f"{each.wheel}: DIFFERS: {'; '.join(compared.differences)}")
