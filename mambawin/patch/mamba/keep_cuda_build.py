"""keep-cuda-build: on upstream main the CUDA extension is built by default again.

Why: main's PR #977 (f577286, after v2.3.2.post1) made the selective_scan_cuda build opt-in through
MAMBA_KEEP_CUDA_BUILD (default FALSE) and made the import optional. A Windows build that forgets
the variable silently produces a wheel without the kernel, and Mamba-1 then fails at call time
(`_check_selective_scan_cuda()`), far from the build. Flipping the default keeps the variable
working (MAMBA_KEEP_CUDA_BUILD=FALSE still skips the extension).

Anchor-driven: the version range only rules out tags that cannot have the switch (<2.3.2); a tree
whose setup.py never mentions MAMBA_KEEP_CUDA_BUILD (every release tag so far, whose __init__
version main shares) is `not-applicable`, and a tree that mentions it in another shape is drift.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

ID = "keep-cuda-build"
SETUP = "setup.py"
NAME = "MAMBA_KEEP_CUDA_BUILD"
_LINE = r'^KEEP_CUDA_BUILD = os\.getenv\("MAMBA_KEEP_CUDA_BUILD", "{default}"\) == "TRUE"'
ORIGINAL = re.compile(_LINE.format(default="FALSE") + r"[ \t]*$", re.MULTILINE)
APPLIED = re.compile(_LINE.format(default="TRUE") + rf"  # mambawin {ID}.*$", re.MULTILINE)
ANCHOR = 'KEEP_CUDA_BUILD = os.getenv("MAMBA_KEEP_CUDA_BUILD", "FALSE") == "TRUE"'
REPLACEMENT = (
    'KEEP_CUDA_BUILD = os.getenv("MAMBA_KEEP_CUDA_BUILD", "TRUE") == "TRUE"'
    f"  # mambawin {ID}: default was FALSE"
)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Flip the default of MAMBA_KEEP_CUDA_BUILD to TRUE where setup.py has the switch."""
    text = tree.read(SETUP)
    if NAME not in text:
        return "not-applicable"
    if APPLIED.search(text):
        return "already-applied"
    found = ORIGINAL.search(text)
    if found is None:
        raise ctx.drift(SETUP, ANCHOR)
    tree.write(SETUP, text[: found.start()] + REPLACEMENT + text[found.end() :])
    return "applied"


PATCH = Patch(
    id=ID,
    summary="Build the CUDA extension by default where MAMBA_KEEP_CUDA_BUILD exists (main).",
    prevents="a wheel without selective_scan_cuda, failing only at call time in "
    "_check_selective_scan_cuda()",
    versions=SpecifierSet(">=2.3.2"),
    why="upstream main #977 (f577286) made the CUDA build opt-in via MAMBA_KEEP_CUDA_BUILD",
    files=(SETUP,),
    transform=transform,
)
