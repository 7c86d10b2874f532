"""GPU check of causal-conv1d's kernels against mambawin's float64 reference.

Every case goes through the public API (`causal_conv1d_fn`, `causal_conv1d_update`) with counting
wrappers on the extension's entry points (`runners.calls.counting`), so a case also fails when
the API answered without calling the compiled kernel. Forward and backward, with and without bias
and SiLU, in both memory layouts; `initial_states` / final states and `seq_idx` (packed
sequences) where the installed version's `causal_conv1d_fn` has those parameters (read from its
signature); and the decoding path `causal_conv1d_update`. Tolerances are those of upstream's
tests/test_causal_conv1d.py. Run `python -m mambawin.verify.runners.conv --json` inside the
environment holding the wheel.

The reference, written for mambawin from the definition (depthwise causal convolution):

    out[b, d, t] = act(bias[d] + sum_k weight[d, k] * x[b, d, t - (width - 1 - k)])

with x padded on the left by `initial_states` (or zeros), and, under `seq_idx`, an input counted
only when it belongs to the same sequence as position t.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from mambawin.verify.runners.calls import CONV, counting
from mambawin.verify.runners.common import DTYPES, emit
from mambawin.verify.runners.conv_cases import (
    SEQLENS,
    TOLERANCES,
    WIDTHS,
    ConvCase,
    ConvConfig,
    conv_ref,
    features,
    plan_cases,
    tolerance,
    update_ref,
)
from mambawin.verify.runners.judge import CaseResult, compare, device_name, summarize

_KERNELS = {
    "fwd": (CONV, "causal_conv1d_fwd"),
    "bwd": (CONV, "causal_conv1d_bwd"),
    "update": (CONV, "causal_conv1d_update"),
}


def make_inputs(case: ConvCase, device: str, gen: Any) -> dict[str, Any]:
    """x (itype, channel-last where the mode needs it), fp32 weight/bias, optional extras."""
    import torch

    itype, b, d, w, L = getattr(torch, case.dtype), case.batch, case.dim, case.width, case.seqlen

    def rand(*shape: int, dtype: Any = torch.float32) -> Any:
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)

    last = case.mode != "plain"  # initial states and seq_idx need the channel-last layout
    x = rand(b, L, d, dtype=itype).transpose(1, 2) if last else rand(b, d, L, dtype=itype)
    inputs = {"x": x, "weight": rand(d, w), "bias": rand(d) if case.bias else None}
    if case.mode == "initial_states":
        inputs["initial_states"] = rand(b, w - 1, d, dtype=itype).transpose(1, 2)
    if case.mode == "seq_idx":
        cuts = sorted(torch.randint(0, L + 1, (2,), generator=gen).tolist())
        idx = [0] * cuts[0] + [1] * (cuts[1] - cuts[0]) + [2] * (L - cuts[1])
        inputs["seq_idx"] = torch.tensor(idx, dtype=torch.int32).repeat(b, 1).to(device)
    return inputs


def kernel_forward_backward(
    api: Any,
    case: ConvCase,
    x: dict[str, Any],
    gen: Any,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(kernel, float64 reference, pure-torch) results for one fn case, forward and backward.

    The pure-torch run is upstream's `causal_conv1d_ref`: computed in float32 from the same
    inputs, the output cast back to the input dtype; its error against the float64 reference is
    what torch itself achieves in that dtype, and a kernel may err up to twice that."""
    import torch

    def leaves(dtype: Any = None) -> dict[str, Any]:
        return {
            k: v.detach().to(dtype or v.dtype).requires_grad_()
            if v is not None and k != "seq_idx"
            else v
            for k, v in x.items()
        }

    kernel, refs, torch_run = leaves(), leaves(torch.float64), leaves()
    act = "silu" if case.silu else None
    extra = {k: kernel[k] for k in ("initial_states", "seq_idx") if k in kernel}
    finals = case.mode == "initial_states"
    got = api.causal_conv1d_fn(
        kernel["x"],
        kernel["weight"],
        kernel["bias"],
        activation=act,
        **extra,
        **({"return_final_states": True} if finals else {}),
    )
    out, final = got if finals else (got, None)
    ref_out, ref_final = conv_ref(
        refs["x"],
        refs["weight"],
        refs["bias"],
        refs.get("initial_states"),
        refs.get("seq_idx"),
        case.silu,
    )
    pt_out, pt_final = conv_ref(
        torch_run["x"],
        torch_run["weight"],
        torch_run["bias"],
        torch_run.get("initial_states"),
        torch_run.get("seq_idx"),
        case.silu,
        compute=torch.float32,
    )
    pt_out, pt_final = pt_out.to(out.dtype), pt_final.to(x["x"].dtype)
    g = output_grad(out, gen)
    _backward(out, final, g)
    _backward(ref_out, ref_final if finals else None, g)
    _backward(pt_out, pt_final if finals else None, g)
    return (
        _collect(out, final, kernel),
        _collect(ref_out, ref_final if finals else None, refs),
        _collect(pt_out, pt_final if finals else None, torch_run),
    )


