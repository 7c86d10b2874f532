"""GPU smoke test of the compiled selective scan against mambawin's float64 reference.

Run inside the environment that has the wheel installed
(`python -m mambawin.verify.runners.smoke --json`), so that `import selective_scan_cuda` sees
that wheel; `mambawin verify` does this in a throwaway venv.
The kernel's Python binding is the same in every upstream tag (v1.0.0 .. main):

    fwd(u, delta, A, B, C, D?, z?, delta_bias?, delta_softplus) -> [out, x] (+ [out_z] with z)
    bwd(u, delta, A, B, C, D?, z?, delta_bias?, dout, x?, out?, dz?, delta_softplus,
        recompute_out_z) -> [du, ddelta, dA, dB, dC, dD, ddelta_bias] (+ [dz] with z)

with variable B/C 4-D (batch, groups, dstate, seqlen), x of shape (batch, dim, n_chunks,
2 * dstate) whose odd columns of the last chunk hold the last state, and `out` needed by bwd only
when z is given (upstream `SelectiveScanFn` passes None otherwise).
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mambawin.verify.runners.common import DTYPES, emit
from mambawin.verify.runners.judge import CaseResult, compare, device_name, summarize
from mambawin.verify.runners.reference import selective_scan_ref

# Lengths around the kernel's 2048-step chunk: 1, odd, just under a power of two, 2 chunks + 1,
# and a multiple of the chunk (the state is carried between chunks through x).


SEQLENS = (1, 7, 127, 255, 2049, 4096)


# (rtol, atol) per input dtype: the values upstream's tests/ops/test_selective_scan.py uses.
TOLERANCES = {"float32": (6e-4, 2e-3), "float16": (3e-3, 5e-3), "bfloat16": (3e-2, 5e-2)}


WEIGHT_TOLERANCE = (1e-3, 1e-3)


@dataclass(frozen=True)
class Variant:
    """Which optional inputs one case passes to the kernel."""

    var_B: bool
    var_C: bool
    groups: int = 1
    has_D: bool = False
    has_z: bool = False
    has_bias: bool = False
    softplus: bool = False

    @property
    def label(self) -> str:
        """A short readable name, e.g. 'varB varC g2 D z bias softplus'."""
        parts = ["varB" if self.var_B else "fixB", "varC" if self.var_C else "fixC"]
        parts += [f"g{self.groups}"] if self.groups > 1 else []
        flags = (
            ("D", self.has_D),
            ("z", self.has_z),
            ("bias", self.has_bias),
            ("softplus", self.softplus),
        )
        return " ".join(parts + [name for name, on in flags if on])


# Every option is on in some variant and off in another; each is run at several lengths.
VARIANTS = (
    Variant(True, True, 1, True, True, True, True),
    Variant(False, False),
    Variant(True, False, 1, False, True, False, True),
    Variant(False, True, 1, True, False, True, False),
    Variant(True, True, 2, False, False, True, True),
    Variant(True, True, 1, True, True, False, False),
)


@dataclass(frozen=True)
class Case:
    """One kernel call: dtype, length, options and sizes."""

    dtype: str
    seqlen: int
    variant: Variant
    batch: int = 2
    dim: int = 8
    dstate: int = 16

    @property
    def name(self) -> str:
        return f"{self.dtype} L={self.seqlen} {self.variant.label}"


@dataclass(frozen=True)
class SmokeConfig:
    """What to run: seed, dtypes, lengths, variants per length, the Mamba block, the device."""

    seed: int
    dtypes: tuple[str, ...] = DTYPES
    seqlens: tuple[int, ...] = SEQLENS
    per_length: int = 2
    block: bool = True
    device: str = "cuda"
    json_output: bool = False


def parse_args(argv: Sequence[str] | None = None) -> SmokeConfig:
    """Parse the runner's command line into a SmokeConfig (a fresh seed unless --seed)."""
    parser = argparse.ArgumentParser(
        prog="python -m mambawin.verify.runners.smoke", description=__doc__
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: fresh)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated dtypes")
    parser.add_argument("--seqlens", default=",".join(map(str, SEQLENS)))
    parser.add_argument("--per-length", type=int, default=2, help="variants per (dtype, length)")
    parser.add_argument("--no-block", action="store_true", help="skip the Mamba block test")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    args = parser.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    unknown = sorted(set(dtypes) - set(DTYPES))
    if unknown:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}: choose from {', '.join(DTYPES)}")
    seqlens = _positive_ints(parser, args.seqlens)
    if not 1 <= args.per_length <= len(VARIANTS):
        parser.error(f"--per-length must be between 1 and {len(VARIANTS)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    return SmokeConfig(
        seed, dtypes, seqlens, args.per_length, not args.no_block, args.device, args.json
    )


