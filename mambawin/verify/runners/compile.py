"""torch.compile(fullgraph=True) through upstream's whole Mamba and Mamba2 blocks (and, on request,
MambaLMHeadModel's training step), forward and backward, against the same model in eager mode.

Per block and dtype: torch._dynamo.explain counts the graphs and breaks (with each break's reason
and upstream line), the block compiled with fullgraph=True runs forward and backward, and its
output, input gradient and worst parameter gradient are compared with eager's (the blocks step's
tolerances, same dtype on both sides); then both are timed, forward + backward, on the GPU. A
stable-ABI pair's shims make these blocks one graph each (docs/stable-abi.md; Mamba2 with the
ssd-custom-ops patch); a torch-ABI
wheel's pybind11 functions break the graph at every call, so verify runs this step on stable pairs
only. Run `python -m mambawin.verify.runners.compile --json` inside the install environment.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mambawin.verify.runners.blocks import GRAD_FACTOR, TOLERANCES
from mambawin.verify.runners.graphs import (
    graph_breaks,
    graph_limit,
    verdict,
    within,
)
from mambawin.verify.runners.judge import compare

DTYPES = ("float32", "bfloat16")
MODES = ("default", "reduce-overhead")


@dataclass(frozen=True)
class Block:
    """One upstream block: where it lives and how it is built."""

    name: str
    module: str
    kwargs: tuple[tuple[str, Any], ...]  # besides d_model


BLOCKS = (
    Block("Mamba", "mamba_ssm.modules.mamba_simple", (("d_state", 16),)),
    Block("Mamba2", "mamba_ssm.modules.mamba2", (("d_state", 64), ("headdim", 64))),
)
D_MODEL = 256  # verify's size: small, quick to compile; the benchmark passes its own
# MambaLMHeadModel's layer kinds (ssm_cfg["layer"]).
LM_LAYERS = ("Mamba1", "Mamba2")


def timed_ms(step: Callable[[], Any], iters: int, warmup: int = 3) -> float:
    """Median wall milliseconds of step(), the GPU synchronised before and after each call (what
    a training loop waits for: launches and kernels)."""
    import torch

    for _ in range(warmup):
        step()
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[len(times) // 2]


def errors_against(
    dtype: str, got: tuple[Any, Any, Any], want: tuple[Any, Any, Any]
) -> dict[str, dict[str, float]]:
    """Errors of (output, input-or-loss gradient, model) against eager's: out, dx, worst param."""
    rtol, atol = TOLERANCES[dtype]
    found = {"out": compare(got[0], want[0], rtol, atol)}
    if got[1] is not None:
        found["dx"] = compare(got[1], want[1], rtol, GRAD_FACTOR * atol)
    worst_name, worst = "none", {"max_abs": 0.0, "max_rel": 0.0, "ratio": 0.0}
    for (name, p_got), (_, p_want) in zip(
        got[2].named_parameters(), want[2].named_parameters(), strict=True
    ):
        if p_got.grad is None or p_want.grad is None:
            continue
        err = compare(p_got.grad, p_want.grad, rtol, GRAD_FACTOR * atol)
        if err["ratio"] >= worst["ratio"]:
            worst_name, worst = name, err
    found[f"d{worst_name}"] = worst
    return found


def _compile(function: Any, mode: str, *, fullgraph: bool = True) -> Any:
    import torch

    chosen = None if mode == "default" else mode
    return torch.compile(function, fullgraph=fullgraph, mode=chosen)


def _new_step(mode: str) -> None:
    # CUDA graphs (reduce-overhead) reuse their output buffers: each iteration is marked.
    if mode == "reduce-overhead":
        import torch

        # Through Any: torch leaves this function unannotated, and mypy must judge this file the
        # same with torch installed and without it (where torch is Any already).
        compiler: Any = torch.compiler
        compiler.cudagraph_mark_step_begin()


def _row(
    breaks: dict[str, Any], errors: dict[str, dict[str, float]], times: dict[str, float]
) -> dict[str, Any]:
    if "limit" in breaks:
        graphs = f"{breaks['limit']}; without fullgraph {breaks['graphs']} graphs"
        passed, reason = within(errors, graphs)
    else:
        passed, reason = verdict(breaks, errors)
    return {"passed": passed, "reason": reason, **breaks, "errors": errors, **times}


