"""Per-call cost of a pair's ops in eager decoding, and tokens/s of upstream's generate.

Run where one pair is installed (a stable pair or a torch-ABI pair of the same tags), once per
pair, on the same GPU; `compare` puts two JSON reports side by side:

    python3 benchmarks/call_overhead.py measure --label stable --runs 5 --out stable.json
    python3 benchmarks/call_overhead.py measure --label torch --runs 5 --out torch.json
    python3 benchmarks/call_overhead.py compare stable.json torch.json

Measured, batch 1, float16: causal_conv1d_update (d 1536, width 4), selective_scan_fn at L 16
(d 1536, state 16), one Mamba block's `step` (d_model 768), each in microseconds per call (the
median of `runs` timings of `calls` back-to-back calls, synchronised once per timing); and
MambaLMHeadModel(d_model 768, 24 layers).generate, 256 new tokens after 16 prompt tokens, with
cg=False (eager: every layer's ops called from Python per token) and cg=True (CUDA graphs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIM, STATE, WIDTH, D_MODEL = 1536, 16, 4, 768


def per_call_us(call: Callable[[], Any], calls: int, runs: int) -> list[float]:
    """`runs` timings of `calls` back-to-back calls each, in microseconds per call."""
    import torch

    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    found = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
        found.append((time.perf_counter() - start) / calls * 1e6)
    return found


def op_calls() -> dict[str, Callable[[], Any]]:
    """The three decoding calls, on fixed inputs."""
    import torch
    from causal_conv1d import causal_conv1d_update
    from mamba_ssm.modules.mamba_simple import Mamba
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    half = {"device": "cuda", "dtype": torch.float16}
    torch.manual_seed(0)
    x, state = torch.randn(1, DIM, **half), torch.randn(1, DIM, WIDTH - 1, **half)
    weight, bias = torch.randn(DIM, WIDTH, **half), torch.randn(DIM, **half)
    u, delta = torch.randn(1, DIM, 16, **half), torch.rand(1, DIM, 16, **half)
    A = -torch.rand(DIM, STATE, device="cuda")
    B, C = torch.randn(1, STATE, 16, **half), torch.randn(1, STATE, 16, **half)
    D = torch.randn(DIM, device="cuda")
    block = Mamba(D_MODEL, layer_idx=0, **half)
    conv_state, ssm_state = block.allocate_inference_cache(1, 1)
    hidden = torch.randn(1, 1, D_MODEL, **half)
    return {
        "causal_conv1d_update": lambda: causal_conv1d_update(x, state, weight, bias, "silu"),
        "selective_scan_fn L16": lambda: selective_scan_fn(u, delta, A, B, C, D),
        "Mamba.step": lambda: block.step(hidden, conv_state, ssm_state),
    }


def tokens_per_s(cg: bool, runs: int, new_tokens: int) -> list[float]:
    """generate's tokens/s, `runs` times after one warm-up run."""
    import torch
    from mamba_ssm.models.config_mamba import MambaConfig
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    torch.manual_seed(0)
    config = MambaConfig(d_model=D_MODEL, n_layer=24, vocab_size=50277)
    model = MambaLMHeadModel(config, device="cuda", dtype=torch.float16).eval()
    prompt = torch.randint(0, 50277, (1, 16), device="cuda")
    found = []
    for run in range(runs + 1):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.generate(prompt, max_length=16 + new_tokens, cg=cg, top_k=1)
        torch.cuda.synchronize()
        if run:  # the first run captures the graphs / warms the caches
            found.append(new_tokens / (time.perf_counter() - start))
    return found


def measure(label: str, runs: int, calls: int, new_tokens: int) -> dict[str, Any]:
    import causal_conv1d
    import mamba_ssm
    import torch

    report: dict[str, Any] = {
        "label": label,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "mamba_ssm": mamba_ssm.__version__,
        "causal_conv1d": causal_conv1d.__version__,
        "us_per_call": {},
        "tokens_per_s": {},
    }
    for name, call in op_calls().items():
        report["us_per_call"][name] = per_call_us(call, calls, runs)
    for cg in (False, True):
        report["tokens_per_s"][f"generate cg={cg}"] = tokens_per_s(cg, runs, new_tokens)
    return report


def compare(first: dict[str, Any], second: dict[str, Any]) -> str:
    """A markdown table: medians (min..max) of both, and first/second."""
    a_label, b_label = first["label"], second["label"]
    lines = [f"| measure | {a_label} | {b_label} | {a_label} / {b_label} |", "|---|---|---|---|"]
    for key, unit in (("us_per_call", "µs"), ("tokens_per_s", "tok/s")):
        for name, values in first[key].items():
            a, b = statistics.median(values), statistics.median(second[key][name])
            spread = [f"{min(v):.1f}..{max(v):.1f}" for v in (values, second[key][name])]
            lines.append(
                f"| {name} ({unit}) | {a:.1f} ({spread[0]}) | {b:.1f} ({spread[1]}) | {a / b:.3f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("measure")
    run.add_argument("--label", required=True)
    run.add_argument("--runs", type=int, default=5)
    run.add_argument("--calls", type=int, default=2000)
    run.add_argument("--new-tokens", type=int, default=256)
    run.add_argument("--out", type=Path, required=True)
    both = sub.add_parser("compare")
    both.add_argument("reports", nargs=2, type=Path)
    args = parser.parse_args(argv)
    if args.command == "measure":
        report = measure(args.label, args.runs, args.calls, args.new_tokens)
        args.out.write_text(json.dumps(report, indent=1))
        print(json.dumps(report))
        return 0
    first, second = (json.loads(path.read_text()) for path in args.reports)
    print(compare(first, second))
    return 0


if __name__ == "__main__":
    sys.exit(main())
