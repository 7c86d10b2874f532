"""nvcc-threads: nvcc's `--threads` honours the NVCC_THREADS environment variable.

Why: every tag hard-codes `return nvcc_extra_args + ["--threads", "4"]`. ninja already runs one
nvcc per core (MAX_JOBS), each with 4 threads, and each thread compiling selective_scan kernels
takes GBs of RAM: Windows machines run out of memory ("nvcc error : 'cicc' died with status
0xC0000409" / "ninja: build stopped: subcommand failed", zluda#108, mamba#55) or have cores idle.
No tag reads NVCC_THREADS (docs/upstream-map.md §3), so the build cannot be tuned without editing
it. The default stays 4 unless the patch option nvcc_threads (mambawin patch --nvcc-threads) sets
it.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

ID = "nvcc-threads"
SETUP = "setup.py"
ORIGINAL = re.compile(r'^    return nvcc_extra_args \+ \["--threads", "4"\][ \t]*$', re.MULTILINE)
APPLIED = re.compile(
    r'^    return nvcc_extra_args \+ \["--threads", os\.getenv\("NVCC_THREADS"\) or "\d+"\]'
    rf"  # mambawin {ID}$",
    re.MULTILINE,
)


def replacement(default: int) -> str:
    """The patched return line; an empty NVCC_THREADS counts as unset."""
    return (
        f'    return nvcc_extra_args + ["--threads", os.getenv("NVCC_THREADS") or "{default}"]'
        f"  # mambawin {ID}"
    )


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Rewrite append_nvcc_threads' return line; a changed default replaces an earlier patch."""
    text = tree.read(SETUP)
    wanted = replacement(ctx.options.nvcc_threads or 4)
    found = APPLIED.search(text) or ORIGINAL.search(text)
    if found is None:
        raise ctx.drift(SETUP, '    return nvcc_extra_args + ["--threads", "4"]')
    if found.group(0) == wanted:
        return "already-applied"
    tree.write(SETUP, text[: found.start()] + wanted + text[found.end() :])
    return "applied"


PATCH = Patch(
    id=ID,
    summary="nvcc --threads comes from NVCC_THREADS (default 4, or --nvcc-threads).",
    prevents="nvcc error : 'cicc' died with status 0xC0000409 / ninja: build stopped "
    "(out of memory with MAX_JOBS x 4 nvcc threads), with no way to lower it",
    versions=SpecifierSet(">=1.0.0"),
    why="every tag hard-codes --threads 4 and no tag reads NVCC_THREADS (zluda#108, mamba#55)",
    files=(SETUP,),
    transform=transform,
)