def output_grad(out: Any, gen: Any) -> Any:
    """The gradient of `out`, seeded, with out's strides (upstream: `torch.randn_like(out)`).

    A channel-last output needs a channel-last dout: the backward kernel requires dout.stride(0)
    and dout.stride(2) to be multiples of 8, which a contiguous (b, d, 1) gradient is not."""
    import torch

    g = torch.empty_like(out, memory_format=torch.preserve_format)
    return g.copy_(torch.randn(out.shape, generator=gen).to(out.device, out.dtype))


def _backward(out: Any, final: Any, g: Any) -> None:
    import torch

    tensors, grads = [out], [g.to(out.dtype)]
    if final is not None:  # exercises the kernel's dfinal_states input, as upstream's test does
        wide = torch.float64 if final.dtype == torch.float64 else torch.float32
        tensors.append(final.to(wide).sigmoid().sum())
        grads.append(torch.ones((), dtype=wide, device=final.device))
    torch.autograd.backward(tensors, grads)  # dout is g itself, strides and all


def _collect(out: Any, final: Any, leaves: dict[str, Any]) -> dict[str, Any]:
    names = {"x": "dx", "weight": "dweight", "bias": "dbias", "initial_states": "dinitial_states"}
    result = {"out": out, **({"final_states": final} if final is not None else {})}
    result.update({names[k]: v.grad for k, v in leaves.items() if k in names and v is not None})
    return result


