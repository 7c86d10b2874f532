"""The causal-conv1d runner: its float64 reference, case planning, and a CPU run against the
stand-in package and kernel (tests/fixtures/verify)."""

from __future__ import annotations

import importlib

import pytest

from mambawin.verify.runners import conv, conv_cases
from tests.fakes.kernels import forget_packages, install_fakes


@pytest.fixture
def fake(monkeypatch):
    pytest.importorskip("torch")
    found = install_fakes(monkeypatch)
    yield importlib.import_module("causal_conv1d"), found["causal_conv1d_cuda"]
    forget_packages()


def _config(**kw):
    base = {"seed": 3, "seqlens": (1, 5, 40), "device": "cpu"}
    return conv_cases.ConvConfig(**{**base, **kw})


def test_plan_meets_every_mode_with_every_bias_silu_pair():
    cases = conv_cases.plan_cases(conv_cases.ConvConfig(seed=0), conv_cases.MODES)
    for mode in conv_cases.MODES:
        pairs = {(c.bias, c.silu) for c in cases if c.mode == mode}
        assert len(pairs) == 4, mode
    assert {c.dtype for c in cases} == set(conv.DTYPES)
    updates = [c for c in cases if c.mode == "update"]
    assert {c.seqlen for c in updates} == {1, 4} and len({(c.bias, c.silu) for c in updates}) == 4


def test_features_follow_the_signature():
    def old(x, weight, bias=None, activation=None):
        return x

    def new(
        x,
        weight,
        bias=None,
        seq_idx=None,
        initial_states=None,
        return_final_states=False,
        final_states_out=None,
        activation=None,
    ):
        return x

    assert conv_cases.features(old) == ("plain", "channel_last")
    assert conv_cases.features(new) == conv_cases.MODES


def test_reference_matches_a_hand_computed_convolution():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[[1.0, 2.0, 3.0, 4.0]]])
    weight = torch.tensor([[0.5, -1.0, 2.0]])  # weight[-1] multiplies the current step
    out, final = conv_cases.conv_ref(x, weight, torch.tensor([1.0]))
    assert out.squeeze().tolist() == [3.0, 4.0, 5.5, 7.0]
    assert final.squeeze().tolist() == [3.0, 4.0]
    init = torch.tensor([[[10.0, 20.0]]])
    out, _ = conv_cases.conv_ref(x, weight, None, initial_states=init)
    assert out.squeeze().tolist() == [
        5.0 - 20.0 + 2.0,
        10.0 - 1.0 + 4.0,
        0.5 - 2.0 + 6.0,
        1.0 - 3.0 + 8.0,
    ]
    seq_idx = torch.tensor([[0, 0, 1, 1]], dtype=torch.int32)
    out, _ = conv_cases.conv_ref(x, weight, None, seq_idx=seq_idx)
    assert out.squeeze().tolist() == [2.0, 3.0, 6.0, 8.0 - 3.0]


def test_update_reference_rolls_the_state():
    torch = pytest.importorskip("torch")
    state = torch.tensor([[[1.0, 2.0, 3.0]]])
    out, new_state = conv_cases.update_ref(
        torch.tensor([[4.0]]), state, torch.tensor([[1.0, 1.0]]), None, False
    )
    assert out.tolist() == [[7.0]] and new_state.squeeze().tolist() == [2.0, 3.0, 4.0]


def test_a_correct_kernel_passes_every_mode(fake):
    api, _ = fake
    report = conv.run_conv(_config(), api)
    assert report["passed"], [c for c in report["cases"] if not c["passed"]][:1]
    assert report["modes"] == list(conv_cases.MODES)
    names = set().union(*(c["errors"] for c in report["cases"]))
    assert {
        "out",
        "dx",
        "dweight",
        "dbias",
        "final_states",
        "dinitial_states",
        "conv_state",
    } <= names
    assert set(report["per_dtype"]) == set(conv.DTYPES)


