"""Mamba and Mamba2 blocks forward and backward: the fast path against upstream's reference path.

Both blocks are built once in float32 (same seed, same weights); the fast path runs in each dtype
and the reference path in float32 from the same rounded input, and the runner prints the errors
of the output, the input gradient and the worst parameter gradient per dtype.

- Mamba (mamba_ssm.modules.mamba_simple): fast = `use_fast_path=True` (`mamba_inner_fn`: this
  wheel's selective_scan_cuda plus causal-conv1d; without causal-conv1d, `use_fast_path=False`
  with the compiled `selective_scan_fn`); reference = `use_fast_path=False` with upstream's own
  `selective_scan_ref` and torch's Conv1d (the module's `selective_scan_fn` and
  `causal_conv1d_fn` are swapped for the run). The fast path must call selective_scan_cuda.
- Mamba2 (mamba_ssm.modules.mamba2, v2.x): fast = `use_mem_eff_path=True`
  (`mamba_split_conv1d_scan_combined`); reference = upstream's unfused path
  (`use_mem_eff_path=False`) with torch's Conv1d. Its chunked scan is triton code in both paths.

A block whose module is absent (Mamba2 before v2.0) or needs a missing triton is skipped with the
reason; any other import failure fails. Run `python -m mambawin.verify.runners.blocks --json`
inside the install environment.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mambawin.verify.runners.calls import SCAN, counting
from mambawin.verify.runners.common import DTYPES
from mambawin.verify.runners.judge import compare

# (rtol, atol) of the output per dtype against the float32 reference; gradients get 5x atol.
# Errors are measured against the RMS-scaled floor of smoke.compare.
TOLERANCES = {"float32": (2e-3, 2e-3), "float16": (2e-2, 2e-2), "bfloat16": (6e-2, 6e-2)}
GRAD_FACTOR = 5.0


@dataclass(frozen=True)
class Block:
    """One block kind: where it lives, how it is built, and its fast/reference switches."""

    name: str
    module: str
    kwargs: tuple[tuple[str, Any], ...]
    switch: str  # the constructor flag that picks the fast path


BLOCKS = (
    Block(
        "Mamba",
        "mamba_ssm.modules.mamba_simple",
        (("d_model", 64), ("d_state", 16), ("d_conv", 4), ("expand", 2)),
        "use_fast_path",
    ),
    Block(
        "Mamba2",
        "mamba_ssm.modules.mamba2",
        (("d_model", 256), ("d_state", 64), ("d_conv", 4), ("expand", 2), ("headdim", 64)),
        "use_mem_eff_path",
    ),
)


@contextmanager
def patched(module: Any, **values: Any) -> Iterator[None]:
    """Set module attributes for the duration of a block (the reference path's functions)."""
    saved = {name: getattr(module, name) for name in values if hasattr(module, name)}
    try:
        for name, value in values.items():
            setattr(module, name, value)
        yield
    finally:
        for name in values:
            if name in saved:
                setattr(module, name, saved[name])
            else:
                delattr(module, name)


def reference_overrides(block: Block, module: Any) -> dict[str, Any]:
    """The module globals swapped in for the reference path (torch conv, upstream's ref scan)."""
    overrides: dict[str, Any] = {"causal_conv1d_fn": None}
    if block.name == "Mamba":
        interface = importlib.import_module("mamba_ssm.ops.selective_scan_interface")
        overrides["selective_scan_fn"] = interface.selective_scan_ref
    return overrides


def fast_path(block: Block, module: Any) -> tuple[bool, str]:
    """Whether the fused path can run here, and what the fast side is in words."""
    conv = getattr(module, "causal_conv1d_fn", None) is not None
    if block.name == "Mamba":
        return (
            (True, "mamba_inner_fn (fused)")
            if conv
            else (
                False,
                "use_fast_path=False with the compiled selective_scan_fn (no causal-conv1d)",
            )
        )
    return (
        (True, "mamba_split_conv1d_scan_combined (fused)")
        if conv
        else (False, "use_mem_eff_path=False (no causal-conv1d)")
    )


def run_block(
    block: Block, dtypes: Sequence[str], device: str, seed: int, seqlen: int
) -> dict[str, Any]:
    """Every dtype of one block; skip (with the reason) when its module does not import."""
    try:
        module = importlib.import_module(block.module)
        cls = getattr(module, block.name)
    except Exception as exc:
        return {"block": block.name, **_import_failure(block, exc)}
    fused, fast = fast_path(block, module)
    rows = {}
    for dtype in dtypes:
        rows[dtype] = compare_paths(block, module, cls, dtype, device, seed, seqlen, fused)
    return block_result(block.name, fast, rows)


def block_result(name: str, fast: str, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One block's entry from its rows per dtype: fail when any dtype failed."""
    failed = [f"{d}: {r['reason']}" for d, r in rows.items() if not r["passed"]]
    status = "fail" if failed else "ok"
    reason = "; ".join(failed) or f"fast path {fast} matches the reference path"
    return {"block": name, "status": status, "reason": reason, "fast_path": fast, "per_dtype": rows}


def _import_failure(block: Block, exc: BaseException) -> dict[str, str]:
    """skip when triton or the block's module itself is absent (Mamba2 before v2.0), else fail:
    the package must import with what it requires (issue: tilelang/quack pulled in at import)."""
    reason = f"import {block.module} failed ({type(exc).__name__}: {exc})".splitlines()[0]
    missing = (exc.name or "") if isinstance(exc, ImportError) else ""
    if missing.split(".")[0] == "triton":
        return {"status": "skip", "reason": reason + " (on Windows `pip install triton-windows`)"}
    if missing == block.module:
        return {"status": "skip", "reason": f"this mamba_ssm has no {block.name} ({reason})"}
    return {"status": "fail", "reason": reason}


def compare_paths(
    block: Block,
    module: Any,
    cls: Any,
    dtype: str,
    device: str,
    seed: int,
    seqlen: int,
    fused: bool,
) -> dict[str, Any]:
    """Fast path in `dtype` vs the reference path in float32, same weights and input."""
    import torch

    torch.manual_seed(seed)
    reference = cls(**dict(block.kwargs), **{block.switch: False}).to(device)
    fast = copy.deepcopy(reference).to(getattr(torch, dtype))
    setattr(fast, block.switch, fused)
    x = torch.randn(2, seqlen, dict(block.kwargs)["d_model"], device=device)
    x_fast = x.to(getattr(torch, dtype)).requires_grad_()
    x_ref = x_fast.detach().float().requires_grad_()
    g = torch.randn_like(x)
    try:
        with counting([(SCAN, "fwd"), (SCAN, "bwd")] if block.name == "Mamba" else []) as calls:
            y_fast = fast(x_fast)
            (y_fast.float() * g).sum().backward()
        with patched(module, **reference_overrides(block, module)):
            y_ref = reference(x_ref)
            (y_ref * g).sum().backward()
    except Exception as exc:  # a kernel error is a finding, not a crash of the runner
        return {"passed": False, "reason": f"{type(exc).__name__}: {exc}".splitlines()[0]}
    return _errors(block, dtype, (y_fast, x_fast, fast), (y_ref, x_ref, reference), dict(calls))


def _errors(
    block: Block,
    dtype: str,
    fast: tuple[Any, Any, Any],
    ref: tuple[Any, Any, Any],
    calls: dict[str, int],
) -> dict[str, Any]:
    rtol, atol = TOLERANCES[dtype]
    errors = {
        "out": compare(fast[0], ref[0], rtol, atol),
        "dx": compare(fast[1].grad, ref[1].grad, rtol, GRAD_FACTOR * atol),
    }
    worst_name, worst = "none", {"max_abs": 0.0, "max_rel": 0.0, "ratio": 0.0}
    for (name, p_fast), (_, p_ref) in zip(
        fast[2].named_parameters(), ref[2].named_parameters(), strict=True
    ):
        if p_fast.grad is None or p_ref.grad is None:
            continue
        err = compare(p_fast.grad, p_ref.grad, rtol, GRAD_FACTOR * atol)
        if err["ratio"] >= worst["ratio"]:
            worst_name, worst = name, err
    errors[f"d{worst_name}"] = worst
    passed = all(e["ratio"] <= 1.0 for e in errors.values())
    reason = "within tolerance" if passed else _worst(errors)
    if block.name == "Mamba" and not calls.get(f"{SCAN}.fwd"):
        passed, reason = False, f"the fast path never called {SCAN}.fwd: not this wheel's kernel"
    return {
        "passed": passed,
        "reason": reason,
        "errors": errors,
        "calls": calls,
        "tolerance": {"rtol": rtol, "atol": atol, "grad_atol": GRAD_FACTOR * atol},
    }


def _worst(errors: dict[str, dict[str, float]]) -> str:
    name, err = max(errors.items(), key=lambda kv: kv[1]["ratio"])
    return f"{name} off by {err['max_abs']:.3g} ({err['ratio']:.3g}x tolerance)"


def run_blocks(
    dtypes: Sequence[str] = DTYPES,
    device: str = "cuda",
    seed: int = 0,
    seqlen: int = 257,
    names: Sequence[str] = (),
) -> dict[str, Any]:
    """Both blocks (or those named); passed when none failed."""
    blocks = [b for b in BLOCKS if not names or b.name in names]
    results = [run_block(b, dtypes, device, seed, seqlen) for b in blocks]
    return {
        "device": device,
        "seed": seed,
        "seqlen": seqlen,
        "blocks": results,
        "passed": all(r["status"] != "fail" for r in results),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: JSON on stdout with --json, errors per block and dtype on stderr."""
    found = report(argv)
    if _parser().parse_args(argv).json:
        print(json.dumps(found, default=str))
    return 0


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    return _report(_parser(), argv)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mambawin.verify.runners.blocks", description=__doc__
    )
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--seqlen", type=int, default=257)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--block", action="append", default=[], choices=[b.name for b in BLOCKS])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", action="store_true")
    return parser


def _report(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> dict[str, Any]:
    args = parser.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    if not dtypes or set(dtypes) - set(DTYPES) or args.seqlen < 1:
        parser.error(f"--dtypes from {', '.join(DTYPES)}; --seqlen >= 1")
    report = run_blocks(dtypes, args.device, args.seed, args.seqlen, args.block)
    for block in report["blocks"]:
        print(f"{block['status']:4} {block['block']}: {block['reason']}", file=sys.stderr)
        for dtype, row in block.get("per_dtype", {}).items():
            errs = ", ".join(f"{k} {v['max_abs']:.2g}" for k, v in row.get("errors", {}).items())
            print(f"     {dtype}: {errs or row['reason']}", file=sys.stderr)
    return report


if __name__ == "__main__":
    raise SystemExit(main())
