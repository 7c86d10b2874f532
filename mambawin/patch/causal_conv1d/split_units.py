"""split-units: causal_conv1d_{fwd,bwd}.cu each compile as several translation units, in parallel.

Why: each unit defines its kernels, launchers and dispatchers as templates and ends with 18
explicit instantiations, `template void causal_conv1d[_channellast]_{fwd,bwd}_cuda<input_t,
weight_t>(...)`, 9 input × weight dtype combinations per layout (the same 18 lines in every tag,
v1.0.0 to main). Every kernel of the package sits behind those lines, and the bwd unit holds most
of them: per dtype combination, 3 widths × 2^(its BOOL_SWITCHes) kernels per layout, 60 in bwd
against 12 in fwd up to v1.5.x and 120 against 12 from v1.6.0. Measured on a 16-core H100 machine
(issue 17), v1.5.4's bwd unit alone took 162 of the build's 222 core-seconds and 169 s of wall:
the longest unit, not the cores, set the build time (parallelism 1.37).

How: a part `<unit>_partK.cu` is the unit's own text (after the patches before this one) with
only the instantiation lines of one group of dtype combinations kept, channel-first and
channel-last alike; the unit keeps the first group, and setup.py lists the parts right after the
unit. An explicit instantiation of a dispatcher instantiates the launchers and kernels of its own
(input_t, weight_t) only, and nothing else in the unit instantiates anything (the transform
checks it: no other explicit instantiation, no definition outside a template), so each kernel is
compiled in exactly one object, with the same flags and the same template arguments
(tests/test_split_equivalence_causal_conv1d.py compares the SASS kernel by kernel). ROCm code is
untouched: a part is the unit's text, `#ifdef USE_ROCM` branches included.

How many parts (PARTS): the 9 dtype combinations in contiguous groups, as many as nvcc's
front-end passes call for (one pass per arch; where any unit is proven to share passes, the
passes a proven unit gets: patch/arch_groups.py; cicc runs once per pass and is most of a unit's
time). For one or two
passes, which nvcc compiles single-threaded, bwd becomes 9 (one per combination, 19-32 s each on a
busy H100 core). fwd stays whole: each unit costs ~7 s before any kernel (preprocessing, cudafe++
and cicc over the headers, the host compile), and v1.5.4's fwd split in 3 took 34 s against about
20 s whole, no longer than a bwd part. For more passes nvcc's `--threads` already runs a unit's
passes in parallel (as for mamba-ssm's split, docs/benchmarks.md §12): bwd gets 3 parts. Four
archs grouped into two passes get the finer split, so that no unit, now doing less work, outlasts
the pool. No `--arch` means upstream's own list, 3 to 11 archs in every tag, so it counts as more
than two. The count depends on the archs and the proofs only, never on this machine's cores, so
the tree (and the wheel) is the same wherever it is built.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree
from mambawin.patch.mamba.split_units import groups
from mambawin.patch.setup_py import compile_order

ID = "split-units"
SETUP = "setup.py"
CSRC = "csrc"
UNITS = ("causal_conv1d_fwd", "causal_conv1d_bwd")
PARTS = {  # unit: (parts for one or two front-end passes, parts for more)
    "causal_conv1d_fwd": (1, 1),
    "causal_conv1d_bwd": (9, 3),
}
MAX_PARTS = 9
# Estimated seconds of one busy H100 core at sm_90 (issue 27), for the compile order only
# (setup_py/compile_order.py): a bwd object costs UNIT_S plus its dtype combinations', and
# float inputs compile in about half the time of half or bfloat16 ones (v1.5.4's single-combination
# parts: 18-24 s against 27-35 s); the files split-units does not split, as measured whole.
UNIT_S = 7.0
COMBO_S = {"float": 11.0}  # by input type; any other input type: OTHER_COMBO_S
OTHER_COMBO_S = 25.0
WHOLE_S = {"causal_conv1d.cpp": 23.0, "causal_conv1d_fwd.cu": 22.0, "causal_conv1d_update.cu": 7.0}
MARK = f"mambawin {ID}"
_SOURCE_LINE = re.compile(
    rf'^(?P<indent>[ \t]*)"{CSRC}/(?P<unit>causal_conv1d_(?:fwd|bwd))\.cu",[ \t]*$', re.MULTILINE
)
_INSTANCE = re.compile(
    r"^template void (?P<dispatcher>causal_conv1d(?:_channellast)?_(?:fwd|bwd)_cuda)"
    r"<(?P<types>[^<>;\n]+)>\([^)\n]*\);[ \t]*(?:\n|$)",
    re.MULTILINE,
)
# Any other explicit instantiation (or extern declaration) would be compiled in every part.
_OTHER_INSTANCE = re.compile(r"^[ \t]*(?:extern[ \t]+)?template[ \t]+(?!<)\S[^\n]*", re.MULTILINE)
# Column-0 lines that may stand outside a template: nothing they define is emitted twice.
_HARMLESS = ("template", "#", "//", "/*", "}", "static ", "inline ", "constexpr ", "using ")


def part_name(unit: str, k: int) -> str:
    return f"{unit}_part{k}"


def parts_for(unit: str, passes: int) -> int:
    """How many translation units unit becomes, itself included, for nvcc's number of front-end
    passes (0: no --arch, upstream's own list; see the module docstring)."""
    few, many = PARTS[unit]
    return few if 1 <= passes <= 2 else many


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Split causal_conv1d_fwd.cu and causal_conv1d_bwd.cu into their parts."""
    setup = tree.read(SETUP)
    if MARK in setup:
        return "already-applied"
    listed = {m["unit"] for m in _SOURCE_LINE.finditer(setup)}
    for unit in UNITS:
        if unit not in listed:
            raise ctx.drift(SETUP, f'"{CSRC}/{unit}.cu",')
    held = {unit: _split_unit(tree, ctx, unit) for unit in UNITS}
    names = {unit: [part_name(unit, k) for k in range(1, len(held[unit]))] for unit in UNITS}
    estimates = {f: s for f, s in WHOLE_S.items() if f'"{CSRC}/{f}"' in setup}
    for unit in UNITS:
        for name, group in zip([unit, *names[unit]], held[unit], strict=True):
            estimates[f"{name}.cu"] = UNIT_S + sum(_combo_s(combo) for combo in group)
    ordered, _ = compile_order.with_order(_list_parts(setup, names), estimates, ctx)
    tree.write(SETUP, ordered)
    return "applied"


def _combo_s(combo: str) -> float:
    return COMBO_S.get(combo.split(",")[0].strip(), OTHER_COMBO_S)


def _split_unit(tree: Tree, ctx: PatchContext, unit: str) -> list[list[str]]:
    """Write unit's parts and keep its first group; the dtype combinations of each object, the
    unit's first (one group: the unit stays whole)."""
    path = f"{CSRC}/{unit}.cu"
    text = tree.read(path)
    combos = list(dict.fromkeys(_types(m) for m in _INSTANCE.finditer(text)))
    if len(combos) < 2:
        raise ctx.drift(path, f"template void {unit}_cuda<float, at::Half>(...);")
    passes = ctx.front_end().split_passes
    parts = groups(combos, min(parts_for(unit, passes), len(combos)))
    names = [part_name(unit, k) for k in range(1, len(parts))]
    for k in range(len(parts), MAX_PARTS + 1):  # a re-patch with fewer parts
        if tree.exists(f"{CSRC}/{part_name(unit, k)}.cu"):
            tree.delete(f"{CSRC}/{part_name(unit, k)}.cu")
    if not names:
        return parts
    _check_nothing_else_is_emitted(ctx, path, _INSTANCE.sub("", text))
    where = f"{names[0]}.cu" + (f" to {names[-1]}.cu" if len(names) > 1 else "")
    note = f"// {MARK}: {_listing(parts[0])} here, the other dtype combinations in {where}.\n"
    tree.write(path, _keep(text, parts[0], note))
    for name, group in zip(names, parts[1:], strict=True):
        note = f"// {MARK}: part of {unit}.cu, its instantiations for {_listing(group)}.\n"
        tree.write(f"{CSRC}/{name}.cu", _keep(text, group, note))
    return parts


def _types(match: re.Match[str]) -> str:
    return ", ".join(t.strip() for t in match["types"].split(","))


def _listing(group: list[str]) -> str:
    return " ".join(f"<{combo}>" for combo in group)


def _keep(text: str, group: list[str], note: str) -> str:
    """text with only the instantiation lines of group's combinations, note before the first."""
    first = _INSTANCE.search(text)
    assert first is not None  # _split_unit found at least two

    def kept(match: re.Match[str]) -> str:
        return match.group(0) if _types(match) in group else ""

    return _INSTANCE.sub(kept, text[: first.start()] + note + text[first.start() :])


def _check_nothing_else_is_emitted(ctx: PatchContext, path: str, rest: str) -> None:
    """Drift when the unit holds code that every part would compile again (an explicit
    instantiation, or a definition at column 0 outside a template): a kernel in two objects."""
    other = _OTHER_INSTANCE.search(rest)
    if other is not None:
        raise ctx.drift(path, f"only the dispatchers' instantiations (found: {other[0].strip()})")
    previous = ""
    for line in rest.splitlines():
        defines = re.match(r"[A-Za-z_]", line) and not line.startswith(_HARMLESS)
        if defines and not previous.startswith(("template", "__global__")):
            raise ctx.drift(path, f"every definition inside a template (found: {line})")
        if line.strip():
            previous = line


def _list_parts(setup: str, parts: dict[str, list[str]]) -> str:
    def add(match: re.Match[str]) -> str:
        names = parts.get(match["unit"], [])
        extra = "".join(f'\n{match["indent"]}"{CSRC}/{name}.cu",  # {MARK}' for name in names)
        return match.group(0) + extra

    return _SOURCE_LINE.sub(add, setup)


PATCH = Patch(
    id=ID,
    summary="Compile causal_conv1d_{fwd,bwd}.cu as several translation units, split by dtype "
    "combination.",
    prevents="builds that wait minutes on the bwd unit while most cores idle "
    "(no Windows error: build speed)",
    versions=SpecifierSet(">=1.0.0"),
    why="v1.5.4's bwd unit took 162 of 222 core-seconds, parallelism 1.37 of 16",
    files=(
        SETUP,
        *(f"{CSRC}/{unit}.cu" for unit in UNITS),
        *(f"{CSRC}/{part_name(u, k)}.cu" for u in UNITS for k in range(1, MAX_PARTS + 1)),
    ),
    transform=transform,
)
