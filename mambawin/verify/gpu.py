"""The steps that run kernels: smoke, conv, calls, blocks, compile, bench, upstream tests. Each
is planned first (`plan_*`: a result known without running, or the runner to run, verify.planned)
and run in a worker beside the others (verify.pipeline) or, through the `*_step` functions, in a
child process of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mambawin.errors import MambawinError
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.stage import Status
from mambawin.verify.conflicts import EnvironmentCheck
from mambawin.verify.options import VerifyOptions, skipped
from mambawin.verify.packages import WheelUnderTest
from mambawin.verify.planned import Planned, Step, error_details, failed, in_parts, run_planned
from mambawin.verify.report import StepResult, Target
from mambawin.verify.runners import parts
from mambawin.verify.runners.compile import summary_lines
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.upstream_tests import shard_count
from mambawin.verify.workers import Job

# ---- kernels on the GPU ----------------------------------------------------------------------


def plan_gpu(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    environment: EnvironmentCheck | None = None,
) -> list[Step]:
    """smoke (mamba-ssm), conv (causal-conv1d), calls, blocks and compile (mamba-ssm), in order;
    each a result already known (skip, conflict) or a runner to run. bench and upstream-tests
    are the caller's: bench waits for smoke's verdict, upstream-tests is no runner.

    A step that imports upstream's Python (conv, calls, blocks) fails naming the conflict when
    the environment breaks a requirement of a package it imports; smoke calls the compiled
    kernels alone and runs, its Mamba block part naming the conflict."""
    projects = [p.project for p in packages]
    blocker = gpu_blocker(target, fit, install)
    found = environment or EnvironmentCheck()
    steps: list[Step] = []
    if MAMBA.name in projects:
        block = found.failure("Mamba block", [MAMBA.name])
        smoke = plan_smoke(options, target, fit, install, env)
        steps.append(skipped("smoke", options) or _naming(smoke, block))
    if CAUSAL_CONV1D.name in projects:
        conv = found.failure("conv", [CAUSAL_CONV1D.name])
        steps.append(
            skipped("conv", options) or plan_conv(options, target, fit, install, env, conv)
        )
    calls = found.failure("calls")
    steps.append(skipped("calls", options) or plan_runner("calls", options, blocker, env, calls))
    if MAMBA.name in projects:
        blocks = found.failure("blocks")
        steps.append(
            skipped("blocks", options) or plan_runner("blocks", options, blocker, env, blocks)
        )
        compiled = found.failure("compile", [MAMBA.name])
        steps.append(
            skipped("compile", options) or plan_compile(options, blocker, env, packages, compiled)
        )
    return steps


def _naming(smoke: Step, conflict: StepResult | None) -> Step:
    """smoke's result names the environment conflict in its Mamba block part."""
    if isinstance(smoke, StepResult):
        return smoke
    finish = smoke.finish
    return replace(smoke, finish=lambda report: _name_block_conflict(finish(report), conflict))


def smoke_step(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
) -> StepResult:
    """The selective scan against the float64 reference, in the install env."""
    return run_planned(options, env, plan_smoke(options, target, fit, install, env))


def plan_smoke(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
) -> Step:
    return _plan_cases(
        "smoke", options.smoke_args, smoke_summary, options, target, fit, install, env
    )


def _plan_cases(
    name: str,
    extra: Sequence[str],
    summarize: Callable[[Mapping[str, Any]], str],
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
    conflict: StepResult | None = None,
) -> Step:
    """The runner `mambawin.verify.runners.<name>` for the install env, unless an earlier step
    rules it out or the environment breaks a requirement of what it imports (`conflict`: that
    failure, EnvironmentCheck.failure); its JSON report's `passed` decides the step."""
    reason = gpu_blocker(target, fit, install)
    if reason or env is None:
        return StepResult(name, Status.SKIP, reason or "install failed")
    if conflict is not None:
        return conflict
    args = ["--json", *(["--seed", str(options.seed)] if options.seed is not None else []), *extra]

    def finish(report: dict[str, Any]) -> StepResult:
        status = Status.OK if report["passed"] else Status.FAIL
        return StepResult(name, status, summarize(report), report)

    return Planned(Job(name, tuple(args)), finish, failed(name, f"{name} runner failed"))