def check_block(
    block: Block, dtype: str, *, d_model: int, seqlen: int, batch: int, mode: str, iters: int
) -> dict[str, Any]:
    """One block in one dtype: breaks, compiled vs eager forward + backward, and their times."""
    import torch

    cls = getattr(importlib.import_module(block.module), block.name)
    torch.manual_seed(0)
    eager = cls(d_model, **dict(block.kwargs), device="cuda", dtype=getattr(torch, dtype))
    compiled_model = copy.deepcopy(eager)
    x = torch.randn(batch, seqlen, d_model, device="cuda", dtype=eager.in_proj.weight.dtype)
    grad = torch.randn_like(x)

    def step(model: Any, inp: Any) -> Any:
        _new_step(mode if model is not eager else "default")
        model.zero_grad(set_to_none=True)
        inp.grad = None  # accumulating would read a CUDA graph's overwritten output
        out = model(inp)
        out.backward(grad)
        return out.detach().clone()

    x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_eager = step(eager, x_eager)
    breaks = graph_breaks(compiled_model, x.clone().requires_grad_())
    compiled = _compile(compiled_model, mode)
    try:
        y_compiled = step(compiled, x_compiled)
    except Exception as exc:  # fullgraph refused a break
        compiled = _compile(compiled_model, mode, fullgraph=False)
        limited = graph_limit(failure(exc), breaks, lambda: step(compiled, x_compiled))
        if isinstance(limited, dict):
            return limited
        y_compiled, breaks = limited
    errors = errors_against(
        dtype, (y_compiled, x_compiled.grad, compiled_model), (y_eager, x_eager.grad, eager)
    )
    times = {
        "eager_ms": timed_ms(lambda: step(eager, x_eager), iters),
        "compiled_ms": timed_ms(lambda: step(compiled, x_compiled), iters),
    }
    return _row(breaks, errors, times)


def check_lm(
    layer: str, dtype: str, *, d_model: int, seqlen: int, batch: int, mode: str, iters: int
) -> dict[str, Any]:
    """MambaLMHeadModel (two `layer` layers): a training step (forward, loss, backward, SGD step)
    compiled against eager, then the loss after the step; and both steps timed (no optimizer)."""
    import torch
    import torch.nn.functional as F
    from mamba_ssm.models.config_mamba import MambaConfig
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    config = MambaConfig(d_model=d_model, n_layer=2, vocab_size=1024, ssm_cfg={"layer": layer})
    torch.manual_seed(0)
    eager = MambaLMHeadModel(config, device="cuda", dtype=getattr(torch, dtype))
    compiled_model = copy.deepcopy(eager)
    ids = torch.randint(0, config.vocab_size, (batch, seqlen), device="cuda")
    labels = ids.roll(-1, dims=1)

    def loss_of(model: Any, tokens: Any) -> Any:
        logits = model(tokens).logits
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())

    def step(model: Any, loss_fn: Callable[..., Any]) -> Any:
        _new_step(mode if loss_fn is not loss_of else "default")
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model, ids)
        loss.backward()
        return loss.detach().clone()

    loss_eager = step(eager, loss_of)
    breaks = graph_breaks(loss_of, compiled_model, ids)
    compiled_loss = _compile(loss_of, mode)
    try:
        loss_compiled = step(compiled_model, compiled_loss)
    except Exception as exc:  # fullgraph refused a break
        compiled_loss = _compile(loss_of, mode, fullgraph=False)
        limited = graph_limit(failure(exc), breaks, lambda: step(compiled_model, compiled_loss))
        if isinstance(limited, dict):
            return limited
        loss_compiled, breaks = limited
    errors = errors_against(dtype, (loss_compiled, None, compiled_model), (loss_eager, None, eager))
    for model in (eager, compiled_model):
        torch.optim.SGD(model.parameters(), lr=0.1).step()
    with torch.no_grad():
        _new_step(mode)
        after = (compiled_loss(compiled_model, ids).detach().clone(), loss_of(eager, ids))
    rtol, atol = TOLERANCES[dtype]
    errors["loss_after_step"] = compare(after[0], after[1], rtol, atol)
    times = {
        "eager_ms": timed_ms(lambda: step(eager, loss_of), iters),
        "compiled_ms": timed_ms(lambda: step(compiled_model, compiled_loss), iters),
    }
    return _row(breaks, errors, times)


