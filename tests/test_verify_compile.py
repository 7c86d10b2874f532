"""verify's compile step: Mamba and Mamba2 blocks through torch.compile(fullgraph=True) on a
stable pair. The runner needs the GPU (tests/test_compile_gpu.py); here its report is recorded
and the step's decisions and the runner's verdicts are checked offline."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mambawin.errors import CommandError
from mambawin.verify import gpu, sandbox
from mambawin.verify.options import VerifyOptions, skipped
from mambawin.verify.packages import WheelUnderTest
from mambawin.verify.runners import compile as runner
from mambawin.verify.runners import graphs
from mambawin.verify.tools import Tools
from mambawin.wheel.provenance import Provenance

ENV = sandbox.InstallEnv(sys.executable, None)
STABLE = Provenance(abi="stable", torch_floor="2.10")
PAIR = [
    WheelUnderTest("mamba-ssm", "2.3.0", STABLE),
    WheelUnderTest("causal-conv1d", "1.6.0", STABLE),
]
WITHIN = {"max_abs": 0.01, "max_rel": 0.01, "ratio": 0.2}


def _row(model: str, passed: bool = True, **extra: object) -> dict:
    reason = "1 graph, 0 breaks; largest error out 0.01" if passed else "2 graphs, 1 breaks: x"
    return {
        "model": model,
        "dtype": "bfloat16",
        "passed": passed,
        "reason": reason,
        "graphs": 1 if passed else 2,
        "breaks": 0 if passed else 1,
        "reasons": [] if passed else ["Unsupported method call at ssd_combined.py:857"],
        "errors": {"out": WITHIN},
        "eager_ms": 2.0,
        "compiled_ms": 1.5,
        **extra,
    }


def _report(*rows: dict) -> dict:
    return {"passed": all(r["passed"] for r in rows), "torch": "2.11.0+cu130", "rows": list(rows)}


def _options(run_module) -> VerifyOptions:
    return VerifyOptions(wheel=Path("wheels"), tools=Tools(run_module=run_module))


def test_a_stable_pair_runs_the_compile_runner_and_reports_each_block():
    asked = []

    def run_module(env, module, args, timeout):
        asked.append((module, args))
        return _report(_row("Mamba"), _row("Mamba2"))

    step = gpu.compile_step(_options(run_module), None, ENV, PAIR)
    assert asked == [("mambawin.verify.runners.compile", ["--json"])]
    assert step.status == "ok"
    assert step.summary == (
        "Mamba bfloat16 ok: 1 graph, 0 breaks; largest error out 0.01; compiled/eager 0.75; "
        "Mamba2 bfloat16 ok: 1 graph, 0 breaks; largest error out 0.01; compiled/eager 0.75 "
        "(torch 2.11.0+cu130)"
    )


def test_a_graph_break_fails_the_step_and_names_where():
    report = _report(_row("Mamba"), _row("Mamba2", passed=False))
    step = gpu.compile_step(_options(lambda *a: report), None, ENV, PAIR)
    assert step.status == "fail" and step.details == report
    assert "explain: 2 graphs, 1 breaks: Unsupported method call at ssd_combined.py:857" in (
        step.summary
    )


def test_torch_abi_wheels_are_skipped_with_the_reason_and_never_run():
    def run_module(*args):
        raise AssertionError("a torch-ABI pair's pybind11 calls break every graph")

    packages = [
        WheelUnderTest("mamba-ssm", "2.3.0", Provenance(abi="torch")),
        WheelUnderTest("causal-conv1d", "1.6.0", STABLE),
    ]
    step = gpu.compile_step(_options(run_module), None, ENV, packages)
    assert step.status == "skip" and step.summary == gpu.TORCH_ABI_COMPILE


def test_no_gpu_or_no_install_skips_with_the_blocker():
    step = gpu.compile_step(_options(lambda *a: _report()), "no CUDA GPU visible", ENV, PAIR)
    assert (step.status, step.summary) == ("skip", "no CUDA GPU visible")
    assert gpu.compile_step(_options(lambda *a: _report()), None, None, PAIR).status == "skip"


def test_a_runner_that_crashed_fails_the_step_with_its_output():
    def run_module(*args):
        raise CommandError("exit -11", argv=["python"], returncode=-11, tail="Segmentation fault")

    step = gpu.compile_step(_options(run_module), None, ENV, PAIR)
    assert step.status == "fail" and step.summary == "compile runner failed: exit -11"
    assert step.details["tail"] == "Segmentation fault"


def test_compile_can_be_left_out():
    options = VerifyOptions(wheel=Path("w.whl"), skip=frozenset({"compile"}))
    result = skipped("compile", options)
    assert result is not None and result.summary == "left out (--skip compile)"


# ---- the runner's verdicts (pure: no torch) -----------------------------------------------------


def test_a_break_fails_even_when_the_numbers_match():
    breaks = {"graphs": 2, "breaks": 1, "reasons": ["out= tensor at cpp_functions.py:104"]}
    assert graphs.verdict(breaks, {"out": WITHIN}) == (
        False,
        "2 graphs, 1 breaks: out= tensor at cpp_functions.py:104",
    )


def test_an_error_over_tolerance_fails_naming_the_tensor():
    whole = {"graphs": 1, "breaks": 0, "reasons": []}
    off = {"max_abs": 0.5, "max_rel": 0.9, "ratio": 3.0}
    assert graphs.verdict(whole, {"out": WITHIN, "dx": off}) == (
        False,
        "dx off by 0.5 (3x tolerance)",
    )
    assert graphs.verdict(whole, {"out": WITHIN}) == (
        True,
        f"1 graph, 0 breaks; largest error out 0.01 ({WITHIN['ratio']:.2g}x tolerance)",
    )


def test_a_wrapped_backend_error_names_its_cause():
    # inductor wraps the real error: "backend='inductor' raised:\nRuntimeError: ..." (H100,
    # issue 26: the first line alone told nothing).
    try:
        try:
            raise RuntimeError("Found a custom (non-ATen) operator whose output has alias")
        except RuntimeError as inner:
            raise ValueError("backend='inductor' raised:\n" + f"RuntimeError: {inner}") from inner
    except ValueError as exc:
        assert runner.failure(exc) == (
            "ValueError: backend='inductor' raised: RuntimeError: Found a custom (non-ATen) "
            "operator whose output has alias"
        )


def test_a_dynamo_error_is_one_line_naming_the_users_line():
    message = (
        "Attempted to call op with non-contiguous `out=` tensor\n  Explanation: ...\n\n"
        "from user code:\n"
        '   File "/site/mamba_ssm/ops/selective_scan_interface.py", line 211, in forward\n'
        "    conv1d_out = causal_conv1d_fwd_function(\n"
        '  File "/site/causal_conv1d/cpp_functions.py", line 104, in causal_conv1d_fwd_function\n'
        "    _causal_conv1d_fwd_cpp(\n"
    )
    assert runner.failure(RuntimeError(message)) == (
        "RuntimeError: Attempted to call op with non-contiguous `out=` tensor "
        "(at /site/causal_conv1d/cpp_functions.py:104 in causal_conv1d_fwd_function)"
    )
    assert runner.failure(ValueError("plain\nsecond")) == "ValueError: plain"


def test_only_a_known_upstream_line_makes_a_broken_graph_a_limit():
    at_upstream = (
        "Unsupported: Unsupported method call (at /site/mamba_ssm/ops/triton/"
        "ssd_state_passing.py:278 in _state_passing_bwd)"
    )
    limit = graphs.upstream_limit(at_upstream, patched=False)
    assert limit is not None and limit.startswith("upstream's ssd_state_passing.py")
    assert "best_config" in limit
    elsewhere = "Unsupported: out= tensor (at /site/causal_conv1d/cpp_functions.py:104 in f)"
    assert graphs.upstream_limit(elsewhere, patched=False) is None


def test_a_wheel_with_ssd_custom_ops_gets_no_limit_at_that_line():
    # Its chunked scan is a custom op: Mamba2 must be one graph, a break there is the wheel's.
    at_upstream = (
        "Unsupported: Unsupported method call (at /site/mamba_ssm/ops/triton/"
        "ssd_state_passing.py:278 in _state_passing_bwd)"
    )
    assert graphs.upstream_limit(at_upstream, patched=True) is None


def test_no_mamba_ssm_means_no_ssd_custom_ops():
    pytest.importorskip("torch")
    assert not graphs.ssd_custom_ops_installed()


def test_a_limited_row_passes_on_its_numbers_and_says_how_far_the_graph_goes():
    limited = {"graphs": 3, "breaks": 2, "reasons": ["r"], "limit": "upstream's x.py (f) why"}
    times = {"eager_ms": 2.0, "compiled_ms": 1.9}
    row = runner._row(limited, {"out": WITHIN}, times)
    assert row["passed"] and row["reason"] == (
        "upstream's x.py (f) why; without fullgraph 3 graphs; largest error out 0.01 "
        "(0.2x tolerance)"
    )
    off = {"max_abs": 0.5, "max_rel": 0.9, "ratio": 3.0}
    assert not runner._row(limited, {"out": off}, times)["passed"]
