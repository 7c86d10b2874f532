"""The order an extension's sources compile in: longest first (split-units writes it).

Why: setuptools sorts an extension's sources by name ("to make the resulting .so file build
reproducible") and torch writes build.ninja in that order; ninja starts the units it may start in
the manifest's order (ninja 1.13.2 measured: neither the targets' order on its command line nor
the durations of a kept .ninja_log change it). So long units named late waited for a job while
short ones ran, and ended the build alone: issue 27, one arch on the H100, causal-conv1d's longest
bwd part started at 24 s and the last 20 s of the pair ran on 1-12 of 16 cores; ordered longest
first, the same units fit in 54.8 s instead of 60.0 s (the pool modelled with that run's unit
times, docs/benchmarks.md §22).

How: a marked block before `setup(` subclasses setup.py's BuildExtension (as stable-setup's block
does) so that the compile step gets the sources ranked by the names the patch listed, longest
first; names not listed follow in setuptools' order. The order is the same wherever the tree is
built and the link takes the objects in the same order, so wheels stay reproducible.
Self-contained: exported .patch files build without mambawin.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mambawin.patch.base import MARK_BEGIN, MARK_END, Outcome, PatchContext, find_line, upsert_block

ANCHOR = re.compile(r"^setup\($", re.MULTILINE)  # the module-level call, in every tag
BLOCK_ID = "split-units"
_BLOCK = f"""\
# {MARK_BEGIN} {BLOCK_ID}: the sources compile longest first
# setuptools sorts them by name and ninja starts units in that order, so long units named late
# waited for a job while short ones ran. Ranked by estimated seconds; the others follow, sorted.
_MAMBAWIN_LONGEST_FIRST = [
{{names}}]


class _MambawinLongestFirst(BuildExtension):
    def build_extension(self, ext):
        compile_sources = self.compiler.compile
        rank = {{{{name: i for i, name in enumerate(_MAMBAWIN_LONGEST_FIRST)}}}}

        def longest_first(sources, *args, **kwargs):
            ranked = sorted(sources, key=lambda s: rank.get(os.path.basename(s), len(rank)))
            return compile_sources(ranked, *args, **kwargs)

        self.compiler.compile = longest_first
        try:
            return super().build_extension(ext)
        finally:
            self.compiler.compile = compile_sources


BuildExtension = _MambawinLongestFirst
# {MARK_END} {BLOCK_ID}
"""


def ranked(estimates: Mapping[str, float]) -> list[str]:
    """File names, longest estimate first (ties by name, so the order never depends on dicts)."""
    return sorted(estimates, key=lambda name: (-estimates[name], name))


def block(names: list[str]) -> str:
    return _BLOCK.format(names="".join(f"    {name!r},\n" for name in names))


def with_order(
    setup: str, estimates: Mapping[str, float], ctx: PatchContext
) -> tuple[str, Outcome]:
    """setup.py text with the block that compiles the estimated files longest first."""
    anchor = find_line(setup, ANCHOR)
    if anchor is None:
        raise ctx.drift("setup.py", "setup(")
    return upsert_block(setup, block(ranked(estimates)), BLOCK_ID, anchor)
