"""cuda-torch-check: causal-conv1d v1.3.0's setup.py refuses to build without a visible GPU.

Why: v1.3.0 (only) stops at module level with
    RuntimeError: CUDA/HIP not available within Pytorch. causal_conv1d is intended for a
    CUDA/HIP-enabled Pytorch installation.
when `torch.cuda.is_available()` is False: on every machine without a GPU, which includes
GitHub's Windows runners and the Linux machine where `mambawin check --windows` found it. What the
message asks for is a CUDA (or HIP) build of torch, which `torch.version.cuda`/`.hip` say without a
GPU; the check is rewritten to ask exactly that. Anchor-driven: a setup.py without the line is
`not-applicable` (every other tag), one with it in another shape is drift.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

ID = "cuda-torch-check"
SETUP = "setup.py"
ANCHOR = "if not torch.cuda.is_available():"
ORIGINAL = re.compile(r"^if not torch\.cuda\.is_available\(\):[ \t]*$", re.MULTILINE)
REPLACEMENT = (
    'if getattr(torch.version, "cuda", None) is None and getattr(torch.version, "hip", None) '
    f"is None:  # mambawin {ID}: was torch.cuda.is_available() (needs a GPU)"
)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Ask whether torch is a CUDA/HIP build instead of whether a GPU is visible."""
    text = tree.read(SETUP)
    if f"# mambawin {ID}:" in text:
        return "already-applied"
    if "torch.cuda.is_available()" not in text:
        return "not-applicable"
    found = ORIGINAL.search(text)
    if found is None:
        raise ctx.drift(SETUP, ANCHOR)
    tree.write(SETUP, text[: found.start()] + REPLACEMENT + text[found.end() :])
    return "applied"


PATCH = Patch(
    id=ID,
    summary="Require a CUDA/HIP build of torch, not a visible GPU, in setup.py (v1.3.0).",
    prevents="RuntimeError: CUDA/HIP not available within Pytorch (setup.py on a machine or CI "
    "runner without a GPU)",
    versions=SpecifierSet(">=1.0.0"),
    why="v1.3.0's setup.py raises when torch.cuda.is_available() is False; found by "
    "`mambawin check --windows` on a machine without a GPU",
    files=(SETUP,),
    transform=transform,
)