@pytest.mark.parametrize(
    ("broken", "tensor"),
    [("bias", "out"), ("silu", "out"), ("shift", "out"), ("dx", "dx"), ("state", "conv_state")],
)
def test_a_wrong_kernel_is_caught(fake, broken, tensor):
    api, kernel = fake
    kernel.BROKEN = broken
    report = conv.run_conv(_config(dtypes=("float32",)), api)
    assert not report["passed"]
    failed = [c for c in report["cases"] if not c["passed"]]
    assert any(c["errors"].get(tensor, {}).get("ratio", 0) > 1 for c in failed)


def test_a_package_that_bypasses_the_kernel_fails(fake):
    api, _ = fake
    api.ROUTE_TO_REFERENCE = True
    report = conv.run_conv(_config(dtypes=("float32",), update=False), api)
    assert not report["passed"]
    assert all(
        "never called causal_conv1d_cuda.causal_conv1d_fwd" in c["error"]
        for c in report["cases"]
        if c["name"].startswith("float32 plain")
    )


def test_a_channel_last_gradient_has_the_outputs_strides(fake):
    torch = pytest.importorskip("torch")
    api, _ = fake
    x = torch.randn(2, 1, 64).transpose(1, 2).requires_grad_()  # (b, d, 1), strides (64, 1, 64)
    out = api.causal_conv1d_fn(x, torch.randn(64, 3))
    g = conv.output_grad(out, torch.Generator().manual_seed(0))
    assert out.stride() == x.stride() and g.stride() == out.stride()
    with pytest.raises(RuntimeError, match="multiples of 8"):  # what the H100 run reported
        out.backward(torch.randn(out.shape))
    case = conv_cases.ConvCase("float32", 3, 1, True, False, "channel_last")
    result = conv.run_case(case, api, "cpu", torch.Generator().manual_seed(1))
    assert result.passed and not result.error, result.error


def test_a_kernel_within_twice_torchs_own_error_passes():
    torch = pytest.importorskip("torch")
    want = torch.tensor([100.0, 0.0])
    baseline = torch.tensor([100.5, 0.0])  # torch itself, in the input dtype, is 0.5 off
    assert conv.judge(torch.tensor([100.9, 0.0]), want, baseline, 3e-3, 5e-3)["ratio"] <= 1
    assert conv.judge(torch.tensor([101.5, 0.0]), want, baseline, 3e-3, 5e-3)["ratio"] > 1
    assert conv.judge(None, want, baseline, 3e-3, 5e-3)["ratio"] == float("inf")


def test_bad_arguments_exit_2(capsys):
    for argv in (["--widths", "5"], ["--dtypes", "float64"], ["--seqlens", "0"]):
        with pytest.raises(SystemExit) as exc:
            conv.parse_args(argv)
        assert exc.value.code == 2


def test_upstreams_silu_tail_bug_is_caught_and_named(fake):
    api, kernel = fake
    kernel.BROKEN = "silu_tail"
    report = conv.run_conv(
        _config(dtypes=("float32",), widths=(2,), seqlens=(1025, 1024), update=False), api
    )
    failed = [c for c in report["cases"] if not c["passed"]]
    assert failed and all(c["name"].startswith("float32 plain w=2 L=1025") for c in failed)
    assert all("silu" in c["name"] for c in failed)
    assert "silu-bwd-tail" in failed[0]["note"] and "seqlen 1025 leaves 1" in failed[0]["note"]


@pytest.mark.parametrize(
    ("dtype", "mode", "seqlen", "silu", "named"),
    [
        ("float16", "plain", 1025, True, True),
        ("float16", "plain", 1031, True, True),
        ("float16", "plain", 1032, True, False),
        ("float32", "plain", 513, True, True),
        ("float16", "plain", 513, True, False),
        ("float16", "plain", 1025, False, False),
        ("float16", "channel_last", 1025, True, False),
        ("float32", "plain", 1, True, False),
    ],
)
def test_the_silu_tail_signature(dtype, mode, seqlen, silu, named):
    case = conv_cases.ConvCase(dtype, 2, seqlen, True, silu, mode)
    assert (conv.silu_tail_bug(case) is not None) is named
