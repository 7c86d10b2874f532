"""Where does causal_conv1d_fn's dx leave the float64 answer? (docs/benchmarks.md §10)

Run where causal-conv1d is installed, on a CUDA GPU:
    python benchmarks/conv_silu_tail.py [--json OUT.json]

Channel-first inputs, bias, with and without SiLU, widths 2-4, lengths around the kernels' chunk
edges (512 for float32, 1024 for 16-bit types), three dtypes, two seeds. For each case dx from
the installed kernel and from upstream's own pure-torch `causal_conv1d_ref` are compared with
float64; a case is "wrong" when the kernel errs more than 10 times the reference and above
1e-2. A stock causal-conv1d shows upstream's SiLU-backward tail bug (patch silu-bwd-tail); a
wheel from `mambawin build` shows none.
"""

from __future__ import annotations

import argparse
import json

LENGTHS = (127, 128, 129, 512, 513, 1023, 1024, 1025, 1026, 1537, 2048, 2049, 4097)


def one_case(dtype, width: int, seqlen: int, silu: bool, seed: int) -> dict:
    """Kernel and upstream-reference dx errors against float64 for one shape."""
    import torch
    import torch.nn.functional as F
    from causal_conv1d import causal_conv1d_fn
    from causal_conv1d.causal_conv1d_interface import causal_conv1d_ref

    torch.manual_seed(seed * 100000 + seqlen * 10 + width)
    batch, dim, act = 2, 64, "silu" if silu else None
    x = torch.randn(batch, dim, seqlen, device="cuda", dtype=dtype).requires_grad_()
    weight = torch.randn(dim, width, device="cuda")
    bias = torch.randn(dim, device="cuda")
    out = causal_conv1d_fn(x, weight, bias, activation=act)
    grad = torch.randn_like(out)
    (dx,) = torch.autograd.grad(out, (x,), grad)
    x64 = x.detach().double().requires_grad_()
    out64 = F.conv1d(
        x64, weight.double().unsqueeze(1), bias.double(), padding=width - 1, groups=dim
    )[..., :seqlen]
    out64 = F.silu(out64) if silu else out64
    (dx64,) = torch.autograd.grad(out64, (x64,), grad.double())
    x_ref = x.detach().clone().requires_grad_()
    (dx_ref,) = torch.autograd.grad(
        causal_conv1d_ref(x_ref, weight, bias, activation=act), (x_ref,), grad
    )
    err, ref_err = (dx.double() - dx64).abs(), (dx_ref.double() - dx64).abs()
    at = int(err.argmax())
    return {
        "dtype": str(dtype).removeprefix("torch."),
        "width": width,
        "seqlen": seqlen,
        "silu": silu,
        "seed": seed,
        "kernel": float(err.max()),
        "upstream_ref": float(ref_err.max()),
        "at_t": at % seqlen,
        "out_err": float((out.detach().double() - out64.detach()).abs().max()),
    }


def wrong(row: dict) -> bool:
    return row["kernel"] > 10 * max(row["upstream_ref"], 1e-6) and row["kernel"] > 1e-2


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write every case here")
    args = parser.parse_args()
    rows = [
        one_case(dtype, width, seqlen, silu, seed)
        for dtype in (torch.float32, torch.float16, torch.bfloat16)
        for width in (2, 3, 4)
        for seqlen in LENGTHS
        for silu in (False, True)
        for seed in (0, 1)
    ]
    bad = [r for r in rows if wrong(r)]
    print(f"{len(bad)} of {len(rows)} cases with a wrong dx")
    for row in bad:
        print(json.dumps(row))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
