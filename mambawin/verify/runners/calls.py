"""Proof that the compiled kernels are what runs behind the public Python API.

Each probe wraps the extension's entry points (`selective_scan_cuda.fwd`, ...) in a counting
wrapper, calls the public function (`selective_scan_fn`, `mamba_inner_fn`, `causal_conv1d_fn`,
`causal_conv1d_update`) forward and backward, and fails when an entry point was never called: a
wheel whose Python silently routes to a pure-torch reference would otherwise pass every accuracy
check while running none of its CUDA code. Upstream's Python looks the entry points up on the
module object at call time (`selective_scan_cuda.fwd(...)`,
`causal_conv1d_cuda.causal_conv1d_fwd(...)` in every tag, also behind causal-conv1d's
torch.library custom ops), so the wrapper sees each call.

Run inside the install environment: `python -m mambawin.verify.runners.calls --json`.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mambawin.packages import CAUSAL_CONV1D, MAMBA

SCAN = MAMBA.extension
CONV = CAUSAL_CONV1D.extension


@dataclass(frozen=True)
class Probe:
    """One public function, the module it lives in, and the entry points it must reach."""

    api: str
    module: str
    kernels: tuple[tuple[str, str], ...]  # (extension module, function name)
    run: Callable[[Any, str], Any]  # (the public function, device) -> the output it returned


@contextmanager
def counting(kernels: Sequence[tuple[str, str]]) -> Iterator[Counter[str]]:
    """Replace each `module.function` by a wrapper that counts its calls; restore on exit.

    A stable wheel's shim also holds each op's overload under another name (`_FWD =
    torch.ops.causal_conv1d_cuda.causal_conv1d_fwd.default`) and calls that from the functions
    upstream's cpp_functions.py imports, so those names are wrapped too, under the same key; a
    call through the function and then its overload counts once."""
    counts: Counter[str] = Counter()
    active: Counter[str] = Counter()
    saved = []
    try:
        for module_name, name in kernels:
            module = importlib.import_module(module_name)
            for attr in _entry_points(module, module_name, name):
                original = getattr(module, attr)
                key = f"{module_name}.{name}"
                setattr(module, attr, _counter(counts, active, key, original))
                saved.append((module, attr, original))
        yield counts
    finally:
        for module, attr, original in reversed(saved):
            setattr(module, attr, original)


def _entry_points(module: Any, module_name: str, name: str) -> list[str]:
    """name, and the module's names for the op `module_name::name` (a stable shim's overloads)."""
    op = f"{module_name}::{name}"
    cached = [
        attr
        for attr, value in vars(module).items()
        if attr != name and getattr(getattr(value, "_schema", None), "name", None) == op
    ]
    return [name, *cached]


def _counter(
    counts: Counter[str], active: Counter[str], key: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not active[key]:
            counts[key] += 1
        active[key] += 1
        try:
            return original(*args, **kwargs)
        finally:
            active[key] -= 1

    return wrapper


def _scan_inputs(
    device: str, batch: int = 2, dim: int = 8, dstate: int = 4, seqlen: int = 33
) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int, scale: float = 1.0) -> Any:
        tensor = scale * torch.randn(*shape, generator=gen)
        return tensor.to(device).requires_grad_()

    return {
        "u": rand(batch, dim, seqlen),
        "delta": rand(batch, dim, seqlen, scale=0.5),
        "A": (-torch.rand(dim, dstate, generator=gen)).to(device).requires_grad_(),
        "B": rand(batch, dstate, seqlen),
        "C": rand(batch, dstate, seqlen),
        "D": rand(dim),
        "z": rand(batch, dim, seqlen),
        "delta_bias": rand(dim, scale=0.5),
    }


def run_selective_scan(fn: Any, device: str) -> Any:
    """selective_scan_fn forward (with D, z, delta_bias, softplus) and backward."""
    x = _scan_inputs(device)
    out = fn(
        x["u"],
        x["delta"],
        x["A"],
        x["B"],
        x["C"],
        x["D"],
        x["z"],
        x["delta_bias"],
        delta_softplus=True,
    )
    out.sum().backward()
    return out


def run_mamba_inner(fn: Any, device: str) -> Any:
    """mamba_inner_fn (conv1d + projections + selective scan) forward and backward."""
    import torch

    gen = torch.Generator().manual_seed(0)
    batch, dim, dstate, seqlen, width, rank, d_model = 2, 16, 4, 33, 4, 2, 8

    def rand(*shape: int, scale: float = 0.5) -> Any:
        return (scale * torch.randn(*shape, generator=gen)).to(device).requires_grad_()

    A = (-torch.rand(dim, dstate, generator=gen)).to(device).requires_grad_()
    out = fn(
        rand(batch, 2 * dim, seqlen),
        rand(dim, 1, width),
        rand(dim),
        rand(rank + 2 * dstate, dim),
        rand(dim, rank),
        rand(d_model, dim),
        None,
        A,
        None,
        None,
        rand(dim),
        rand(dim),
        delta_softplus=True,
    )
    out.sum().backward()
    return out


def run_causal_conv1d(fn: Any, device: str) -> Any:
    """causal_conv1d_fn with bias and SiLU, forward and backward."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 33, generator=gen).to(device).requires_grad_()
    weight = torch.randn(16, 4, generator=gen).to(device).requires_grad_()
    bias = torch.randn(16, generator=gen).to(device).requires_grad_()
    out = fn(x, weight, bias, activation="silu")
    out.sum().backward()
    return out


