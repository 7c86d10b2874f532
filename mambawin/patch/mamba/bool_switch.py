"""bool-switch: the selective_scan launchers dispatch with plain if/else instead of BOOL_SWITCH.

Why: MSVC, as nvcc's host compiler, rejects a `constexpr bool` declared in one BOOL_SWITCH lambda
and used as a template argument inside a nested lambda:
    selective_scan_bwd_kernel.cuh(493): error C2975: 'kIsEvenLen_': invalid template argument for
    'Selective_Scan_bwd_kernel_traits', expected compile-time constant expression
(state-spaces/mamba#12). The fwd launcher's non-static `constexpr int kNRows` is the same problem.
From v2.1.0 the launch bodies also hold `#ifndef USE_ROCM ... #endif` inside the macro arguments,
which is undefined behaviour that MSVC rejects (causal-conv1d PR #93 and mamba's unmerged PR #846
work around it). This patch parses each launcher (signature line through its column-0 `}`) and
regenerates it: the innermost body becomes a function template over every switched bool, and one
small template per BOOL_SWITCH level picks true/false with if/else. The kernels instantiated are
exactly the stock ones (tests/test_compile_equivalence.py proves it with nvcc).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

KERNELS = "csrc/selective_scan"
FWD = f"{KERNELS}/selective_scan_fwd_kernel.cuh"
BWD = f"{KERNELS}/selective_scan_bwd_kernel.cuh"
STATIC_SWITCH = f"{KERNELS}/static_switch.h"
LAUNCHERS = {FWD: "selective_scan_fwd_launch", BWD: "selective_scan_bwd_launch"}

MARKER = "// mambawin bool-switch:"
_SWITCH = re.compile(r"^\s*BOOL_SWITCH\((?P<cond>.+),\s*(?P<name>\w+)\s*,\s*\[&\]\s*\{\s*$")
_PREAMBLE_OK = re.compile(r"^\s*(//.*|(static\s+)?constexpr\s+\w+\s+\w+\s*=[^;]*;\s*)?$")
# static_switch.h: `constexpr bool CONST_NAME = true;` padded to the column of the backslashes.
_SWITCH_CONST = re.compile(r"(?<!static )constexpr bool CONST_NAME = (true|false);( *)")


@dataclass(frozen=True)
class Launcher:
    """One parsed `template<...> void NAME(...) { BOOL_SWITCH(...) ... }` function."""

    name: str
    tparams: str  # "int kNThreads, int kNItems, typename input_t, typename weight_t"
    params: str  # "SSMParamsBase &params, cudaStream_t stream"
    preamble: tuple[str, ...]  # lines before the first BOOL_SWITCH (comments, kNRows)
    switches: tuple[tuple[str, str], ...]  # (condition, constexpr bool name), outermost first
    body: tuple[str, ...]  # the innermost lambda's lines, as upstream indents them
    span: tuple[int, int]  # character offsets of the whole function in the file text


def _function(name: str) -> re.Pattern[str]:
    return re.compile(
        r"^template\s*<(?P<tparams>[^>\n]*)>[ \t]*\n"
        rf"void {name}\((?P<params>[^)\n]*)\)\s*\{{[ \t]*\n(?P<inner>.*?)^\}}[ \t]*$",
        re.MULTILINE | re.DOTALL,
    )


def find_launcher(text: str, name: str) -> re.Match[str] | None:
    """The launcher `name` from its `template<...>` line through its column-0 `}`."""
    return _function(name).search(text)


def parse_launcher(match: re.Match[str], name: str) -> Launcher | None:
    """Split a matched launcher into preamble, switch chain and body; None if its shape is new."""
    lines = match.group("inner").split("\n")
    first = next((i for i, line in enumerate(lines) if "BOOL_SWITCH(" in line), None)
    if first is None or not all(_PREAMBLE_OK.match(line) for line in lines[:first]):
        return None
    chain = _split_chain(lines[first:])
    if chain is None:
        return None
    switches, body = chain
    return Launcher(
        name,
        match.group("tparams").strip(),
        match.group("params").strip(),
        tuple(lines[:first]),
        switches,
        body,
        match.span(),
    )


def _split_chain(lines: list[str]) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None:
    """(switches, innermost body) of a fully nested BOOL_SWITCH chain, or None."""
    switches: list[tuple[str, str]] = []
    while len(switches) < len(lines) and (sw := _SWITCH.match(lines[len(switches)])):
        switches.append((sw.group("cond").strip(), sw.group("name")))
    rest = _strip_blank_tail(lines[len(switches) :])
    depth = len(switches)
    if not depth or len(rest) < depth or any(line.strip() != "});" for line in rest[-depth:]):
        return None
    body = rest[:-depth]
    if any("BOOL_SWITCH(" in line for line in body):
        return None
    return tuple(switches), tuple(body)


def _strip_blank_tail(lines: list[str]) -> list[str]:
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    return lines[:end]


def _names(decls: str) -> list[str]:
    """The declared names of a parameter list: 'int kN, typename T' -> ['kN', 'T']."""
    return [re.findall(r"\w+", decl)[-1] for decl in decls.split(",") if decl.strip()]


def render(launcher: Launcher) -> str:
    """The if/else replacement: body template, one template per switch level, the launcher."""
    bools = [name for _, name in launcher.switches]
    parts = [_render_body(launcher, bools)]
    for level in reversed(range(len(bools))):
        parts.append(_render_level(launcher, bools, level))
    head = f"template<{launcher.tparams}>\nvoid {launcher.name}({launcher.params}) {{\n"
    call = _call(launcher, f"{launcher.name}_{bools[0]}", [])
    parts.append(f"{head}    {call}\n}}")
    return "\n\n".join(parts)


def _render_body(launcher: Launcher, bools: list[str]) -> str:
    tparams = ", ".join([launcher.tparams, *(f"bool {name}" for name in bools)])
    # kNRows was a non-static constexpr read inside the lambdas; static keeps MSVC happy anywhere.
    preamble = [
        re.sub(r"^(\s*)constexpr ", r"\1static constexpr ", line) for line in launcher.preamble
    ]
    body = textwrap.indent(textwrap.dedent("\n".join(launcher.body)), "    ").split("\n")
    lines = [line for line in preamble if line.strip()] + body
    note = (
        f"{MARKER} BOOL_SWITCH lambdas replaced by if/else over templates (MSVC C2975,\n"
        "// preprocessor directives inside macro arguments); same kernels as upstream."
    )
    return (
        f"{note}\ntemplate<{tparams}>\nvoid {launcher.name}_body({launcher.params}) {{\n"
        + "\n".join(line.rstrip() for line in lines)
        + "\n}"
    )


def _render_level(launcher: Launcher, bools: list[str], level: int) -> str:
    cond, name = launcher.switches[level]
    known = bools[:level]
    callee = (
        f"{launcher.name}_{bools[level + 1]}"
        if level + 1 < len(bools)
        else (f"{launcher.name}_body")
    )
    tparams = ", ".join([launcher.tparams, *(f"bool {known_name}" for known_name in known)])
    return (
        f"template<{tparams}>\nvoid {launcher.name}_{name}({launcher.params}) {{\n"
        f"    if ({cond}) {{\n        {_call(launcher, callee, [*known, 'true'])}\n"
        f"    }} else {{\n        {_call(launcher, callee, [*known, 'false'])}\n    }}\n}}"
    )


def _call(launcher: Launcher, callee: str, extra: list[str]) -> str:
    targs = ", ".join([*_names(launcher.tparams), *extra])
    return f"{callee}<{targs}>({', '.join(_names(launcher.params))});"


def _rewrite_launcher(tree: Tree, ctx: PatchContext, path: str) -> bool:
    """Rewrite one kernel header's launcher; False when it is already rewritten."""
    name = LAUNCHERS[path]
    anchor = f"void {name}("
    if not tree.exists(path):
        raise ctx.drift(path, anchor)
    text = tree.read(path)
    match = find_launcher(text, name)
    if match is None:
        raise ctx.drift(path, anchor)
    if "BOOL_SWITCH(" not in match.group("inner") and f"void {name}_body(" in text:
        return False
    launcher = parse_launcher(match, name)
    if launcher is None:
        raise ctx.drift(path, f"{anchor}...) {{ BOOL_SWITCH(COND, NAME, [&] {{ ... }}); }}")
    start, end = launcher.span
    tree.write(path, text[:start] + render(launcher) + text[end:])
    return True


