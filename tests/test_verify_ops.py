"""verify's ops step: a stable-ABI wheel's ops registered and upstream's function traced, no GPU.

The runner itself needs a CUDA torch and the real wheels: `MAMBAWIN_TEST_STABLE_WHEELS=<folder of
stable wheels> pytest tests/test_verify_ops.py` runs `mambawin verify` on them with this
interpreter's torch (docs/stable-abi.md lists the torch and Python versions it ran under). The
rest runs offline, with the runner's report recorded.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import CommandError
from mambawin.verify import sandbox, steps
from mambawin.verify.options import VerifyOptions
from mambawin.verify.packages import WheelUnderTest
from mambawin.verify.report import StepResult
from mambawin.verify.runners import ops
from mambawin.verify.tools import Tools
from mambawin.wheel.provenance import Provenance

INSTALLED = StepResult("install", "ok", "imported")
ENV = sandbox.InstallEnv(sys.executable, None)
STABLE = Provenance(abi="stable", torch_floor="2.10")
PAIR = [
    WheelUnderTest("mamba-ssm", "2.3.2.post1", STABLE),
    WheelUnderTest("causal-conv1d", "1.6.1", STABLE),
]
FWD = ops.Op(
    "selective_scan_cuda::fwd", "selective_scan_cuda::fwd(Tensor u) -> Tensor[]", ("CUDA", "Meta")
)
BWD = ops.Op(
    "selective_scan_cuda::bwd", "selective_scan_cuda::bwd(Tensor u) -> Tensor[]", ("CUDA",)
)
TRACED = {
    "api": "selective_scan_fn",
    "shape": [2, 64, 128],
    "graphs": 1,
    "ops": ["selective_scan_cuda.fwd"],
}


def _report(*packages: dict) -> dict:
    return {
        "passed": all(p["passed"] for p in packages),
        "torch": "2.15.0+cu132",
        "packages": list(packages),
    }


def _scan(passed: bool = True, problems: tuple[str, ...] = ()) -> dict:
    return {
        "project": "mamba-ssm",
        "namespace": "selective_scan_cuda",
        "ops": [{"name": "selective_scan_cuda::bwd"}, {"name": "selective_scan_cuda::fwd"}],
        "trace": TRACED,
        "passed": passed,
        "problems": list(problems),
    }


def _options(run_module) -> VerifyOptions:
    return VerifyOptions(wheel=Path("wheels"), tools=Tools(run_module=run_module))


def test_the_runner_is_asked_for_the_stable_packages_only():
    asked = []

    def run_module(env, module, args, timeout):
        asked.append((module, args))
        return _report(_scan())

    packages = [
        WheelUnderTest("mamba-ssm", "2.3.2", STABLE),
        WheelUnderTest("causal-conv1d", "1.6.1", Provenance(abi="torch")),
    ]
    step = steps.ops_step(_options(run_module), INSTALLED, ENV, packages)
    assert asked == [("mambawin.verify.runners.ops", ["--json", "mamba-ssm"])]
    assert step is not None and step.status == "ok", step
    assert step.summary == (
        "torch.ops.selective_scan_cuda: bwd, fwd registered; selective_scan_fn traced with "
        "fullgraph=True to selective_scan_cuda.fwd (torch 2.15.0+cu132)"
    )


def test_torch_abi_wheels_get_no_ops_step():
    def run_module(*args):
        raise AssertionError("a torch-ABI wheel's pybind11 functions are no torch ops")

    packages = [
        WheelUnderTest("mamba-ssm", "2.2.6", Provenance(abi="torch")),
        WheelUnderTest("causal-conv1d", "1.5.0", None),
    ]
    assert steps.ops_step(_options(run_module), INSTALLED, ENV, packages) is None


def test_a_failed_install_skips_the_ops_step():
    failed = StepResult("install", "fail", "pip could not install")
    step = steps.ops_step(_options(lambda *a: _report()), failed, None, PAIR)
    assert step is not None and step.status == "skip" and "nothing installed" in step.summary


def test_a_problem_the_runner_found_fails_the_step_and_is_named():
    problem = "selective_scan_cuda::bwd has no Meta kernel"
    report = _report(_scan(passed=False, problems=(problem,)))
    step = steps.ops_step(_options(lambda *a: report), INSTALLED, ENV, PAIR[:1])
    assert step is not None and step.status == "fail"
    assert step.summary.endswith(f"; {problem} (torch 2.15.0+cu132)")
    assert step.details == report


def test_an_import_error_is_the_summary():
    failed = {
        "project": "causal-conv1d",
        "namespace": "causal_conv1d_cuda",
        "passed": False,
        "error": "import causal_conv1d_cuda: ImportError('cannot load')",
    }
    step = steps.ops_step(_options(lambda *a: _report(failed)), INSTALLED, ENV, PAIR[1:])
    assert step is not None and step.status == "fail"
    assert step.summary.startswith("import causal_conv1d_cuda: ImportError('cannot load')")


def test_a_runner_that_crashed_fails_the_step_with_its_output():
    def run_module(*args):
        raise CommandError("exit -11", argv=["python"], returncode=-11, tail="Segmentation fault")

    step = steps.ops_step(_options(run_module), INSTALLED, ENV, PAIR)
    assert step is not None and step.status == "fail"
    assert step.summary == "ops runner failed: exit -11"
    assert step.details["tail"] == "Segmentation fault"


# ---- what the runner counts as a problem (pure: no torch needed) ------------------------------


def test_complete_ops_and_a_graph_through_them_are_no_problem():
    assert ops.problems("mamba-ssm", [FWD], TRACED, None) == []


def test_an_op_without_a_fake_is_named_with_the_missing_kernel():
    assert ops.problems("mamba-ssm", [FWD, BWD], TRACED, None) == [
        "selective_scan_cuda::bwd has no Meta kernel"
    ]


def test_no_op_a_broken_trace_and_a_python_fallback_are_each_named():
    broken = ops.problems("causal-conv1d", [], None, "Unsupported('graph break')")
    assert broken == [
        "no op registered under torch.ops.causal_conv1d_cuda",
        "torch.compile(fullgraph=True) of causal_conv1d_fn failed: Unsupported('graph break')",
    ]
    fallback = ops.problems("mamba-ssm", [FWD], {**TRACED, "ops": []}, None)
    assert fallback == ["selective_scan_fn's graph calls no compiled op: a Python fallback ran"]


def test_ops_can_be_left_out_and_unknown_steps_are_refused():
    result = CliRunner().invoke(app, ["verify", "nowhere.whl", "--skip", "opz", "--json"])
    assert result.exit_code != 0
    assert "--skip: unknown step 'opz'" in json.loads(result.stdout)["error"]
    assert "ops" in result.stdout


# ---- the real wheels, under this interpreter's torch ------------------------------------------

WHEELS = os.environ.get("MAMBAWIN_TEST_STABLE_WHEELS")


@pytest.mark.skipif(
    not WHEELS, reason="set MAMBAWIN_TEST_STABLE_WHEELS to a folder of stable wheels"
)
def test_real_stable_wheels_register_and_trace_under_this_torch():
    pytest.importorskip("torch")
    result = CliRunner().invoke(app, ["verify", str(WHEELS), "--skip", "requirements", "--json"])
    report = json.loads(result.stdout)
    step = next(s for s in report["steps"] if s["name"] == "ops")
    assert step["status"] == "ok", step["summary"]
    for package in step["details"]["packages"]:
        assert package["ops"] and all(
            set(op["kernels"]) == {"CUDA", "Meta"} for op in package["ops"]
        )
        assert package["trace"]["ops"], package
    assert result.exit_code == 0, result.stdout


def test_a_missing_upstream_requirement_is_said_with_the_fix_and_does_not_fail():
    untraced = {**_scan(), "trace": None}
    untraced["untraced"] = (
        "selective_scan_fn not traced: einops is not installed (install the wheels with their "
        "requirements: pip install WHEEL)"
    )
    step = steps.ops_step(_options(lambda *a: _report(untraced)), INSTALLED, ENV, PAIR[:1])
    assert step is not None and step.status == "ok"
    assert (
        "bwd, fwd registered; selective_scan_fn not traced: einops is not installed" in step.summary
    )
