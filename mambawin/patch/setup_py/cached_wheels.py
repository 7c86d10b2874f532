"""cached-wheels: `bdist_wheel` always builds from source and never downloads a prebuilt wheel.

Why: upstream's CachedWheelsCommand.run guesses a GitHub release URL and downloads it unless
MAMBA_FORCE_BUILD is exactly "TRUE". Upstream CI publishes Linux wheels only, and the command
catches only urllib.error.HTTPError: offline, behind a proxy or with an SSL error the build dies
with URLError, and `get_wheel_url()` raises before the try (`parse(torch.version.cuda)` on CPU
torch; "ValueError: CUDA version ... not supported" from v2.2.6.post3). Seen on Windows in
state-spaces/mamba#55 ("Guessing wheel URL ... win_amd64.whl" then a traceback); unmerged PRs
#892 and #954/#957/#960/#961 touch the same code. The guard line becomes unconditional, so the
build never depends on an environment variable spelled exactly right.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

ID = "cached-wheels"
SETUP = "setup.py"
CLASS = re.compile(r"^class CachedWheelsCommand\(", re.MULTILINE)
# Every tag: `if FORCE_BUILD:`; main (#977): `if FORCE_BUILD or not KEEP_CUDA_BUILD:`.
GUARD = re.compile(
    r"^        if (?P<cond>FORCE_BUILD(?: or not KEEP_CUDA_BUILD)?):[ \t]*$", re.MULTILINE
)
APPLIED = re.compile(rf"^        if True:  # mambawin {ID}: .*$", re.MULTILINE)


def replacement(cond: str) -> str:
    """The guard line after the patch; it keeps upstream's condition in the comment."""
    return f"        if True:  # mambawin {ID}: always build from source (was: if {cond}:)"


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Make the `return super().run()` guard of CachedWheelsCommand.run unconditional."""
    text = tree.read(SETUP)
    cls = CLASS.search(text)
    if cls is None:
        raise ctx.drift(SETUP, "class CachedWheelsCommand(_bdist_wheel):")
    if APPLIED.search(text, cls.end()):
        return "already-applied"
    guard = GUARD.search(text, cls.end())
    if guard is None:
        raise ctx.drift(SETUP, "        if FORCE_BUILD:")
    tree.write(SETUP, text[: guard.start()] + replacement(guard["cond"]) + text[guard.end() :])
    return "applied"


PATCH = Patch(
    id=ID,
    summary="bdist_wheel builds from source; it never guesses and downloads a release wheel.",
    prevents="urllib.error.URLError / ValueError: CUDA version ... not supported from "
    "CachedWheelsCommand.run (only HTTPError is caught), or a downloaded Linux-only wheel",
    versions=SpecifierSet(">=1.0.0"),
    why="upstream catches only HTTPError and get_wheel_url() raises before the try "
    "(mamba#55; unmerged PRs #892, #954, #957, #960, #961)",
    files=(SETUP,),
    transform=transform,
)
