"""The blocks runner: Mamba's fast path against its reference path, on CPU with stand-ins."""

from __future__ import annotations

import importlib

import pytest

from mambawin.verify.runners import blocks
from tests.fakes.kernels import forget_packages, install_fakes


@pytest.fixture
def fakes(monkeypatch):
    pytest.importorskip("torch")
    found = install_fakes(monkeypatch)
    yield found
    forget_packages()


def _run(dtypes=("float32",), **kw):
    return blocks.run_blocks(dtypes, "cpu", seed=1, seqlen=9, **kw)


def test_mamba_fast_path_matches_the_reference_and_reports_errors_per_dtype(fakes):
    report = _run(("float32", "bfloat16"), names=["Mamba"])
    assert report["passed"], report
    mamba = report["blocks"][0]
    assert mamba["status"] == "ok" and mamba["fast_path"] == "mamba_inner_fn (fused)"
    for dtype in ("float32", "bfloat16"):
        row = mamba["per_dtype"][dtype]
        assert {"out", "dx"} <= set(row["errors"]) and row["calls"]["selective_scan_cuda.fwd"]
    assert mamba["per_dtype"]["float32"]["errors"]["out"]["max_abs"] < 1e-4


def test_a_wrong_kernel_fails_the_block(fakes):
    fakes["selective_scan_cuda"].BROKEN = "D"
    mamba = _run(names=["Mamba"])["blocks"][0]
    assert mamba["status"] == "fail" and "off by" in mamba["reason"]


def test_a_block_that_bypasses_the_kernel_fails(fakes):
    importlib.import_module("mamba_ssm.ops.selective_scan_interface").ROUTE_TO_REFERENCE = True
    mamba = _run(names=["Mamba"])["blocks"][0]
    assert mamba["status"] == "fail"
    assert "never called selective_scan_cuda.fwd" in mamba["reason"]


def test_the_reference_swap_is_undone(fakes):
    _run(names=["Mamba"])
    module = importlib.import_module("mamba_ssm.modules.mamba_simple")
    assert module.causal_conv1d_fn is not None
    assert module.selective_scan_fn.__module__ == "mamba_ssm.ops.selective_scan_interface"
    assert module.selective_scan_fn.__name__ == "selective_scan_fn"


def test_mamba2_without_triton_is_skipped_with_the_fix(fakes):
    mamba2 = _run(names=["Mamba2"])["blocks"][0]
    assert mamba2["status"] == "skip" and "triton-windows" in mamba2["reason"]


def test_an_import_that_needs_something_else_fails(fakes, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mamba_ssm.modules.mamba_simple", None)  # ImportError
    mamba = _run(names=["Mamba"])["blocks"][0]
    assert mamba["status"] == "skip" and "this mamba_ssm has no Mamba" in mamba["reason"]
    broken = blocks._import_failure(
        blocks.BLOCKS[0], ModuleNotFoundError("No module named 'tilelang'", name="tilelang")
    )
    assert broken["status"] == "fail" and "tilelang" in broken["reason"]
