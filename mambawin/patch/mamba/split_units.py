"""split-units: each selective_scan unit compiles as several translation units, in parallel.

Why: one `selective_scan_bwd_*_real.cu` holds every kernel of its dtype: 5 launch configs
(kNThreads, kNItems) × 32 BOOL_SWITCH branches. Measured on the 16-core GPU machine (issue 17),
the three bwd units take 82–98 s each while the whole extension is 376 core-seconds: the longest
unit, not the cores, sets the build time (parallelism 3.85 on 16 cores).

How: the dispatcher `selective_scan_{fwd,bwd}_cuda<input_t, weight_t>` (in the kernel header)
calls `selective_scan_{fwd,bwd}_launch<kNThreads, kNItems, input_t, weight_t>` once per launch
config of its CUDA branch. The configs go in contiguous groups; the unit keeps the first: before
its explicit instantiations, an `extern template` declaration of every config of the other groups
keeps it from instantiating those, so its dispatcher compiles the first group's launchers and
kernels itself. New files `<unit>_partK.cu` (the unit's own text with the launchers of group K+1
instantiated instead of the dispatcher) hold the other groups, and setup.py lists them after the
unit. The kernels are the same template instantiations with the same flags
(tests/test_split_equivalence.py compares their SASS kernel by kernel); only which object holds
them changes. ROCm builds are untouched (`#ifndef USE_ROCM`): their configs differ and stay in
the unit.

How many objects, the unit included (OBJECTS, issue 27: one arch, sm_90, on a 16-core H100):
every translation unit costs about 7 s before any kernel (preprocessing, cudafe++, cicc's parse,
the host compile), so a unit compiling only its dispatcher is pure overhead. A fwd dtype costs
62–70 s split (unit and 5 parts) against ~31 s whole. The bwd configs cost about 9, 13.5, 19, 20
and 24.5 s (rising with kNItems), so for one or two archs, whose units are single-threaded, bwd
becomes 4 objects, the two small configs sharing the unit, and fwd 2 (~20 s each): with 28 units
of 25-40 s the pair's 16 jobs ran two rounds of long units and the second left cores idle; the
fwd halves fill them (a model of the pool fed with one H200 run's unit times: a 77.5 s compile
becomes 70.7 s for 2 % more work; docs/benchmarks.md §22). The count follows nvcc's front-end
passes (one per arch; where any unit is proven to share passes, the passes a proven unit gets:
patch/arch_groups.py), since
cicc runs once per pass and is most of a unit's time: with more than two passes nvcc's `--threads`
already runs a unit's passes in parallel, so bwd becomes 2 and fwd stays whole (docs/benchmarks.md
§12: 5 parts at four archs oversubscribed the cores); four archs in two passes get the finer split,
so that no unit, now doing less work, outlasts the pool. It depends on the archs and the proofs
only, never on this machine's cores, so the tree (and the wheel) is the same wherever it is built.
"""

from __future__ import annotations

import re
from typing import TypeVar

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree
from mambawin.patch.setup_py import compile_order

ID = "split-units"
T = TypeVar("T")
SETUP = "setup.py"
KERNELS = "csrc/selective_scan"
KINDS = {  # kind: (kernel header, dispatcher, launcher, params type)
    "fwd": (
        "selective_scan_fwd_kernel.cuh",
        "selective_scan_fwd_cuda",
        "selective_scan_fwd_launch",
        "SSMParamsBase",
    ),
    "bwd": (
        "selective_scan_bwd_kernel.cuh",
        "selective_scan_bwd_cuda",
        "selective_scan_bwd_launch",
        "SSMParamsBwd",
    ),
}
DTYPES = ("fp32", "fp16", "bf16")
UNITS = tuple(
    [f"selective_scan_fwd_{d}" for d in DTYPES]
    + [f"selective_scan_bwd_{d}_{k}" for d in DTYPES for k in ("real", "complex")]
)
OBJECTS = {  # kind: (objects for one or two front-end passes, for more), the unit included
    "fwd": (2, 1),
    "bwd": (4, 2),
}
# The largest part index any count makes: the files a split may write or delete.
MAX_PARTS = max(n for counts in OBJECTS.values() for n in counts) - 1
# Estimated seconds of one busy H100 core at sm_90 (issue 27), for the compile order only (the
# setup.py block of setup_py/compile_order.py): what any unit costs before its first kernel, each
# bwd launch config's kernels (they rise with kNItems), fwd's as a share of bwd's (a fwd unit
# whole took ~31 s, bwd ~93 s), and the binding with -g0. An unknown config counts as the mean.
UNIT_S = 7.0
BWD_CONFIG_S = {("32", "4"): 9.0, ("32", "8"): 13.5, ("32", "16"): 19.0, ("64", "16"): 20.0}
BWD_CONFIG_S[("128", "16")] = 24.5
FWD_SHARE = 0.28
BINDING = "selective_scan.cpp"
BINDING_S = 18.0
MARK = f"mambawin {ID}"
_SOURCE_LINE = re.compile(
    rf'^(?P<indent>[ \t]*)"{KERNELS}/(?P<unit>selective_scan_(?:fwd|bwd)_\w+?)\.cu",[ \t]*$',
    re.MULTILINE,
)


