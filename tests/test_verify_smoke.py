"""The smoke runner: argument handling, case planning, and a CPU run against a stand-in kernel."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mambawin.verify.runners import smoke

FAKE = Path(__file__).parent / "fixtures" / "verify" / "fake_selective_scan_cuda.py"


def test_defaults_cover_every_dtype_and_length():
    config = smoke.parse_args(["--seed", "7"])
    assert config.seed == 7 and config.device == "cuda" and not config.json_output
    cases = smoke.plan_cases(config)
    assert {c.dtype for c in cases} == {"float32", "float16", "bfloat16"}
    assert {c.seqlen for c in cases} == {1, 7, 127, 255, 2049, 4096}
    assert all(c.seqlen % 2048 for c in cases if c.seqlen not in (4096,))
    # every variant meets every dtype, so each option is checked in each precision
    for dtype in smoke.DTYPES:
        assert {c.variant for c in cases if c.dtype == dtype} == set(smoke.VARIANTS)


def test_each_option_is_on_and_off_somewhere():
    for attr in ("var_B", "var_C", "has_D", "has_z", "has_bias", "softplus"):
        assert {getattr(v, attr) for v in smoke.VARIANTS} == {True, False}
    assert any(v.groups > 1 for v in smoke.VARIANTS)


def test_fresh_seed_without_flag():
    seeds = {smoke.parse_args([]).seed for _ in range(5)}
    assert len(seeds) > 1


@pytest.mark.parametrize(
    "argv",
    [["--dtypes", "float64"], ["--seqlens", "0"], ["--seqlens", "a,b"], ["--per-length", "0"]],
)
def test_bad_arguments_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        smoke.parse_args(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_parse_subset():
    config = smoke.parse_args(
        [
            "--dtypes",
            "bfloat16",
            "--seqlens",
            "3,4097",
            "--per-length",
            "1",
            "--no-block",
            "--device",
            "cpu",
            "--json",
        ]
    )
    assert config.dtypes == ("bfloat16",) and config.seqlens == (3, 4097)
    assert not config.block and config.json_output
    assert len(smoke.plan_cases(config)) == 2


def test_tolerances_per_output():
    case = smoke.Case("bfloat16", 7, smoke.VARIANTS[1])
    assert smoke.tolerance("out", case) == smoke.TOLERANCES["bfloat16"]
    assert smoke.tolerance("ddelta", case) == (5 * 3e-2, 10 * 5e-2)
    assert smoke.tolerance("dD", case) == smoke.WEIGHT_TOLERANCE


def _fake(broken: str = ""):
    spec = importlib.util.spec_from_file_location(f"fake_ssc_{broken or 'ok'}", FAKE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.BROKEN = broken
    return module


def _config():
    return smoke.SmokeConfig(seed=11, seqlens=(1, 7, 40), per_length=2, block=False, device="cpu")


def test_run_smoke_passes_a_correct_kernel():
    pytest.importorskip("torch")
    report = smoke.run_smoke(_config(), _fake())
    assert report["passed"], [c for c in report["cases"] if not c["passed"]][:1]
    assert report["seed"] == 11
    assert set(report["per_dtype"]) == {"float32", "float16", "bfloat16"}
    assert report["tolerances"]["float32"] == {"rtol": 6e-4, "atol": 2e-3}
    names = set().union(*(c["errors"] for c in report["cases"]))
    assert {
        "out",
        "last_state",
        "du",
        "ddelta",
        "dA",
        "dB",
        "dC",
        "dD",
        "dz",
        "ddelta_bias",
    } <= names


@pytest.mark.parametrize(
    ("broken", "tensor"), [("D", "out"), ("softplus", "out"), ("state", "last_state")]
)
def test_run_smoke_catches_a_wrong_kernel(broken, tensor):
    pytest.importorskip("torch")
    report = smoke.run_smoke(_config(), _fake(broken))
    assert not report["passed"]
    failed = [c for c in report["cases"] if not c["passed"]]
    assert any(c["errors"][tensor]["ratio"] > 1 for c in failed)


def test_kernel_exception_is_a_failed_case_not_a_crash():
    pytest.importorskip("torch")

    class Crashing:
        def fwd(self, *args):
            raise RuntimeError("CUDA error: no kernel image is available for execution")

    config = smoke.SmokeConfig(
        seed=1, dtypes=("float32",), seqlens=(3,), per_length=1, block=False, device="cpu"
    )
    report = smoke.run_smoke(config, Crashing())
    assert not report["passed"]
    assert "no kernel image" in report["cases"][0]["error"]


def test_block_test_says_why_it_skipped(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mamba_ssm", None)  # makes `import mamba_ssm` fail
    result = smoke.block_test("cpu", 0)
    assert result["status"] == "skip" and "import mamba_ssm failed" in result["reason"]


def test_block_skip_blames_triton_only_when_triton_is_missing() -> None:
    from mambawin.verify.runners.smoke import block_skip_reason

    missing = ModuleNotFoundError("No module named 'triton'", name="triton")
    assert "triton-windows" in block_skip_reason(missing)
    other = ImportError(
        "cannot import name 'GreedySearchDecoderOnlyOutput'", name="transformers.generation"
    )
    reason = block_skip_reason(other)
    assert "GreedySearchDecoderOnlyOutput" in reason and "triton" not in reason
