"""`mambawin doctor`."""

from __future__ import annotations

from typing import Annotated

import typer

from mambawin.cli.app import command, examples, fail_json, print_json
from mambawin.cli.options import WindowsRootOption


@command(
    "doctor",
    epilog=examples(
        "mambawin doctor",
        "mambawin doctor --arch 86 --json",
        "mambawin doctor --windows-root D:\\windows-toolchain",
    ),
)
def doctor_command(
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch", help="CUDA archs you will build for, e.g. '86;89' (checked by nvcc)."
        ),
    ] = None,
    windows_root: WindowsRootOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Check torch, CUDA, the host compiler, build tools, GPU and disk; say how to fix each.

    On Linux it also checks the Windows compilers that `mambawin check`, `build --platform
    win_amd64` and verify's load step of a Windows wheel run under wine."""
    from mambawin.archs import parse_archs
    from mambawin.doctor.checks import DoctorOptions, DoctorTools, run_checks, summary
    from mambawin.errors import MambawinError
    from mambawin.ui.doctor import render_report

    options = DoctorOptions(
        archs=parse_archs(arch) if arch is not None else (), windows_root=windows_root
    )
    tools = DoctorTools(windows_root=options.windows_root)
    report = run_checks(options.archs, options.build_dir, tools=tools)
    if as_json and not report.ready:
        raise fail_json(summary(report), 1, **report.to_json())
    if as_json:
        print_json(report.to_json())
    else:
        render_report(report)
    if not report.ready:  # the table says what; stderr ends with the one error line
        raise MambawinError(summary(report))
