"""split-units' compile order: setup.py hands the sources to the compile step longest first.

ninja starts the units it may start in build.ninja's order, which is the order the compile step
gets (setuptools sorts by name first): the block must reorder what reaches the compile step, keep
the files it does not rank in setuptools' order after the ranked ones, and leave the compiler as it
found it. The block runs here as setup.py runs it, against a stand-in BuildExtension whose
build_extension does what setuptools' does (sort, compile).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from packaging.version import Version
from test_patches_causal_conv1d_split import HOST_FIXTURE
from test_patches_split import apply_split, three_config_tree, with_bwd

from mambawin.archs import parse_archs
from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.causal_conv1d import split_units as conv_split
from mambawin.patch.setup_py import compile_order


class _Compiler:
    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def compile(self, sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
        self.seen.append(list(sources))
        return [os.path.splitext(s)[0] + ".o" for s in sources]


class _SetuptoolsLike:
    """What matters of setuptools' build_ext: it sorts the sources, then compiles them."""

    def __init__(self) -> None:
        self.compiler = _Compiler()
        self.compile = self.compiler.compile

    def build_extension(self, ext: Any) -> list[str]:
        return self.compiler.compile(sorted(ext.sources))


def run_block(names: list[str], sources: list[str]) -> tuple[list[str], list[str], Any]:
    """(what the compile step got, the objects for the link, the builder after the build)."""
    namespace: dict[str, Any] = {"BuildExtension": _SetuptoolsLike, "os": os}
    exec(compile_order.block(names), namespace)
    builder = namespace["BuildExtension"]()
    objects = builder.build_extension(type("Ext", (), {"sources": sources})())
    return builder.compiler.seen[0], objects, builder


def test_the_compile_step_gets_the_ranked_sources_first_and_the_rest_sorted() -> None:
    sources = ["csrc/d_short.cu", "csrc/a.cpp", "csrc/c_long.cu", "csrc/b.cu", "csrc/e.cu"]
    got, objects, builder = run_block(["c_long.cu", "d_short.cu"], sources)
    assert got == ["csrc/c_long.cu", "csrc/d_short.cu", "csrc/a.cpp", "csrc/b.cu", "csrc/e.cu"]
    assert objects == [s.replace(".cpp", ".o").replace(".cu", ".o") for s in got]
    assert builder.compiler.compile == builder.compile  # the compiler is left as it was


def test_ranked_puts_the_longest_estimate_first_and_breaks_ties_by_name() -> None:
    assert compile_order.ranked({"b.cu": 5.0, "a.cu": 5.0, "c.cu": 9.0}) == ["c.cu", "a.cu", "b.cu"]


def order_in(setup: str) -> list[str]:
    start = setup.index("_MAMBAWIN_LONGEST_FIRST = [")
    block = setup[start : setup.index("]\n", start)]
    return re.findall(r"'([^']+)'", block)


def test_mamba_bwd_objects_compile_before_the_binding_and_fwd(tmp_path: Path) -> None:
    root = with_bwd(three_config_tree(tmp_path))
    assert apply_split(root, "90") == "applied"
    setup = (root / "setup.py").read_text()
    order = order_in(setup)
    bwd = [n for n in order if "_bwd_" in n]
    assert order[: len(bwd)] == bwd  # every bwd object first
    assert order.index("selective_scan.cpp") < order.index("selective_scan_fwd_fp32.cu")
    # the largest launch config's part before the unit holding the two smallest
    unit = "selective_scan_bwd_fp32_real"
    assert order.index(f"{unit}_part3.cu") < order.index(f"{unit}.cu")
    assert setup.index("_MambawinLongestFirst") < setup.index("\nsetup(\n")
    compile(setup, "setup.py", "exec")


def test_causal_conv1d_half_inputs_compile_before_float_ones(tmp_path: Path) -> None:
    root = tmp_path / "src"
    shutil.copytree(HOST_FIXTURE, root)
    tree = Tree(root)
    options = PatchOptions(archs=parse_archs("90"))
    assert conv_split.transform(tree, PatchContext(Version("1.5.4"), options, "split-units")) == (
        "applied"
    )
    order = order_in(tree.read("setup.py"))
    # the unit keeps <float, float>: a cheap object, after every half/bfloat16-input part
    assert order[-1] == "causal_conv1d_update.cu"
    assert order.index("causal_conv1d_bwd.cu") > order.index("causal_conv1d_bwd_part1.cu")
    assert len([n for n in order if n.startswith("causal_conv1d_bwd")]) == 9
