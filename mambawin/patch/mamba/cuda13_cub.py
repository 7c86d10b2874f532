"""cuda13-cub: reverse_scan.cuh stops calling CUB helpers that CUDA 13 (CCCL 3) removed.

Why: tags before v2.2.6 call `cub::LaneId()` and `cub::CTA_SYNC()`; CCCL 3 dropped both, so nvcc 13
fails with `error: namespace "cub" has no member "LaneId"` (state-spaces/mamba#772). Upstream fixed
it in v2.2.6 (PR #776) with `threadIdx.x & 0x1f` and `__syncthreads()`; this patch makes the same
replacement, comment included, so older tags build with CUDA 13.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

REVERSE_SCAN = "csrc/selective_scan/reverse_scan.cuh"
ANCHOR = ": lane_id(cub::LaneId())"
FIXED = "lane_id(threadIdx.x & 0x1f)"
REPLACEMENTS = (("cub::LaneId()", "threadIdx.x & 0x1f"), ("cub::CTA_SYNC()", "__syncthreads()"))
_ANCHOR = re.compile(r"lane_id\(\s*cub::LaneId\(\)\s*\)")


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace cub::LaneId()/cub::CTA_SYNC() the way upstream v2.2.6 did."""
    if not tree.exists(REVERSE_SCAN):
        raise ctx.drift(REVERSE_SCAN, ANCHOR)
    text = tree.read(REVERSE_SCAN)
    if not _ANCHOR.search(text):
        if FIXED in text and "cub::CTA_SYNC()" not in text:
            return "already-applied"
        raise ctx.drift(REVERSE_SCAN, ANCHOR)
    for old, new in REPLACEMENTS:
        text = text.replace(old, new)
    tree.write(REVERSE_SCAN, text)
    return "applied"


PATCH = Patch(
    id="cuda13-cub",
    summary="reverse_scan.cuh: cub::LaneId()/cub::CTA_SYNC() -> threadIdx.x & 0x1f/__syncthreads()",
    prevents='error: namespace "cub" has no member "LaneId"',
    versions=SpecifierSet(">=1.0.0,<2.2.6"),
    why="CUDA 13 / CCCL 3 removed both helpers (state-spaces/mamba#772); upstream PR #776 (v2.2.6)",
    files=(REVERSE_SCAN,),
    transform=transform,
)
