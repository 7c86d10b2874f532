"""`mambawin check`: does a ref compile with the real Windows compilers?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from mambawin.cli.app import command, examples, fail_json, print_json
from mambawin.cli.options import OldRootOption, request_parameters, split_params, windows_root_of
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
@request_parameters("check")
def check_command(
    old_root: OldRootOption = None,
    windows: Annotated[
        bool, typer.Option("--windows", hidden=True, help="The only target; may be left out.")
    ] = False,
    **options: Any,
) -> None:
    """Compile every unit of a ref with Microsoft's cl.exe and NVIDIA's Windows nvcc under wine.

    The flags are those a Windows build would pass; then it checks that the objects link. Windows
    is its only target (`--windows` is still accepted)."""
    from mambawin.builder.faces import from_params
    from mambawin.cli.build import show
    from mambawin.dispatch import run
    from mambawin.ui import check as ui
    from mambawin.ui.progress import ConsoleReporter

    params, plan_only, as_json = split_params(options)
    # --root is the old name of --windows-root: the same field, given once.
    params["windows_root"] = windows_root_of(params.get("windows_root"), old_root)
    request = from_params("check", params)
    reporter = ConsoleReporter()  # narration on stderr, as every backend's; results on stdout
    outcome = run(request, plan_only=plan_only, reporter=reporter)
    report: CheckReport | None = outcome.report
    if report is None:  # a plan: nothing compiled
        show(outcome, reporter=reporter, as_json=as_json)
        return
    failed = _failure(report)
    result = outcome.results[0]  # the one shape every backend's --json prints
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
