"""What verify reaches outside itself, passed in as one record: the target probe, the GPU-code
reader, the install sandbox, the runner, the upstream tests, the reader of what the install
environment holds and the wine loader. The real ones are the defaults; tests give fakes
(`replace(Tools(), run_module=...)`) instead of monkeypatching modules."""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin.errors import MambawinError
from mambawin.packages import (
    MAMBA,
    package_named,
)
from mambawin.verify import sandbox, upstream_tests, workers
from mambawin.verify.kernel_cache import KernelCache, open_cache
from mambawin.verify.report import Target
from mambawin.verify.sandbox import InstallEnv
from mambawin.verify.target import probe_target
from mambawin.verify.upstream_tests import TestRun
from mambawin.verify.wineload.step import load_step
from mambawin.verify.workers import Job, Lane, Outcome, RunModule
from mambawin.wheel import gpucode
from mambawin.wheel.gpucode import GpuCode, list_gpu_code
from mambawin.wheel.info import WheelInfo


def wheel_gpu_code(archive: zipfile.ZipFile, info: WheelInfo) -> tuple[GpuCode | None, str]:
    """The GPU code of the package's own extension in a wheel opened (and checked) once."""
    extension = (package_named(info.name) or MAMBA).extension
    try:
        found = gpucode.gpu_code_in_archive(archive, info)
    except MambawinError as exc:
        return None, f"GPU code unreadable: {exc}"
    members = [m for m in found if Path(m).name.startswith(extension)]
    if not members:
        hint = (
            " (on upstream main the kernels build only with MAMBA_KEEP_CUDA_BUILD=TRUE)"
            if extension == MAMBA.extension
            else ""
        )
        return None, f"the wheel has no compiled {extension} extension: rebuild it{hint}"
    return describe_code(found[members[0]], extension)


def binary_gpu_code(binary: Path, extension: str) -> tuple[GpuCode | None, str]:
    try:
        return describe_code(list_gpu_code(binary), extension)
    except MambawinError as exc:
        return None, f"GPU code unreadable: {exc}"


def describe_code(code: GpuCode, extension: str) -> tuple[GpuCode | None, str]:
    if not code.sass and not code.ptx:
        return None, f"{extension} holds no GPU code: rebuild with `mambawin build --arch ...`"
    listed = ", ".join([*code.sass, *code.ptx])
    return code, f"GPU code {listed} (read with {code.method})"


@dataclass(frozen=True)
class Tools:
    """The collaborators one verify run uses."""

    probe_target: Callable[[str], Target] = probe_target
    wheel_gpu_code: Callable[[zipfile.ZipFile, WheelInfo], tuple[GpuCode | None, str]] = (
        wheel_gpu_code
    )
    prepare_env: Callable[[Sequence[Path], str, Path], InstallEnv] = sandbox.prepare_env
    # What a child process printed as its last line: a JSON object, untyped until read.
    import_check: Callable[[InstallEnv, Sequence[str]], dict[str, Any]] = sandbox.import_check
    run_module: Callable[[InstallEnv, str, Sequence[str], float], dict[str, Any]] = (
        sandbox.run_module
    )
    # The GPU steps' runners in one child Python (verify.workers); the verify.workers.one_by_one
    # fallback, or a fake, runs each through run_module instead.
    run_worker: Callable[
        [InstallEnv, Sequence[Job], float, Callable[[Outcome], None], RunModule], Lane
    ] = workers.run_worker
    # This run's Triton/inductor cache folder (verify.kernel_cache), by wheels, torch and GPU.
    kernel_cache: Callable[[Mapping[str, str], Target], KernelCache] = open_cache
    run_upstream_tests: Callable[..., list[TestRun]] = upstream_tests.run_all  # keywords too
    read_environment: Callable[[InstallEnv, Sequence[str], float], dict[str, Any]] = (
        sandbox.read_environment
    )
    # A win_amd64 stable wheel under wine against torch's Windows DLLs (verify.wineload)
    wine_load: Callable[..., Any] = load_step