def _name_block_conflict(smoke: StepResult, conflict: StepResult | None) -> StepResult:
    """smoke's kernel cases import only the compiled extension, so they run in a conflicting
    environment; its Mamba block imports mamba_ssm and was skipped with the raw ImportError:
    name the conflict there instead (runners.smoke.block_skip_reason: "import mamba_ssm failed")."""
    block = smoke.details.get("block") or {}
    if (
        conflict is None
        or block.get("status") != "skip"
        or "import mamba_ssm" not in str(block.get("reason"))
    ):
        return smoke
    details = {**smoke.details, "block": {**block, "reason": conflict.summary}, **conflict.details}
    return replace(smoke, summary=smoke_summary(details), details=details)


def gpu_blocker(target: Target, fit: StepResult, install: StepResult) -> str | None:
    if target.capability is None:
        return "no CUDA GPU visible: kernels not run (not verified on a GPU)"
    if fit.status is Status.FAIL:
        return "the wheel does not fit this GPU/torch (see fit): kernels not run"
    if install.status is not Status.OK:
        return "install failed: kernels not run"
    return None


def smoke_summary(report: Mapping[str, Any]) -> str:
    """'36 cases (seed 123): float32 max abs 1e-05 ...' plus the first failures."""
    parts = _case_lines(report, f"(seed {report.get('seed')})")
    block = report.get("block", {})
    parts.append(f"Mamba block {block.get('status')}: {block.get('reason')}")
    return "; ".join(parts)


def _case_lines(report: Mapping[str, Any], setup: str) -> list[str]:
    """A runner report's case count, per-dtype errors and first failure (with what it is known
    to be, when the runner knows), as summary parts."""
    cases = report.get("cases", [])
    parts = [f"{len(cases)} cases on {report.get('device')} {setup}"]
    for dtype, row in report.get("per_dtype", {}).items():
        parts.append(f"{dtype} max abs {row['max_abs']:.2g} rel {row['max_rel']:.2g}")
    failed = [c for c in cases if not c["passed"]]
    if failed:
        first = failed[0]
        why = first.get("error") or _worst_tensor(first)
        if first.get("note"):
            why += f" ({first['note']})"
        parts.insert(0, f"{len(failed)} of {len(cases)} cases failed, first {first['name']}: {why}")
    return parts


def _worst_tensor(case: Mapping[str, Any]) -> str:
    name, err = max(case["errors"].items(), key=lambda kv: kv[1]["ratio"])
    return f"{name} off by {err['max_abs']:.3g} ({err['ratio']:.3g}x tolerance)"


def conv_step(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
    conflict: StepResult | None = None,
) -> StepResult:
    """causal-conv1d's kernels against the float64 reference, in the install env (through
    upstream's causal_conv1d_fn, so an environment conflict fails it unrun)."""
    return run_planned(options, env, plan_conv(options, target, fit, install, env, conflict))


def plan_conv(
    options: VerifyOptions,
    target: Target,
    fit: StepResult,
    install: StepResult,
    env: InstallEnv | None,
    conflict: StepResult | None = None,
) -> Step:
    return _plan_cases(
        "conv", options.conv_args, conv_summary, options, target, fit, install, env, conflict
    )


def conv_summary(report: Mapping[str, Any]) -> str:
    """'45 cases on H100 (seed 1; modes plain, ...): float32 max abs ...' plus the first failure."""
    modes = ", ".join(report.get("modes", []))
    return "; ".join(_case_lines(report, f"(seed {report.get('seed')}; modes {modes}, update)"))


_RUNNER_ITEMS = {"calls": ("probes", "api"), "blocks": ("blocks", "block")}


def runner_step(
    name: str,
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    conflict: StepResult | None = None,
) -> StepResult:
    """The calls or blocks runner: ok / fail per item, skip when every item was skipped; the
    conflict's failure (EnvironmentCheck.failure) unrun when the environment breaks upstream."""
    return run_planned(options, env, plan_runner(name, options, blocker, env, conflict))