def update_case(
    api: Any,
    case: ConvCase,
    device: str,
    gen: Any,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(kernel, reference, pure-torch) results of causal_conv1d_update: the output and the
    rolled state."""
    import torch

    itype, b, d = getattr(torch, case.dtype), case.batch, case.dim
    shape = (b, d) if case.seqlen == 1 else (b, d, case.seqlen)
    x = torch.randn(*shape, generator=gen).to(device, itype)
    state = torch.randn(b, d, case.width - 1 + 2, generator=gen).to(device, itype)
    weight = torch.randn(d, case.width, generator=gen).to(device)
    bias = torch.randn(d, generator=gen).to(device) if case.bias else None
    ref_out, ref_state = update_ref(x, state.clone(), weight, bias, case.silu)
    pt_out, pt_state = update_ref(x, state.clone(), weight, bias, case.silu, torch.float32)
    out = api.causal_conv1d_update(x, state, weight, bias, "silu" if case.silu else None)
    return (
        {"out": out, "conv_state": state},
        {"out": ref_out, "conv_state": ref_state},
        {"out": pt_out.to(itype), "conv_state": pt_state.to(itype)},
    )


def judge(mine: Any, want: Any, baseline: Any, rtol: float, atol: float) -> dict[str, float]:
    """compare() against the float64 reference, with upstream's tolerances; a tensor also passes
    when its largest error is at most twice that of the pure-torch run in the same dtype
    (`torch_max_abs`), which is what upstream's tests accept. ratio <= 1 passes."""
    if mine is None:
        return dict.fromkeys(("max_abs", "max_rel", "ratio"), float("inf"))
    result = compare(mine, want, rtol, atol)
    if baseline is not None:
        torch_err = compare(baseline, want, rtol, atol)["max_abs"]
        result["torch_max_abs"] = torch_err
        if torch_err > 0 and result["ratio"] != float("inf"):
            result["ratio"] = min(result["ratio"], result["max_abs"] / (2 * torch_err))
    return result


def run_case(case: ConvCase, api: Any, device: str, gen: Any) -> CaseResult:
    """One case through the public API; errors per tensor, and the kernels it reached."""
    result = CaseResult(case.name, case.dtype, case.seqlen)
    wanted = [_KERNELS["update"]] if case.mode == "update" else [_KERNELS["fwd"], _KERNELS["bwd"]]
    try:
        with counting(wanted) as counts:
            if case.mode == "update":
                got, ref, torch_run = update_case(api, case, device, gen)
            else:
                got, ref, torch_run = kernel_forward_backward(
                    api, case, make_inputs(case, device, gen), gen
                )
    except Exception as exc:  # a kernel error is a finding, not a crash of the runner
        result.passed, result.error = False, f"{type(exc).__name__}: {exc}".splitlines()[0]
        return result
    never = [f"{m}.{f}" for m, f in wanted if not counts.get(f"{m}.{f}")]
    if never:
        result.passed = False
        result.error = f"the API never called {', '.join(never)}: not the compiled kernel"
    for name, want in ref.items():
        result.errors[name] = judge(
            got.get(name), want, torch_run.get(name), *tolerance(name, case)
        )
        result.passed &= result.errors[name]["ratio"] <= 1.0
    if not result.passed and result.errors.get("dx", {}).get("ratio", 0) > 1.0:
        result.note = silu_tail_bug(case)
    return result


def silu_tail_bug(case: ConvCase) -> str | None:
    """Why a wrong dx is upstream's SiLU-backward tail bug (patch silu-bwd-tail), if it is.

    The channel-first bwd kernel works in chunks of 128 threads x kNElts elements (4 for float32,
    8 for 16-bit types); when the last chunk holds fewer than kNElts positions, every tag before
    the patch recomputes the SiLU input near the chunk edge from zeros."""
    elements = 4 if case.dtype == "float32" else 8
    chunk = 128 * elements
    tail = case.seqlen % chunk
    if case.mode != "plain" or not case.silu or case.seqlen < chunk or not 0 < tail < elements:
        return None
    return (
        f"the known causal-conv1d SiLU backward bug: seqlen {case.seqlen} leaves {tail} "
        f"position(s) in the last chunk of {chunk}, fewer than the {elements} loaded at once; "
        "wheels from `mambawin build` carry the fix (patch silu-bwd-tail): rebuild with it"
    )


def run_conv(config: ConvConfig, api: Any = None) -> dict[str, Any]:
    """Run every planned case; return a JSON-ready result (the smoke runner's shape)."""
    import torch

    api = api if api is not None else importlib.import_module("causal_conv1d")
    modes = features(api.causal_conv1d_fn)
    gen = torch.Generator().manual_seed(config.seed)
    results = [run_case(c, api, config.device, gen) for c in plan_cases(config, modes)]
    extension = sys.modules.get(CONV)
    return {
        "seed": config.seed,
        "device": device_name(config.device),
        "torch": torch.__version__,
        "version": getattr(api, "__version__", None),
        "modes": list(modes),
        "extension": getattr(extension, "__file__", None),
        "tolerances": {
            d: {"rtol": TOLERANCES[d][0], "atol": TOLERANCES[d][1]} for d in config.dtypes
        },
        "per_dtype": summarize(results),
        "cases": [asdict(r) for r in results],
        "passed": bool(results) and all(r.passed for r in results),
    }


def parse_args(argv: Sequence[str] | None = None) -> ConvConfig:
    """Parse the runner's command line (a fresh seed unless --seed)."""
    parser = argparse.ArgumentParser(
        prog="python -m mambawin.verify.runners.conv", description=__doc__
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    parser.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    parser.add_argument("--no-update", action="store_true", help="skip causal_conv1d_update")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    if not dtypes or set(dtypes) - set(DTYPES):
        parser.error(f"--dtypes: choose from {', '.join(DTYPES)}")
    widths, seqlens = (
        _ints(parser, args.widths, "--widths"),
        _ints(parser, args.seqlens, "--seqlens"),
    )
    if set(widths) - set(WIDTHS):
        parser.error("--widths: causal-conv1d's kernels support widths 2, 3 and 4")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    return ConvConfig(seed, dtypes, widths, seqlens, not args.no_update, args.device, args.json)


def _ints(parser: argparse.ArgumentParser, text: str, flag: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        parser.error(f"{flag} must be comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        parser.error(f"{flag} needs at least one value, each >= 1")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: JSON on stdout with --json, a per-dtype summary on stderr."""
    config = parse_args(argv)
    emit(run_config(config), config.json_output)
    return 0


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    return run_config(parse_args(argv))


def run_config(config: ConvConfig) -> dict[str, Any]:
    print(f"mambawin conv: seed {config.seed}", file=sys.stderr)
    return run_conv(config)


if __name__ == "__main__":
    raise SystemExit(main())