def _positive_ints(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        parser.error(f"--seqlens must be comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        parser.error("--seqlens needs at least one length, each >= 1")
    return values


def plan_cases(config: SmokeConfig) -> list[Case]:
    """Each (dtype, length) gets `per_length` variants, rotating so all variants meet all dtypes."""
    cases = []
    for d, dtype in enumerate(config.dtypes):
        for i, seqlen in enumerate(config.seqlens):
            for k in range(config.per_length):
                variant = VARIANTS[(i * config.per_length + k + d) % len(VARIANTS)]
                cases.append(Case(dtype, seqlen, variant))
    return cases


def tolerance(name: str, case: Case) -> tuple[float, float]:
    """(rtol, atol) for one compared tensor, scaled per output as upstream's tests do."""
    rtol, atol = TOLERANCES[case.dtype]
    rtolw, atolw = WEIGHT_TOLERANCE
    if case.variant.has_z:  # upstream: with z the errors on the weights are higher
        rtolw, atolw = max(rtolw, rtol), max(atolw, atol)
    table = {
        "out": (rtol, atol),
        "last_state": (rtol, atol),
        "du": (2 * rtol, 2 * atol),
        "ddelta": (5 * rtol, 10 * atol),
        "dA": (rtolw, 5 * atolw),
        "dB": (rtol, atol) if case.variant.var_B else (rtolw, atolw),
        "dC": (rtol, atol) if case.variant.var_C else (rtolw, atolw),
    }
    return table.get(name, (rtolw, atolw))


def make_inputs(case: Case, device: str, gen: Any) -> dict[str, Any]:
    """Random inputs shaped and typed as upstream's test does (weights fp32, activations itype)."""
    import torch

    itype, f32 = getattr(torch, case.dtype), torch.float32
    b, d, n, L, v = case.batch, case.dim, case.dstate, case.seqlen, case.variant

    def rand(*shape: int, dtype: Any = f32, normal: bool = True) -> Any:
        fn = torch.randn if normal else torch.rand
        return fn(*shape, generator=gen, dtype=f32).to(device=device, dtype=dtype)

    inputs = {
        "u": rand(b, d, L, dtype=itype),
        "delta": 0.5 * rand(b, d, L, dtype=itype, normal=False),
        "A": -0.5 * rand(d, n, normal=False),
        "B": rand(b, v.groups, n, L, dtype=itype) if v.var_B else rand(d, n),
        "C": rand(b, v.groups, n, L, dtype=itype) if v.var_C else rand(d, n),
        "D": rand(d) if v.has_D else None,
        "z": rand(b, d, L, dtype=itype) if v.has_z else None,
        "delta_bias": 0.5 * rand(d, normal=False) if v.has_bias else None,
    }
    return inputs


def kernel_forward_backward(
    kernel: Any, x: dict[str, Any], dout: Any, softplus: bool
) -> dict[str, Any]:
    """Call the compiled fwd and bwd with the argument order every upstream tag uses."""
    u, delta, A, B, C, D, z, bias = (
        x[k] for k in ("u", "delta", "A", "B", "C", "D", "z", "delta_bias")
    )
    out, scan, *rest = kernel.fwd(u, delta, A, B, C, D, z, bias, softplus)
    final = rest[0] if z is not None else out
    grads = kernel.bwd(
        u,
        delta,
        A,
        B,
        C,
        D,
        z,
        bias,
        dout,
        scan,
        out if z is not None else None,
        None,
        softplus,
        False,
    )
    du, ddelta, dA, dB, dC, dD, dbias, *more = grads
    result = {
        "out": final,
        "last_state": kernel_last_state(scan, B),
        "du": du,
        "ddelta": ddelta,
        "dA": dA,
        "dB": dB,
        "dC": dC,
    }
    optional = {"dD": (D, dD), "ddelta_bias": (bias, dbias), "dz": (z, more[0] if more else None)}
    result.update({k: g for k, (given, g) in optional.items() if given is not None})
    return result


def kernel_last_state(scan: Any, B: Any) -> Any:
    """The final SSM state from the kernel's saved chunk prefixes (batch, dim, n_chunks, 2*dstate).

    With a fixed (dim, dstate) B the forward kernel scans delta*u and folds B into the readout
    (selective_scan_fwd_kernel.cuh: `!kIsVariableB ? delta_u_vals : B_vals * delta_u_vals`), so its
    stored state lacks the B factor; upstream's `return_last_state` returns it unscaled.
    """
    state = scan[:, :, -1, 1::2]
    return state * B.to(state.dtype) if B.dim() == 2 else state


def reference_forward_backward(x: dict[str, Any], dout: Any, softplus: bool) -> dict[str, Any]:
    """The same outputs and gradients from the float64 sequential reference (autograd)."""
    import torch

    leaves: dict[str, Any] = {
        k: (v.detach().to(torch.float64).requires_grad_() if v is not None else None)
        for k, v in x.items()
    }
    out, last = selective_scan_ref(
        leaves["u"],
        leaves["delta"],
        leaves["A"],
        leaves["B"],
        leaves["C"],
        leaves["D"],
        leaves["z"],
        leaves["delta_bias"],
        delta_softplus=softplus,
        return_last_state=True,
    )
    out.backward(dout.to(torch.float64))
    result = {"out": out, "last_state": last}
    names = {
        "u": "du",
        "delta": "ddelta",
        "A": "dA",
        "B": "dB",
        "C": "dC",
        "D": "dD",
        "delta_bias": "ddelta_bias",
        "z": "dz",
    }
    result.update({names[k]: v.grad for k, v in leaves.items() if v is not None})
    return result


def run_case(case: Case, kernel: Any, device: str, gen: Any) -> CaseResult:
    """Run one case on the kernel and the reference; record every tensor's error."""
    import torch

    result = CaseResult(case.name, case.dtype, case.seqlen)
    x = make_inputs(case, device, gen)
    dout = torch.randn(case.batch, case.dim, case.seqlen, generator=gen).to(device, x["u"].dtype)
    try:
        got = kernel_forward_backward(kernel, x, dout, case.variant.softplus)
    except Exception as exc:  # a kernel error is a finding, not a crash of the runner
        result.passed, result.error = False, f"{type(exc).__name__}: {exc}".splitlines()[0]
        return result
    ref = reference_forward_backward(x, dout, case.variant.softplus)
    for name, want in ref.items():
        errors = compare(got[name], want, *tolerance(name, case))
        result.errors[name] = errors
        result.passed &= errors["ratio"] <= 1.0
    return result


def block_skip_reason(exc: BaseException) -> str:
    """Why the Mamba block was not run; the triton hint only when triton is what is missing."""
    reason = f"import mamba_ssm failed ({type(exc).__name__}: {exc})".splitlines()[0]
    if isinstance(exc, ImportError) and (exc.name or "").split(".")[0] == "triton":
        reason += (
            " (v2.x imports triton at package import; on Windows `pip install triton-windows`)"
        )
    return reason


def block_test(device: str, seed: int) -> dict[str, str]:
    """Mamba block forward and backward, when `import mamba_ssm` works here."""
    try:
        from mamba_ssm import Mamba  # v2.x imports triton at package import
    except Exception as exc:
        return {"status": "skip", "reason": block_skip_reason(exc)}
    import torch

    torch.manual_seed(seed)
    try:
        # use_fast_path=False runs selective_scan_fn (this wheel's kernel) without needing
        # causal-conv1d, which the wheel does not provide.
        block = Mamba(d_model=64, d_state=16, d_conv=4, expand=2, use_fast_path=False).to(device)
        x = torch.randn(2, 257, 64, device=device, requires_grad=True)
        y = block(x)
        y.float().pow(2).mean().backward()
    except Exception as exc:
        return {"status": "fail", "reason": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    grads = [x.grad] + [p.grad for p in block.parameters()]
    finite = torch.isfinite(y).all().item() and all(
        g is not None and torch.isfinite(g).all().item() for g in grads
    )
    if y.shape != x.shape or not finite:
        return {"status": "fail", "reason": "Mamba block output or gradients are not finite"}
    return {"status": "ok", "reason": "Mamba(d_model=64) forward+backward finite, L=257"}


def run_smoke(config: SmokeConfig, kernel: Any = None) -> dict[str, Any]:
    """Run every planned case (and the Mamba block); return a JSON-ready result."""
    import torch

    if kernel is None:
        kernel = importlib.import_module("selective_scan_cuda")
    gen = torch.Generator().manual_seed(config.seed)
    results = [run_case(case, kernel, config.device, gen) for case in plan_cases(config)]
    block = (
        block_test(config.device, config.seed)
        if config.block
        else {"status": "skip", "reason": "not asked for (--no-block)"}
    )
    return {
        "seed": config.seed,
        "device": device_name(config.device),
        "torch": torch.__version__,
        "extension": getattr(kernel, "__file__", None),
        "tolerances": {
            d: {"rtol": TOLERANCES[d][0], "atol": TOLERANCES[d][1]} for d in config.dtypes
        },
        "per_dtype": summarize(results),
        "cases": [asdict(r) for r in results],
        "block": block,
        "passed": all(r.passed for r in results) and block["status"] != "fail",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the smoke test; JSON on stdout with --json, a summary on stderr."""
    config = parse_args(argv)
    emit(run_config(config), config.json_output)
    return 0


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    return run_config(parse_args(argv))


def run_config(config: SmokeConfig) -> dict[str, Any]:
    print(f"mambawin smoke: seed {config.seed}", file=sys.stderr)
    return run_smoke(config)


if __name__ == "__main__":
    raise SystemExit(main())
