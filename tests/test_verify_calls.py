"""The kernel-call proof: a wheel whose Python routes around its CUDA extension fails verify."""

from __future__ import annotations

import importlib
import sys

import pytest

from mambawin.verify.runners import calls
from tests.fakes.kernels import forget_packages, install_fakes

torch = pytest.importorskip("torch")


@pytest.fixture
def fakes(monkeypatch):
    found = install_fakes(monkeypatch)
    yield found
    forget_packages()


def test_every_api_reaches_its_kernels(fakes):
    report = calls.run_calls("cpu")
    assert report["passed"], report
    by_api = {p["api"]: p for p in report["probes"]}
    assert set(by_api) == {
        "selective_scan_fn",
        "mamba_inner_fn",
        "causal_conv1d_fn",
        "causal_conv1d_update",
    }
    assert all(p["status"] == "ok" for p in by_api.values())
    inner = by_api["mamba_inner_fn"]["counts"]
    assert inner["selective_scan_cuda.fwd"] >= 1 and inner["causal_conv1d_cuda.causal_conv1d_bwd"]


@pytest.mark.parametrize(
    ("module", "api", "kernel"),
    [
        ("mamba_ssm.ops.selective_scan_interface", "selective_scan_fn", "selective_scan_cuda.fwd"),
        ("causal_conv1d", "causal_conv1d_fn", "causal_conv1d_cuda.causal_conv1d_fwd"),
    ],
)
def test_a_package_routed_to_the_reference_fails(fakes, module, api, kernel):
    importlib.import_module(module).ROUTE_TO_REFERENCE = True
    report = calls.run_calls("cpu", [api])
    assert not report["passed"]
    probe = report["probes"][0]
    assert probe["status"] == "fail"
    assert f"ran without calling {kernel}" in probe["reason"]


def test_the_wrappers_are_removed_afterwards(fakes):
    original = fakes["selective_scan_cuda"].fwd
    calls.run_calls("cpu", ["selective_scan_fn"])
    assert fakes["selective_scan_cuda"].fwd is original


def test_missing_extension_is_a_skip_with_a_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "causal_conv1d_cuda", None)
    probe = calls.run_probe(calls.PROBES[2], "cpu")
    assert probe["status"] == "skip" and "causal_conv1d_cuda is not installed" in probe["reason"]


def test_a_stable_shims_cached_overload_is_counted_once_per_call():
    # The stable shim's functions call the op's overload it cached (`_FWD`), not the module's
    # `causal_conv1d_fwd`: the H100 run of the stable pair failed conv and calls with "never
    # called" until those names were counted too.
    import types

    class Overload:
        _schema = types.SimpleNamespace(name="fake_conv_cuda::causal_conv1d_fwd")

        def __call__(self, x):
            return x

    shim = types.ModuleType("fake_conv_cuda")
    exec(
        "def causal_conv1d_fwd(x):\n    return _FWD(x)\n"
        "def causal_conv1d_fwd_function(x):\n    return _FWD(x)\n",
        shim.__dict__,
    )
    shim._FWD = Overload()
    sys.modules["fake_conv_cuda"] = shim
    try:
        with calls.counting([("fake_conv_cuda", "causal_conv1d_fwd")]) as counts:
            shim.causal_conv1d_fwd_function(1)
            shim.causal_conv1d_fwd(2)
        assert counts["fake_conv_cuda.causal_conv1d_fwd"] == 2
        assert isinstance(shim._FWD, Overload)  # restored
    finally:
        del sys.modules["fake_conv_cuda"]