def part_name(unit: str, k: int) -> str:
    return f"{unit}_part{k}"


def objects_for(kind: str, passes: int) -> int:
    """How many objects a unit of kind becomes, itself included, for nvcc's number of front-end
    passes (see the module docstring)."""
    few, many = OBJECTS[kind]
    return few if passes <= 2 else many


def launch_configs(header: str, dispatcher: str, launcher: str) -> list[tuple[str, str]]:
    """The (kNThreads, kNItems) the dispatcher's CUDA branch launches, in its order."""
    body = re.search(
        rf"^void {dispatcher}\([^)]*\)\s*\{{\n(?P<body>.*?)^\}}", header, re.MULTILINE | re.DOTALL
    )
    if body is None:
        return []
    cuda = cuda_lines(body["body"])
    found = re.findall(rf"{launcher}<\s*(\d+)\s*,\s*(\d+)\s*,\s*input_t\s*,\s*weight_t\s*>", cuda)
    return list(dict.fromkeys(found))


def cuda_lines(text: str) -> str:
    """text as a CUDA build sees it: the lines of `#ifdef USE_ROCM` / `#ifndef USE_ROCM … #else`
    branches dropped. Tags differ in where the ROCm branches sit (v2.1.0 picks the warp size in a
    `#ifndef USE_ROCM … #else … #endif` before the launches; later tags wrap the launches), so
    the branches are followed, not split at the first `#else`. Other conditionals stay."""
    kept: list[str] = []
    stack: list[tuple[bool, bool]] = []  # (is a USE_ROCM conditional, this branch is CUDA's)
    for line in text.split("\n"):
        directive = line.strip()
        if directive.startswith("#if"):
            rocm = directive.split()[-1] == "USE_ROCM" and directive.split()[0] in {
                "#ifdef",
                "#ifndef",
            }
            stack.append((rocm, not rocm or directive.startswith("#ifndef")))
        elif directive.startswith("#else") and stack:
            rocm, active = stack[-1]
            stack[-1] = (rocm, active if not rocm else not active)
        elif directive.startswith("#endif") and stack:
            stack.pop()
        elif all(active for _, active in stack):
            kept.append(line)
    return "\n".join(kept)


