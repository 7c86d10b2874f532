"""What a patched setup.py would compile, read from its text: no Python runs it.

`build --plan` must work with no torch, no CUDA and no compiler, and upstream's setup.py cannot
even be imported without them (it calls `nvcc -V` at import: with a CPU-only torch it dies with
`NameError: bare_metal_version`). The plan needs only the extension's name and source list, and
both are literals in every upstream tag (mamba-ssm v1.0.0 ... main, causal-conv1d v1.0.0 ...
v1.6.x) and in the lines mambawin's patches add (split-units lists its parts as string literals).
So the call `CUDAExtension(name=..., sources=[...])` is found in the syntax tree and its literal
arguments read; a name bound at module level to a literal list (`sources=SOURCES`) and `a + b` of
such lists are followed too. Anything else is refused with the line it could not read.

The gencode pairs come from the arch-list patch when it is in effect (it bakes exactly --arch into
setup.py, in the front-end passes patch/arch_groups.py plans); without it, upstream's own literal
`arch=compute_XX,code=sm_XX` strings are listed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mambawin.errors import BuildError
from mambawin.patch.arch_groups import FrontEnd, setup_units
from mambawin.patch.base import MARK_BEGIN, MARK_END
from mambawin.patch.record import IN_EFFECT, PatchReport
from mambawin.patch.setup_py.arch_list import ID as ARCH_LIST

SETUP = "setup.py"
# A -gencode value as upstream writes it: arch=compute_90,code=sm_90 (or code=compute_90: PTX).
_GENCODE = re.compile(r"arch=compute_\w+,code=(?:sm|compute)_\w+")
# append_nvcc_threads' return line: `["--threads", "4"]`, or as the nvcc-threads patch writes it,
# `["--threads", os.getenv("NVCC_THREADS") or "4"]`.
_THREADS = re.compile(r'"--threads",\s*(?:os\.getenv\("NVCC_THREADS"\)\s*or\s*)?"(\d+)"')


@dataclass(frozen=True)
class SetupScan:
    """The CUDA extension setup.py declares, as far as its text says."""

    ext_name: str
    sources: tuple[str, ...]
    upstream_gencode: tuple[str, ...]  # the literal -gencode values upstream's own lines hold
    # nvcc's --threads as setup.py writes it when NVCC_THREADS is unset (upstream's "4"); None
    # when its text names none.
    threads: int | None = None


def scan_setup(tree: Path) -> SetupScan:
    """The extension's name and sources and upstream's gencode literals; BuildError when the
    file cannot be read or declares no extension with literal sources."""
    path = tree / SETUP
    try:
        text = path.read_text(encoding="utf-8")
        module = ast.parse(text, filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        msg = f"cannot read {path} to plan the build: {exc}; check the source tree"
        raise BuildError(msg) from None
    names = _module_lists(module)
    for call in (n for n in ast.walk(module) if isinstance(n, ast.Call)):
        given = {k.arg: k.value for k in call.keywords if k.arg}
        if "sources" in given and _called(call.func).endswith("Extension"):
            return SetupScan(
                _string(given.get("name"), path, "name"),
                tuple(_strings(given["sources"], names, path)),
                tuple(dict.fromkeys(_GENCODE.findall(_without_mambawin(text)))),
                int(threads[1]) if (threads := _THREADS.search(text)) else None,
            )
    msg = f"{path} declares no CUDAExtension(name=..., sources=[...]): is this a source tree?"
    raise BuildError(msg)


def _called(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _module_lists(module: ast.Module) -> dict[str, ast.expr]:
    """Module-level `NAME = [...]` bindings, for `sources=NAME`."""
    found: dict[str, ast.expr] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = node.value
    return found


def _strings(node: ast.expr, names: dict[str, ast.expr], path: Path) -> list[str]:
    if isinstance(node, ast.List | ast.Tuple):
        return [_string(item, path, "sources") for item in node.elts]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _strings(node.left, names, path) + _strings(node.right, names, path)
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], {}, path)  # one level: no self-reference loops
    msg = (
        f"{path}:{getattr(node, 'lineno', 0)}: the extension's sources are no literal list; "
        "the plan reads setup.py without running it"
    )
    raise BuildError(msg)


def _string(node: ast.expr | None, path: Path, what: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    line = getattr(node, "lineno", 0)
    msg = f"{path}:{line}: the extension's {what} is no string literal; the plan cannot read it"
    raise BuildError(msg)


def _without_mambawin(text: str) -> str:
    """setup.py without the blocks mambawin's patches wrote (they name --arch, not upstream)."""
    block = rf"#\s*{re.escape(MARK_BEGIN)}.*?#\s*{re.escape(MARK_END)}[^\n]*"
    return re.sub(block, "", text, flags=re.DOTALL)


def planned_front_end(patches: PatchReport, tree: Path | None = None) -> FrontEnd | None:
    """The front-end passes the arch-list patch planned (the patch options, the package and its
    release): one per arch in setup.py, and the proven units' own; None when it is not in
    effect. tree: the patched tree, whose setup.py names the units that stay unproven."""
    if any(r.id == ARCH_LIST and r.status in IN_EFFECT for r in patches.results):
        return patches.options.front_end(patches.package, patches.version, _units(tree))
    return None


def _units(tree: Path | None) -> tuple[str, ...] | None:
    """The unit stems tree's setup.py lists; None when there is no tree or it cannot be read
    (the proofs' units are spoken of then)."""
    if tree is None:
        return None
    try:
        return setup_units((tree / "setup.py").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def planned_gencode(patches: PatchReport, scan: SetupScan) -> tuple[str, ...]:
    """The -gencode values setup.py gives nvcc: one per arch when the arch-list patch is in
    effect (it bakes them into setup.py; a proven unit's own come from the tree's table), else
    upstream's own literal list."""
    front = planned_front_end(patches)
    return front.gencode() if front is not None else scan.upstream_gencode


def front_end_json(front: FrontEnd | None) -> dict[str, Any] | None:
    """The passes as `--json` of a build and its plan carry them (None: upstream's own list)."""
    if front is None:
        return None
    return {**front.to_json(), "said": list(front.lines())}


def front_end_lines(front: FrontEnd | None) -> tuple[str, ...]:
    """What the build and its plan say of the passes (nothing for upstream's own list)."""
    return front.lines() if front is not None else ()
