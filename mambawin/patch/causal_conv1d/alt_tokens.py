"""alt-tokens: the `and` in causal_conv1d.cpp's TORCH_CHECK conditions becomes `&&`.

Why: v1.2.0..v1.6.0 check channel-last strides with
    TORCH_CHECK(x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0, "...");
(3 lines). `and` is an ISO C++ alternative token, but cl.exe treats it as an identifier unless
/permissive- (implied by /std:c++20) or <iso646.h> is in effect, so a C++17 build stops with a
syntax error at the `and`. Upstream PR #93 ("Add MSVC
Support", fcf8672, first in v1.6.1) made exactly this replacement; only the condition (before the
message string) is touched, so the messages keep their English "and".
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, PatchOptions, Tree

CPP = "csrc/causal_conv1d.cpp"
ANCHOR = "TORCH_CHECK(x.stride(2) % 8 == 0 and x.stride(0) % 8 == 0,"
FIXED = "TORCH_CHECK(x.stride(2) % 8 == 0 && x.stride(0) % 8 == 0,"
# A TORCH_CHECK line: the condition runs up to the first `, "` (where the message starts).
_CHECK = re.compile(
    r'^(?P<head>[ \t]*TORCH_CHECK\()(?P<cond>[^"\n]*?)(?P<tail>, ".*)$', re.MULTILINE
)
_TOKENS = ((re.compile(r"\band\b"), "&&"), (re.compile(r"\bor\b"), "||"))


def _fix_condition(match: re.Match[str]) -> str:
    cond = match["cond"]
    for token, operator in _TOKENS:
        cond = token.sub(operator, cond)
    return f"{match['head']}{cond}{match['tail']}"


def replaced_by_stable(options: PatchOptions) -> str | None:
    """--abi stable: stable-binding replaces causal_conv1d.cpp, TORCH_CHECK lines included."""
    return (
        "--abi stable replaces causal_conv1d.cpp (stable-binding)"
        if options.abi == "stable"
        else None
    )


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Replace `and`/`or` in every TORCH_CHECK condition of causal_conv1d.cpp."""
    if not tree.exists(CPP):
        raise ctx.drift(CPP, ANCHOR)
    text = tree.read(CPP)
    new = _CHECK.sub(_fix_condition, text)
    if new != text:
        tree.write(CPP, new)
        return "applied"
    if FIXED in text:
        return "already-applied"
    raise ctx.drift(CPP, ANCHOR)


PATCH = Patch(
    id="alt-tokens",
    summary="causal_conv1d.cpp: `and` in TORCH_CHECK conditions -> `&&` (as upstream v1.6.1)",
    prevents="cl.exe syntax error at `and` in TORCH_CHECK(x.stride(2) % 8 == 0 and ...) "
    "(alternative tokens need /permissive-)",
    versions=SpecifierSet(">=1.2.0,<1.6.1"),
    why="cl.exe accepts alternative tokens only with /permissive-; causal-conv1d PR #93 "
    "(fcf8672, v1.6.1) made the same replacement",
    files=(CPP,),
    transform=transform,
    skip_reason=replaced_by_stable,
)