def failure(exc: BaseException) -> str:
    """One line for an exception: its first line, and for a dynamo error the user-code line it
    names last ("from user code: ... File X, line N")."""
    text = f"{type(exc).__name__}: {exc}"
    lines = [line for line in text.splitlines() if line.strip()]
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:  # a wrapper ("backend='inductor' raised:")
        first = f"{first} {lines[1].strip()}"
    first = first[:300]
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)', text.split("from user code:")[-1])
    if "from user code:" in text and frames:
        path, line, function = frames[-1]
        return f"{first} (at {path}:{line} in {function})"
    return first


def _guarded(check: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A check whose failure (a break under fullgraph, a kernel error) is reported, not raised."""
    try:
        return check()
    except Exception as exc:  # the failure is the finding
        traceback.print_exc()  # the whole of it on stderr, for whoever reads the log
        return {"passed": False, "reason": failure(exc)}


def run(
    blocks: Sequence[str],
    lm_layers: Sequence[str],
    dtypes: Sequence[str],
    *,
    seqlen: int,
    batch: int,
    mode: str = "default",
    iters: int = 10,
    d_model: int = D_MODEL,
) -> dict[str, Any]:
    """Every block and LM layer kind in every dtype; passed when none failed."""
    import torch

    shape = {"d_model": d_model, "seqlen": seqlen, "batch": batch, "iters": iters}
    rows = []
    for block in (b for b in BLOCKS if b.name in blocks):
        for dtype in dtypes:
            found = _guarded(lambda: check_block(block, dtype, mode=mode, **shape))  # noqa: B023
            rows.append(_shown({"model": block.name, "dtype": dtype, **found}))
    for layer in lm_layers:
        for dtype in dtypes:
            found = _guarded(lambda: check_lm(layer, dtype, mode=mode, **shape))  # noqa: B023
            rows.append(_shown({"model": f"MambaLMHeadModel[{layer}]", "dtype": dtype, **found}))
    return {
        "passed": bool(rows) and all(r["passed"] for r in rows),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "mode": mode,
        **shape,
        "rows": rows,
    }


def _shown(row: dict[str, Any]) -> dict[str, Any]:
    """row, after printing its line on stderr (a long run shows each result as it comes)."""
    print(summary_lines({"rows": [row]})[0], file=sys.stderr, flush=True)
    return row


def summary_lines(report: dict[str, Any]) -> list[str]:
    """One line per row: 'Mamba bfloat16 ok: 1 graph, 0 breaks; ... compiled/eager 0.91'."""
    lines = []
    for row in report.get("rows", []):
        ratio = ""
        if row.get("eager_ms"):
            ratio = f"; compiled/eager {row['compiled_ms'] / row['eager_ms']:.2f}"
        verdict_word = "ok" if row["passed"] else "FAIL"
        lines.append(f"{row['model']} {row['dtype']} {verdict_word}: {row['reason']}{ratio}")
        if not row["passed"] and row.get("reasons"):
            count = f"{row['graphs']} graphs, {row['breaks']} breaks"
            lines.append(f"  explain: {count}: " + " | ".join(row["reasons"]))
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    found = report(argv)
    if _parser().parse_args(argv).json:
        print(json.dumps(found, default=str))
    return 0  # the verdict is the report's "passed", as for every runner


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    parser = _parser()
    args = parser.parse_args(argv)
    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    sizes = (args.seqlen, args.batch, args.iters, args.d_model)
    if not dtypes or set(dtypes) - set(DTYPES) or min(sizes) < 1 or args.d_model % 64:
        parser.error(
            f"--dtypes from {', '.join(DTYPES)}; --seqlen, --batch, --iters >= 1; --d-model a "
            "multiple of 64"
        )
    # Both blocks unless the call names blocks or LM layers (then only those).
    blocks = args.block or ([] if args.lm else [b.name for b in BLOCKS])
    shape = {"seqlen": args.seqlen, "batch": args.batch, "iters": args.iters}
    return run(blocks, args.lm, dtypes, mode=args.mode, d_model=args.d_model, **shape)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m mambawin.verify.runners.compile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--block", action="append", choices=[b.name for b in BLOCKS])
    parser.add_argument("--lm", action="append", default=[], choices=LM_LAYERS)
    parser.add_argument("--dtypes", default="bfloat16")
    parser.add_argument("--seqlen", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=D_MODEL)
    parser.add_argument("--mode", default="default", choices=MODES)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    return parser


if __name__ == "__main__":
    sys.exit(main())