def _static_constexpr(tree: Tree) -> bool:
    """Make static_switch.h declare `static constexpr bool` (PR #846); optional hardening."""
    if not tree.exists(STATIC_SWITCH):
        return False
    text = tree.read(STATIC_SWITCH)
    # Eat up to 7 pad spaces so the line-continuation backslashes stay in their column.
    new = _SWITCH_CONST.sub(
        lambda m: f"static constexpr bool CONST_NAME = {m.group(1)};" + m.group(2)[7:], text
    )
    if new == text:
        return False
    tree.write(STATIC_SWITCH, new)
    return True


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Rewrite both launchers (and harden static_switch.h)."""
    changed = [_rewrite_launcher(tree, ctx, path) for path in LAUNCHERS]
    changed.append(_static_constexpr(tree))
    return "applied" if any(changed) else "already-applied"


PATCH = Patch(
    id="bool-switch",
    summary="selective_scan launchers dispatch with if/else over templates instead of BOOL_SWITCH",
    prevents=(
        "error C2975: 'kIsEvenLen_': invalid template argument for "
        "'Selective_Scan_bwd_kernel_traits', expected compile-time constant expression"
    ),
    versions=SpecifierSet(">=1.0.0"),
    why=(
        "state-spaces/mamba#12 (MSVC C2975 on constexpr captured across BOOL_SWITCH lambdas); "
        "#ifndef USE_ROCM inside macro arguments since v2.1.0 (mamba PR #846, causal-conv1d "
        "PR #93 fix the same)"
    ),
    files=(FWD, BWD, STATIC_SWITCH),
    transform=transform,
)