def run_conv_update(fn: Any, device: str) -> Any:
    """causal_conv1d_update: one decoding step against a rolling state."""
    import torch

    gen = torch.Generator().manual_seed(0)
    state = torch.randn(2, 16, 3, generator=gen).to(device)
    weight, bias = torch.randn(16, 4, generator=gen).to(device), torch.randn(16).to(device)
    return fn(torch.randn(2, 16, generator=gen).to(device), state, weight, bias, "silu")


_SCAN_API = "mamba_ssm.ops.selective_scan_interface"
PROBES = (
    Probe("selective_scan_fn", _SCAN_API, ((SCAN, "fwd"), (SCAN, "bwd")), run_selective_scan),
    Probe(
        "mamba_inner_fn",
        _SCAN_API,
        ((SCAN, "fwd"), (SCAN, "bwd"), (CONV, "causal_conv1d_fwd"), (CONV, "causal_conv1d_bwd")),
        run_mamba_inner,
    ),
    Probe(
        "causal_conv1d_fn",
        "causal_conv1d",
        ((CONV, "causal_conv1d_fwd"), (CONV, "causal_conv1d_bwd")),
        run_causal_conv1d,
    ),
    Probe(
        "causal_conv1d_update", "causal_conv1d", ((CONV, "causal_conv1d_update"),), run_conv_update
    ),
)


def run_probe(probe: Probe, device: str) -> dict[str, Any]:
    """ok when every entry point was called and the output is finite; skip when not installed."""
    result: dict[str, Any] = {"api": probe.api, "kernels": [f"{m}.{f}" for m, f in probe.kernels]}
    missing = sorted({m for m, _ in probe.kernels if importlib.util.find_spec(m) is None})
    if missing:
        return {**result, "status": "skip", "reason": f"{', '.join(missing)} is not installed"}
    try:
        fn = getattr(importlib.import_module(probe.module), probe.api)
    except Exception as exc:
        return {**result, **_import_failure(probe, exc)}
    try:
        with counting(probe.kernels) as counts:
            out = probe.run(fn, device)
    except Exception as exc:  # a kernel error is a finding, not a crash of the runner
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return {**result, "status": "fail", "reason": reason}
    return {**result, **_verdict(probe, dict(counts), out)}


def _import_failure(probe: Probe, exc: BaseException) -> dict[str, str]:
    reason = f"import {probe.module} failed ({type(exc).__name__}: {exc})".splitlines()[0]
    if isinstance(exc, ImportError) and (exc.name or "").split(".")[0] == "triton":
        return {"status": "skip", "reason": reason + " (on Windows `pip install triton-windows`)"}
    return {"status": "fail", "reason": reason}


def _verdict(probe: Probe, counts: dict[str, int], out: Any) -> dict[str, Any]:
    import torch

    never = [f"{m}.{f}" for m, f in probe.kernels if not counts.get(f"{m}.{f}")]
    if never:
        reason = (
            f"{probe.api} ran without calling {', '.join(never)}: its Python routes "
            "around the compiled kernel (a reference path?); rebuild or reinstall the wheel"
        )
        return {"status": "fail", "reason": reason, "counts": counts}
    if not torch.isfinite(out).all().item():
        return {
            "status": "fail",
            "reason": f"{probe.api} returned non-finite values",
            "counts": counts,
        }
    calls = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items()))
    return {"status": "ok", "reason": f"{probe.api} called {calls}", "counts": counts}


def run_calls(device: str = "cuda", apis: Sequence[str] = ()) -> dict[str, Any]:
    """Run every probe (or those named in apis); passed when none failed."""
    probes = [p for p in PROBES if not apis or p.api in apis]
    results = [run_probe(p, device) for p in probes]
    return {
        "device": device,
        "probes": results,
        "passed": all(r["status"] != "fail" for r in results),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: JSON on stdout with --json, one line per probe on stderr."""
    if _parser().parse_args(argv).json:
        print(json.dumps(report(argv)))
    else:
        report(argv)
    return 0


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    args = _parser().parse_args(argv)
    found = run_calls(args.device, args.api)
    for probe in found["probes"]:
        print(f"{probe['status']:4} {probe['api']}: {probe['reason']}", file=sys.stderr)
    return found


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mambawin.verify.runners.calls", description=__doc__
    )
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--api",
        action="append",
        default=[],
        choices=[p.api for p in PROBES],
        help="only this API (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