def groups(items: list[T], parts: int) -> list[list[T]]:
    """items in `parts` contiguous groups, the first ones one larger when they do not divide
    (causal-conv1d's split groups its dtype combinations with it too)."""
    size, extra = divmod(len(items), parts)
    out: list[list[T]] = []
    start = 0
    for k in range(parts):
        end = start + size + (1 if k < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Split every selective_scan unit setup.py compiles into its parts."""
    setup = tree.read(SETUP)
    if MARK in setup:
        return "already-applied"
    listed = [m["unit"] for m in _SOURCE_LINE.finditer(setup) if m["unit"] in UNITS]
    if not listed:
        raise ctx.drift(SETUP, f'"{KERNELS}/selective_scan_bwd_fp32_real.cu",')
    passes = ctx.front_end().split_passes
    new_lines = {
        unit: split_unit(tree, ctx, unit, objects_for(kind(unit), passes)) for unit in listed
    }
    estimates = {
        f"{name}.cu": seconds
        for unit in listed
        for name, seconds in _estimates(tree, unit, objects_for(kind(unit), passes))
    }
    if f'"{KERNELS}/{BINDING}"' in setup:
        estimates[BINDING] = BINDING_S
    ordered, _ = compile_order.with_order(_list_parts(setup, new_lines), estimates, ctx)
    tree.write(SETUP, ordered)
    return "applied"


def kind(unit: str) -> str:
    return "fwd" if "_fwd_" in unit else "bwd"


def object_groups(configs: list[tuple[str, str]], objects: int) -> list[list[tuple[str, str]]]:
    """The launch configs of each object, the unit's first."""
    return groups(configs, max(1, min(objects, len(configs))))


def _estimates(tree: Tree, unit: str, objects: int) -> list[tuple[str, float]]:
    """Each object of unit (the unit, its parts) and its estimated seconds."""
    header, dispatcher, launcher, _ = KINDS[kind(unit)]
    configs = launch_configs(tree.read(f"{KERNELS}/{header}"), dispatcher, launcher)
    share = 1.0 if kind(unit) == "bwd" else FWD_SHARE
    mean = sum(BWD_CONFIG_S.values()) / len(BWD_CONFIG_S)
    names = [unit, *(part_name(unit, k) for k in range(1, objects))]
    return [
        (name, UNIT_S + share * sum(BWD_CONFIG_S.get(c, mean) for c in group))
        for name, group in zip(
            names, object_groups(configs, objects) if configs else [[]], strict=False
        )
    ]


def split_unit(tree: Tree, ctx: PatchContext, unit: str, objects: int) -> list[str]:
    """Make unit `objects` translation units (fewer when its dispatcher has fewer launch
    configs): the unit keeps the first group of configs, its parts the others. The part names for
    setup.py; 1 object leaves the unit whole."""
    configs = _configs(tree, ctx, unit) if objects > 1 else []
    parts = object_groups(configs, objects) if configs else []
    names = [part_name(unit, k) for k in range(1, len(parts))]
    if names:
        _write_split(tree, ctx, unit, parts, names)
    for k in range(len(names) + 1, MAX_PARTS + 1):  # a re-patch with fewer parts
        if tree.exists(f"{KERNELS}/{part_name(unit, k)}.cu"):
            tree.delete(f"{KERNELS}/{part_name(unit, k)}.cu")
    return names


def _configs(tree: Tree, ctx: PatchContext, unit: str) -> list[tuple[str, str]]:
    """The launch configs of unit's dispatcher; drift unless there are at least two to split."""
    header, dispatcher, launcher, _ = KINDS[kind(unit)]
    configs = launch_configs(tree.read(f"{KERNELS}/{header}"), dispatcher, launcher)
    if len(configs) < 2:
        raise ctx.drift(
            f"{KERNELS}/{header}", f"{launcher}<32, 4, input_t, weight_t>(params, stream);"
        )
    return configs


def _write_split(
    tree: Tree,
    ctx: PatchContext,
    unit: str,
    parts: list[list[tuple[str, str]]],
    names: list[str],
) -> None:
    """The unit, declaring extern the launchers of every group but the first, and one part file
    per other group, instantiating its launchers."""
    _, dispatcher, launcher, params = KINDS[kind(unit)]
    path = f"{KERNELS}/{unit}.cu"
    text = tree.read(path)
    inst = re.compile(
        rf"^template void {dispatcher}<(?P<types>[^>]+)>\([^)]*\);[ \t]*$", re.MULTILINE
    )
    first = inst.search(text)
    if first is None:
        raise ctx.drift(path, f"template void {dispatcher}<float, float>(...);")
    types = [m["types"].strip() for m in inst.finditer(text)]
    signature = f"({params} &params, cudaStream_t stream);"

    def launches(selected: list[tuple[str, str]], prefix: str) -> str:
        return "".join(
            f"{prefix}template void {launcher}<{t}, {i}, {ty}>{signature}\n"
            for t, i in selected
            for ty in types
        )

    others = [config for group in parts[1:] for config in group]
    where = f"{names[0]}.cu" + (f" to {names[-1]}.cu" if len(names) > 1 else "")
    extern = (
        f"// {MARK}: launch configs {_listing(parts[0])} here, the others in {where}\n"
        "// (compiled in parallel with this unit; same kernels, same flags).\n"
        f"#ifndef USE_ROCM\n{launches(others, 'extern ')}#endif\n"
    )
    tree.write(path, text[: first.start()] + extern + text[first.start() :])
    # A part is the unit's own text (its includes and comments), launchers instead of dispatcher.
    body = inst.sub("", text).rstrip("\n") + "\n"
    for name, selected in zip(names, parts[1:], strict=True):
        tree.write(
            f"{KERNELS}/{name}.cu",
            f"// {MARK}: part of {unit}.cu, launch configs {_listing(selected)} (generated).\n"
            f"{body}\n#ifndef USE_ROCM\n{launches(selected, '')}#endif\n",
        )


def _listing(configs: list[tuple[str, str]]) -> str:
    return ", ".join(f"({t}, {i})" for t, i in configs)


def _list_parts(setup: str, parts: dict[str, list[str]]) -> str:
    def add(match: re.Match[str]) -> str:
        names = parts.get(match["unit"], [])
        extra = "".join(f'\n{match["indent"]}"{KERNELS}/{name}.cu",  # {MARK}' for name in names)
        return match.group(0) + extra

    return _SOURCE_LINE.sub(add, setup)


PATCH = Patch(
    id=ID,
    summary="Compile each selective_scan bwd unit as several translation units, split by launch "
    "config.",
    prevents="builds that wait minutes on three bwd units while most cores idle "
    "(no Windows error: build speed)",
    versions=SpecifierSet(">=1.0.0"),
    why="the longest unit, not the cores, set the build time (parallelism 3.85 of 16); "
    "a part costs ~7 s before any kernel, so a unit keeps a group of its own",
    files=(
        SETUP,
        *(f"{KERNELS}/{unit}.cu" for unit in UNITS),
        *(f"{KERNELS}/{part_name(u, k)}.cu" for u in UNITS for k in range(1, MAX_PARTS + 1)),
    ),
    transform=transform,
)
