"""split-units on the hand-written kernel fixture, with a dispatcher of three launch configs.

The g++ test compiles the fixture's fwd_fp32 unit and its parts as separate translation units and
links them with a caller that only declares the dispatcher: it links only if every launch config
is instantiated exactly once across the parts, and it must print exactly what the unsplit unit
prints for every branch (the fixture's launches print their template arguments). The SASS proof
with the real nvcc is tests/test_split_equivalence.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version
from test_patches_kernels import KERNELS, fixture_tree

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.errors import PatchError
from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.mamba import split_units

DISPATCH_ONE = "    selective_scan_fwd_launch<32, 4, input_t, weight_t>(params, stream);\n"
DISPATCH_THREE = """\
    #ifndef USE_ROCM
        if (params.seqlen <= 128) {
            selective_scan_fwd_launch<32, 4, input_t, weight_t>(params, stream);
        } else if (params.seqlen <= 256) {
            selective_scan_fwd_launch<32, 8, input_t, weight_t>(params, stream);
        } else {
            selective_scan_fwd_launch<64, 16, input_t, weight_t>(params, stream);
        }
    #else
        selective_scan_fwd_launch<64, 4, input_t, weight_t>(params, stream);
    #endif
"""
CALLER = """\
#include <cmath>
#include "selective_scan_fwd_kernel.cuh"
extern template void selective_scan_fwd_cuda<float, float>(
    SSMParamsBase &params, cudaStream_t stream);
