"""arch-list: the extension is compiled for exactly the archs chosen at patch time.

Why: upstream's setup.py hard-codes its `-gencode` pairs (sm_53 ... sm_121 depending on the tag and
nvcc) and never reads TORCH_CUDA_ARCH_LIST; torch's `_get_cuda_arch_flags` then returns [] because
a flag already contains "arch", and v2.3.2+ even clears the variable. Building for archs a Windows
desktop GPU never runs (Jetson sm_87/sm_110, Grace sm_121) multiplies compile time, and nvcc 13
fails outright on the sm_53..72 entries of v1.0.0..v2.2.5 ("nvcc fatal: Unsupported gpu
architecture 'compute_53'"; upstream commit da71f21). Unmerged upstream PR #856 ("Respect
TORCH_CUDA_ARCH_LIST") parses the variable instead but drops +PTX; baking the list in wins
regardless of what the environment or upstream does to TORCH_CUDA_ARCH_LIST.

setup.py always gets one `arch=compute_XY,code=sm_XY` pass per arch, so a patched tree built
without mambawin is the usual build. The units whose SASS is proven identical from a shared
virtual arch (`arch=compute_80,code=[sm_80,sm_86]`: cicc once, ptxas per arch;
patch/arch_groups.py) are listed with their passes in .mambawin/front_end.json, which mambawin's
build applies per unit through its nvcc wrapper (builder/nvcc_front.py); the file is removed
when no unit is proven.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.archs import format_archs
from mambawin.patch.arch_groups import FRONT_TABLE, FrontEnd, setup_units, table_text
from mambawin.patch.base import (
    MARK_BEGIN,
    MARK_END,
    Outcome,
    Patch,
    PatchContext,
    PatchOptions,
    Tree,
    find_line,
    upsert_block,
)

ID = "arch-list"
SETUP = "setup.py"
# Right after the arch block in every tag (v1.0.0 L115 ... main L204), always 4-space indent.
ANCHOR = re.compile(r"^    # HACK: The compiler flag -D_GLIBCXX_USE_CXX11_ABI.*$", re.MULTILINE)


def block(front: FrontEnd) -> str:
    """setup.py lines replacing upstream's -gencode pairs with one pass per arch (+PTX as
    code=compute_XX)."""
    archs = tuple(sorted(a for p in front.passes for a in p.archs))
    pairs = [f'        cc_flag += ["-gencode", "{value}"]\n' for value in front.gencode()]
    return (
        f"    # {MARK_BEGIN} {ID}: build exactly {format_archs(archs)} (mambawin patch --arch)\n"
        "    # Upstream hard-codes -gencode pairs and ignores TORCH_CUDA_ARCH_LIST; filter, don't\n"
        "    # clear: HIP builds keep -DBUILD_PYTHON_PACKAGE in cc_flag and get no gencode.\n"
        '    if not getattr(torch.version, "hip", None):\n'
        '        cc_flag = [f for f in cc_flag if f != "-gencode" and "arch=" not in f]\n'
        + "".join(pairs)
        + f"    # {MARK_END} {ID}\n"
    )


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Insert (or replace) the baked arch block before the `# HACK:` anchor of setup.py, and
    write (or remove) the proven units' passes."""
    text = tree.read(SETUP)
    anchor = find_line(text, ANCHOR)
    if anchor is None:
        raise ctx.drift(SETUP, "    # HACK: The compiler flag -D_GLIBCXX_USE_CXX11_ABI")
    front = ctx.front_end(setup_units(text))
    new, outcome = upsert_block(text, block(front), ID, anchor)
    tree.write(SETUP, new)
    table = table_text(front)
    if table is not None:
        tree.write(FRONT_TABLE, table)
    elif tree.exists(FRONT_TABLE):  # an earlier run's, for archs or proofs that grouped
        tree.delete(FRONT_TABLE)
    return outcome


def _skip(options: PatchOptions) -> str | None:
    return None if options.archs else "no --arch given: upstream's own -gencode list is kept"


PATCH = Patch(
    id=ID,
    summary="Compile the extension for exactly the --arch list (baked into setup.py).",
    prevents="nvcc fatal: Unsupported gpu architecture 'compute_53' (nvcc 13), and hours spent "
    "compiling sm_87/sm_110/sm_121 kernels no desktop GPU runs",
    versions=SpecifierSet(">=1.0.0"),
    why="setup.py never reads TORCH_CUDA_ARCH_LIST (v2.3.2+ clears it); unmerged PR #856; "
    "nvcc 13 dropped sm<75 (upstream da71f21)",
    files=(SETUP, FRONT_TABLE),
    transform=transform,
    skip_reason=_skip,
)
