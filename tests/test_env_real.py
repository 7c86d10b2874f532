"""Doctor against this machine's real toolchain (nvcc, gcc, torch); skipped where nvcc is absent."""

from __future__ import annotations

import importlib.metadata
import shutil
import sys
import time

import pytest
from packaging.version import Version

from mambawin.archs import parse_archs
from mambawin.doctor.checks import run_checks
from mambawin.stage import Status

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None or sys.platform == "win32",
    reason="needs a real nvcc on PATH (Linux)",
)


def test_real_toolchain_is_found_quickly() -> None:
    start = time.monotonic()
    report = run_checks(parse_archs("86;89"))
    elapsed = time.monotonic() - start
    checks = {c.name: c for c in report.checks}
    assert checks["nvcc"].status is Status.OK and report.toolchain.cuda_version
    assert report.toolchain.cuda_home and report.toolchain.nvcc
    assert checks["nvcc archs"].status is Status.OK  # every nvcc since 11.8 compiles 86 and 89
    assert checks["host compiler"].status is Status.OK and report.toolchain.host_compiler == "gcc"
    assert elapsed < 5, f"doctor took {elapsed:.1f}s"


def test_real_torch_facts_match_its_metadata() -> None:
    try:
        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("torch is not installed")
    report = run_checks()
    # torch/version.py carries the local tag (+cu132) that PyPI metadata lacks.
    assert Version(report.toolchain.torch_version or "0").release == Version(installed).release
    assert report.toolchain.torch_cxx_std in ("c++17", "c++20")


def test_real_nvcc13_rejects_sm_53() -> None:
    report = run_checks(parse_archs("53"))
    if not (report.toolchain.cuda_version or "").startswith("13."):
        pytest.skip("needs CUDA 13")
    arch = next(c for c in report.checks if c.name == "nvcc archs")
    assert arch.status is Status.FAIL and not report.ready
