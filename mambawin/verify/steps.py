"""The steps between static and the GPU: requirements (pip, online), pair, install."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mambawin.errors import MambawinError
from mambawin.packages import (
    CAUSAL_CONV1D,
    MAMBA,
    package_named,
)
from mambawin.stage import Status
from mambawin.verify.conflicts import EnvironmentCheck, check_environment
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import WheelRef, WheelUnderTest, find_wheels, pair_problems
from mambawin.verify.planned import Planned, Step, error_details, failed, run_planned
from mambawin.verify.report import StepResult, named
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.workers import Job

# ---- step 2: requirements resolve on the wheel's platform -----------------------------------


def requirements_step(options: VerifyOptions, ref: WheelRef | None = None) -> StepResult:
    """pip's resolver over a wheel's requirements for its own tags (online; torch excluded)."""
    if options.wheel is None:
        return StepResult(
            "requirements",
            Status.SKIP,
            "an installed package: pip already resolved its requirements when it was installed",
        )
    from mambawin.verify.resolve import resolve_wheel

    wheel = ref.path if ref is not None else Path(options.wheel)
    name = named("requirements", ref.project if ref is not None else MAMBA.name)
    try:
        result = resolve_wheel(wheel, python=options.python)
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, str(exc), error_details(exc))
    details = {
        "target": result.target,
        "installs": list(result.installs),
        "missing": [asdict(m) for m in result.missing],
        **result.details,
    }
    return StepResult(name, Status(result.status), result.summary, details)


# ---- pair and install ------------------------------------------------------------------------


def pair_step(packages: Sequence[WheelUnderTest]) -> StepResult:
    """mamba-ssm and causal-conv1d belong together: versions, local labels, torch and CUDA."""
    found = {p.project: (p.version or "", p.provenance) for p in packages}
    if not found.get(MAMBA.name, ("", None))[0] or not found.get(CAUSAL_CONV1D.name, ("", None))[0]:
        return StepResult("pair", Status.SKIP, "versions unknown: pair compatibility not checked")
    problems = pair_problems(found[MAMBA.name], found[CAUSAL_CONV1D.name])
    names = f"mamba_ssm {found[MAMBA.name][0]} with causal_conv1d {found[CAUSAL_CONV1D.name][0]}"
    if problems:
        return StepResult(
            "pair", Status.FAIL, f"{names}: " + "; ".join(problems), {"problems": problems}
        )
    return StepResult("pair", Status.OK, f"{names}: compatible (versions, torch, CUDA)")


def install_step(
    options: VerifyOptions,
    scratch: Path,
    projects: Sequence[str] = (MAMBA.name,),
) -> tuple[StepResult, InstallEnv | None]:
    """Install every wheel into one throwaway venv (or use this env) and import the kernels."""
    known = [named for p in projects if (named := package_named(p)) is not None]
    modules = [package.extension for package in known] or [MAMBA.extension]
    try:
        wheels = [r.path for r in find_wheels(Path(options.wheel))] if options.wheel else []
        env = options.tools.prepare_env(wheels, options.python, scratch)
        found = options.tools.import_check(env, modules)
    except MambawinError as exc:
        return StepResult("install", Status.FAIL, str(exc), error_details(exc)), None
    where = "a throwaway venv" if env.venv else "the current environment"
    imported = ", ".join(f"{name} from {origin}" for name, origin in found["extensions"].items())
    summary = f"{imported} import in {where} (torch {found['torch']})"
    return StepResult("install", Status.OK, summary, found), env


def environment_check(
    options: VerifyOptions, install: StepResult, env: InstallEnv | None, projects: Sequence[str]
) -> EnvironmentCheck:
    """The requirements-conflict check (verify.conflicts), once for every step that imports
    upstream's Python; nothing to check before an install, and an environment it cannot read
    blocks nothing (the steps run as they would without it)."""
    if env is None or install.status is not Status.OK:
        return EnvironmentCheck()
    try:
        snapshot = options.tools.read_environment(env, list(projects), options.timeout)
    except MambawinError:
        return EnvironmentCheck()
    return check_environment(snapshot, projects)


def ops_step(
    options: VerifyOptions,
    install: StepResult,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    environment: EnvironmentCheck | None = None,
) -> StepResult | None:
    """A stable-ABI wheel's ops registered (schema, CUDA and Meta kernels) and upstream's public
    function traced by torch.compile(fullgraph=True); no GPU needed. None for torch-ABI wheels,
    whose pybind11 functions are no torch ops."""
    step = plan_ops(options, install, env, packages, environment)
    return None if step is None else run_planned(options, env, step)


def plan_ops(
    options: VerifyOptions,
    install: StepResult,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    environment: EnvironmentCheck | None = None,
) -> Step | None:
    """ops_step's runner, planned (verify.planned): None, a result known unrun, or the job."""
    stable = [p.project for p in packages if p.record.is_stable]
    if not stable:
        return None
    if env is None or install.status is not Status.OK:
        return StepResult("ops", Status.SKIP, "nothing installed to check: ops not checked")
    conflict = (environment or EnvironmentCheck()).failure("ops", stable)
    if conflict is not None:
        return conflict  # the trace imports upstream's Python, which this environment breaks

    def finish(report: dict[str, Any]) -> StepResult:
        summary = "; ".join(_ops_line(found) for found in report.get("packages", []))
        status = Status.OK if report.get("passed") else Status.FAIL
        return StepResult("ops", status, f"{summary} (torch {report.get('torch')})", report)

    return Planned(Job("ops", ("--json", *stable)), finish, failed("ops", "ops runner failed"))


def _ops_line(found: Mapping[str, Any]) -> str:
    """'selective_scan_cuda: bwd, fwd registered (CUDA, Meta); selective_scan_fn traced ...'"""
    if found.get("error"):
        return str(found["error"])
    names = ", ".join(op["name"].split("::", 1)[1] for op in found.get("ops", []))
    line = f"torch.ops.{found['namespace']}: {names or 'nothing'} registered"
    trace = found.get("trace")
    if trace:
        line += f"; {trace['api']} traced with fullgraph=True to {', '.join(trace['ops']) or '-'}"
    elif found.get("untraced"):
        line += f"; {found['untraced']}"
    problems = found.get("problems") or []
    return line + (f"; {'; '.join(problems)}" if problems else "")
