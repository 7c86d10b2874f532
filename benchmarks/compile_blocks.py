"""Eager vs torch.compile(fullgraph=True) time of upstream's Mamba and Mamba2 blocks and of a small
MambaLMHeadModel training step, forward + backward, for several sequence lengths (thin wrapper
over verify's compile runner, which also checks zero graph breaks and the match with eager).

Run where a stable pair is installed:

    python3 benchmarks/compile_blocks.py --lengths 512,2048,8192 --dtype bfloat16 --out compile.json

and it prints the markdown table of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mambawin.verify.runners.compile import BLOCKS, LM_LAYERS, run


def table(reports: list[dict[str, Any]]) -> str:
    """The markdown table of docs/benchmarks.md: one row per model and length."""
    head = ("model", "d_model", "L", "batch", "graphs / breaks", "largest error vs eager")
    head += ("eager ms", "compiled ms", "compiled / eager")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for report in reports:
        for row in report["rows"]:
            cells = [row["model"], str(report["d_model"]), str(report["seqlen"])]
            cells.append(str(report["batch"]))
            if "eager_ms" not in row:
                cells += [f"failed: {row['reason']}", "", "", "", ""]
            else:
                name, worst = max(row["errors"].items(), key=lambda kv: kv[1]["ratio"])
                cells += [f"{row['graphs']} / {row['breaks']}", f"{name} {worst['max_abs']:.2g}"]
                cells += [f"{row['eager_ms']:.2f}", f"{row['compiled_ms']:.2f}"]
                cells.append(f"{row['compiled_ms'] / row['eager_ms']:.2f}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="512,2048,8192")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=768)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument(
        "--models",
        default="Mamba,Mamba2,LM-Mamba1,LM-Mamba2",
        help="Blocks (Mamba, Mamba2) and LMs (LM-Mamba1, LM-Mamba2), comma-separated.",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    models = args.models.split(",")
    blocks = [b.name for b in BLOCKS if b.name in models]
    layers = [layer for layer in LM_LAYERS if f"LM-{layer}" in models]
    reports = []
    for seqlen in (int(n) for n in args.lengths.split(",")):
        reports.append(
            run(
                blocks,
                layers,
                (args.dtype,),
                seqlen=seqlen,
                batch=args.batch,
                iters=args.iters,
                d_model=args.d_model,
            )
        )
        args.out.write_text(json.dumps(reports, indent=1))
    print(table(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