def plan_runner(
    name: str,
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    conflict: StepResult | None = None,
) -> Step:
    if blocker or env is None:
        return StepResult(name, Status.SKIP, blocker or "install failed")
    if conflict is not None:
        return conflict

    def finish(report: dict[str, Any]) -> StepResult:
        key, label = _RUNNER_ITEMS[name]
        items = report.get(key, [])
        summary = "; ".join(f"{i[label]} {i['status']}: {i['reason']}" for i in items)
        if not report.get("passed"):
            return StepResult(name, Status.FAIL, summary, report)
        status: Status = Status.OK if any(i["status"] == "ok" for i in items) else Status.SKIP
        return StepResult(name, status, summary or "nothing to run", report)

    fail = failed(name, f"{name} runner failed")
    job = Job(name, ("--json",))
    return in_parts(job, finish, fail, parts.BLOCKS if name == "blocks" else None)


# Why a torch-ABI mamba-ssm gets no compile step: nothing of it is a torch op.
TORCH_ABI_COMPILE = (
    "torch-ABI wheel: upstream's calls into its pybind11 module break torch.compile's graph at "
    "every call (docs/stable-abi.md); build with --abi stable for whole-block graphs"
)


def compile_step(
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    conflict: StepResult | None = None,
) -> StepResult:
    """Mamba and Mamba2 blocks through torch.compile(fullgraph=True), forward and backward, against
    eager: graph breaks, largest error, compiled/eager time (stable-ABI mamba-ssm only).

    conflict: the environment breaks mamba-ssm's requirements; reported instead of running."""
    return run_planned(options, env, plan_compile(options, blocker, env, packages, conflict))


def plan_compile(
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    conflict: StepResult | None = None,
) -> Step:
    if blocker or env is None:
        return StepResult("compile", Status.SKIP, blocker or "install failed")
    if not any(p.project == MAMBA.name and p.record.is_stable for p in packages):
        return StepResult("compile", Status.SKIP, TORCH_ABI_COMPILE)
    if conflict is not None:
        return conflict

    def finish(report: dict[str, Any]) -> StepResult:
        # The compiled/eager times are informational (the verdict is graph breaks and errors);
        # with steps overlapping they are taken while other work may use the GPU.
        summary = "; ".join(summary_lines(report)) or "nothing compiled"
        status = Status.OK if report.get("passed") else Status.FAIL
        return StepResult("compile", status, f"{summary} (torch {report.get('torch')})", report)

    fail = failed("compile", "compile runner failed")
    return in_parts(Job("compile", ("--json",)), finish, fail, parts.COMPILE)


def upstream_tests_step(
    options: VerifyOptions,
    blocker: str | None,
    env: InstallEnv | None,
    packages: Sequence[WheelUnderTest],
    scratch: Path,
    conflict: StepResult | None = None,
    together: bool = False,
) -> StepResult:
    """The packages' own upstream tests against the installed wheels (pytest, junit XML);
    together: each package's file in its own pytest processes (shard_count) at the same time."""
    if blocker or env is None:
        return StepResult("upstream-tests", Status.SKIP, blocker or "install failed")
    if conflict is not None:
        return conflict
    try:
        runs = options.tools.run_upstream_tests(
            env,
            packages,
            scratch / "upstream-tests",
            keyword=options.test_keyword,
            timeout=options.timeout,
            together=together,
            shards=shard_count() if together else 1,
        )
    except MambawinError as exc:
        return StepResult("upstream-tests", Status.FAIL, str(exc), error_details(exc))
    details = {run.project: run.to_json() for run in runs}
    summary = "; ".join(
        run.summary() + (f" ({run.note})" if run.note and run.selected else "") for run in runs
    )
    status = (
        Status.FAIL
        if not all(r.ok for r in runs)
        else Status.SKIP
        if all(r.selected == 0 for r in runs)
        # a package whose sdist carries no tests ran none: a pass of the others, marked
        else Status.WARN
        if any(r.not_carried for r in runs)
        else Status.OK
    )
    return StepResult("upstream-tests", status, summary, details)