int main() {
    for (int seqlen : {100, 200, 300, 1024}) {
        SSMParamsBase params;
        params.seqlen = seqlen;
        for (int mask = 0; mask < 8; ++mask) {
            params.is_variable_B = mask & 1;
            params.is_variable_C = mask & 2;
            params.z_ptr = nullptr;
            selective_scan_fwd_cuda<float, float>(params, 0);
        }
    }
    return 0;
}
"""


def three_config_tree(tmp_path: Path) -> Path:
    """The fixture with upstream's dispatcher shape; setup.py lists the fwd units it has. The
    units get <cmath> first (M_LOG2E, as the fixture harness does) and lose the complex line
    (the fixture defines no complex_t), so g++ compiles them on their own."""
    root = fixture_tree(tmp_path)
    header = root / KERNELS / "selective_scan_fwd_kernel.cuh"
    header.write_text(header.read_text().replace(DISPATCH_ONE, DISPATCH_THREE))
    for unit in (root / KERNELS).glob("selective_scan_fwd_*.cu"):
        lines = [line for line in unit.read_text().splitlines() if "complex_t" not in line]
        unit.write_text("#include <cmath>\n" + "\n".join(lines))
    setup = root / "setup.py"
    setup.write_text(
        "\n".join(line for line in setup.read_text().splitlines() if "_bwd_" not in line) + "\n"
    )
    return root


def apply_split(root: Path, archs: str = "90") -> str:
    tree = Tree(root)
    options = PatchOptions(archs=parse_archs(archs))
    outcome = split_units.transform(tree, PatchContext(Version("2.3.2"), options, "split-units"))
    for rel, data in tree.changed().items():
        if data is None:
            (root / rel).unlink()
        else:
            (root / rel).write_bytes(data)
    return outcome


def test_each_unit_becomes_itself_and_one_part_per_launch_config(tmp_path: Path) -> None:
    root = three_config_tree(tmp_path)
    assert apply_split(root) == "applied"
    setup = (root / "setup.py").read_text()
    listed = re.findall(r'"csrc/selective_scan/(\w+)\.cu"', setup)
    assert listed[:4] == [
        "selective_scan_fwd_fp32",
        "selective_scan_fwd_fp32_part1",
        "selective_scan_fwd_fp32_part2",
        "selective_scan_fwd_fp32_part3",
    ]
    unit = (root / KERNELS / "selective_scan_fwd_fp32.cu").read_text()
    externs = re.findall(r"^extern template void selective_scan_fwd_launch<(.+)>\(", unit, re.M)
    assert externs == [
        "32, 4, float, float",
        "32, 8, float, float",
        "64, 16, float, float",
    ]  # the CUDA branch only: ROCm's (64, 4) stays in the unit
    assert unit.index("extern template") < unit.index("template void selective_scan_fwd_cuda")
    part = (root / KERNELS / "selective_scan_fwd_fp32_part2.cu").read_text()
    assert "selective_scan_fwd_cuda<" not in part
    assert re.findall(r"^template void selective_scan_fwd_launch<(.+)>\(", part, re.M) == [
        "32, 8, float, float"
    ]
    assert apply_split(root) == "already-applied"


def test_more_than_two_archs_make_two_parts(tmp_path: Path) -> None:
    root = three_config_tree(tmp_path)
    apply_split(root, archs="80;86;89;90")
    part1 = (root / KERNELS / "selective_scan_fwd_fp16_part1.cu").read_text()
    assert "<32, 4, at::Half, float>" in part1 and "<32, 8, at::Half, float>" in part1
    assert not (root / KERNELS / "selective_scan_fwd_fp16_part3.cu").exists()


def test_a_dispatcher_with_one_config_is_drift(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    with pytest.raises(PatchError, match=r"split-units.*selective_scan_fwd_kernel\.cuh"):
        apply_split(root)


def gxx_link(root: Path, units: list[str], exe: Path) -> str:
    caller = exe.with_suffix(".cpp")
    caller.write_text(CALLER)
    sources = [str(root / KERNELS / f"{u}.cu") for u in units]
    argv = ["g++", "-std=c++17", "-O0", "-I", str(root / KERNELS), "-x", "c++", *sources]
    proc.run([*argv, "-x", "none", str(caller), "-o", str(exe)], timeout=300)
    return proc.run([str(exe)], timeout=30).stdout


@pytest.mark.skipif(proc.which("g++") is None, reason="needs g++ to link the fixture")
def test_the_split_units_link_and_launch_exactly_like_the_whole_unit(tmp_path: Path) -> None:
    whole = three_config_tree(tmp_path / "whole")
    split = three_config_tree(tmp_path / "split")
    apply_split(split)
    before = gxx_link(whole, ["selective_scan_fwd_fp32"], tmp_path / "whole.exe")
    parts = [f"selective_scan_fwd_fp32_part{k}" for k in (1, 2, 3)]
    after = gxx_link(split, ["selective_scan_fwd_fp32", *parts], tmp_path / "split.exe")
    assert after == before
    assert {line.split()[1:3][0] for line in before.splitlines()} == {"32", "64"}


def test_launch_configs_follow_rocm_branches_wherever_a_tag_puts_them() -> None:
    """v2.1.0 picks the warp size in `#ifndef USE_ROCM … #else … #endif` before the launches and
    keeps ROCm's configs in an `#ifdef USE_ROCM` else-branch: only CUDA's five are split out."""
    header = """void selective_scan_fwd_cuda(SSMParamsBase &params, cudaStream_t stream) {
    #ifndef USE_ROCM
        constexpr int warp_size = 32;
    #else
        constexpr int warp_size = rocprim::warp_size();
    #endif
    if (warp_size == 32) {
        if (params.seqlen <= 128) {
            selective_scan_fwd_launch<32, 4, input_t, weight_t>(params, stream);
        } else {
            selective_scan_fwd_launch<128, 16, input_t, weight_t>(params, stream);
        }
    }
    #ifdef USE_ROCM
    else {
        selective_scan_fwd_launch<64, 4, input_t, weight_t>(params, stream);
    }
    #endif
}
"""
    configs = split_units.launch_configs(
        header, "selective_scan_fwd_cuda", "selective_scan_fwd_launch"
    )
    assert configs == [("32", "4"), ("128", "16")]
