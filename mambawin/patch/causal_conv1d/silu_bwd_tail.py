"""silu-bwd-tail: the SiLU backward reloads the whole tail of the previous chunk.

Why: with SiLU, causal_conv1d_bwd_kernel (channel-first layout) recomputes the forward output to
get SiLU's derivative, and for that thread 0 of each chunk after the first loads the last kNElts
inputs of the chunk before. When the sequence is not a multiple of kNElts (the element-wise
load path), it does so under the condition

    if (chunk * kChunkSize + i < params.seqlen) { x_vals_load[i] = x[-kNElts + i]; }

which tests the *current* chunk's position although `x[-kNElts + i]` lies in the previous,
always full, chunk. When the last chunk holds fewer than kNElts positions (seqlen mod 512 in 1..3
for float32, seqlen mod 1024 in 1..7 for float16/bfloat16), the inputs it needs stay 0, the
recomputed output around the chunk edge is wrong and so is dx there (by 1 to 7 on random data;
the output itself is right). Found by `mambawin verify`'s conv step on an H100 and confirmed
against upstream's own causal_conv1d_ref over every length from 127 to 4097 (docs/benchmarks.md
§10); upstream's test grid has no such length. Mamba's `mamba_inner_fn` calls this backward with
SiLU on the channel-first layout, so Mamba training at such lengths gets wrong gradients. The fix
drops the condition: the previous chunk lies wholly inside the sequence. Every tag has the line.
"""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

BWD = "csrc/causal_conv1d_bwd.cu"
ANCHOR = "if (chunk * kChunkSize + i < params.seqlen) { x_vals_load[i] = x[-kNElts + i]; }"
FIXED = "x_vals_load[i] = x[-kNElts + i];  // mambawin silu-bwd-tail: the previous chunk is whole"


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace the one conditional load with the unconditional one."""
    if not tree.exists(BWD):
        raise ctx.drift(BWD, ANCHOR)
    text = tree.read(BWD)
    count = text.count(ANCHOR)
    if count == 1:
        tree.write(BWD, text.replace(ANCHOR, FIXED))
        return "applied"
    if count == 0 and FIXED in text:
        return "already-applied"
    raise ctx.drift(BWD, ANCHOR)


PATCH = Patch(
    id="silu-bwd-tail",
    summary="causal_conv1d_bwd.cu: the SiLU backward loads the previous chunk's tail whole "
    "(wrong dx when seqlen mod chunk < elements per load)",
    prevents="wrong dx (off by 1 to 7) near the last chunk edge from causal_conv1d_fn(..., "
    "activation='silu') backward, channel-first, e.g. seqlen 1025 in float16 or 513 in float32",
    versions=SpecifierSet(">=1.0.0"),
    why="an upstream kernel bug in every tag: the bounds check tests the current chunk's "
    "position for a load from the previous chunk; found by mambawin verify's conv step",
    files=(BWD,),
    transform=transform,
)
