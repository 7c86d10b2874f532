"""split-units on the hand-written kernel fixture, with dispatchers of three (fwd) and five (bwd)
launch configs.

The mechanism (`split_unit` with an explicit object count) is tested on the fwd fixture, whose
g++ build prints what it launches; the count per kind (OBJECTS) through `transform`. The g++ test
compiles the fwd_fp32 unit and its parts as separate translation units and links them with a
caller that only declares the dispatcher: it links only if every launch config is instantiated
exactly once across the objects, and it must print exactly what the unsplit unit prints for every
branch (the fixture's launches print their template arguments). The SASS proof with the real nvcc
is tests/test_split_equivalence.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version
from test_patches_kernels import KERNELS, fixture_tree

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.errors import PatchError
from mambawin.patch.arch_groups import GroupFacts, parse_proofs, proof_entry
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
# Upstream's bwd dispatcher shape (v2.0.4 to main): five configs, kNItems rising.
BWD_DISPATCH_ONE = "    selective_scan_bwd_launch<64, 16, input_t, weight_t>(params, stream);\n"
BWD_CONFIGS = [(32, 4), (32, 8), (32, 16), (64, 16), (128, 16)]
BWD_DISPATCH_FIVE = (
    "".join(
        f"    {'if' if k == 0 else '} else if'} (params.seqlen <= {128 << k}) {{\n"
        f"        selective_scan_bwd_launch<{t}, {i}, input_t, weight_t>(params, stream);\n"
        for k, (t, i) in enumerate(BWD_CONFIGS)
    ).replace(f"else if (params.seqlen <= {128 << 4})", "else")
    + "    }\n"
)
BWD_UNITS = ("selective_scan_bwd_fp32_real", "selective_scan_bwd_fp16_real")
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


def with_bwd(root: Path) -> Path:
    """root with upstream's five-config bwd dispatcher and two bwd units listed in setup.py."""
    header = root / KERNELS / "selective_scan_bwd_kernel.cuh"
    header.write_text(header.read_text().replace(BWD_DISPATCH_ONE, BWD_DISPATCH_FIVE))
    for unit, dtype in zip(BWD_UNITS, ("float", "at::Half"), strict=True):
        (root / KERNELS / f"{unit}.cu").write_text(
            '#include "selective_scan_bwd_kernel.cuh"\n\n'
            f"template void selective_scan_bwd_cuda<{dtype}, float>"
            "(SSMParamsBwd &params, cudaStream_t stream);"
        )
    setup = root / "setup.py"
    listed = "".join(f'    "csrc/selective_scan/{unit}.cu",\n' for unit in BWD_UNITS)
    setup.write_text(setup.read_text().replace("SOURCES = [\n", "SOURCES = [\n" + listed))
    return root


def context(archs: str = "90") -> PatchContext:
    return PatchContext(Version("2.3.2"), PatchOptions(archs=parse_archs(archs)), "split-units")


def write(root: Path, tree: Tree) -> None:
    for rel, data in tree.changed().items():
        if data is None:
            (root / rel).unlink()
        else:
            (root / rel).write_bytes(data)


def apply_split(root: Path, archs: str = "90") -> str:
    tree = Tree(root)
    outcome = split_units.transform(tree, context(archs))
    write(root, tree)
    return outcome


def split_fwd_fp32(root: Path, objects: int) -> list[str]:
    tree = Tree(root)
    names = split_units.split_unit(tree, context(), "selective_scan_fwd_fp32", objects)
    write(root, tree)
    return names


def launchers(text: str, prefix: str = "") -> list[str]:
    found = re.findall(rf"^{prefix}template void selective_scan_\w+_launch<(.+)>\(", text, re.M)
    return list(found)


def test_the_unit_keeps_the_first_group_and_its_parts_hold_the_others(tmp_path: Path) -> None:
    root = three_config_tree(tmp_path)
    names = split_fwd_fp32(root, 3)
    assert names == ["selective_scan_fwd_fp32_part1", "selective_scan_fwd_fp32_part2"]
    unit = (root / KERNELS / "selective_scan_fwd_fp32.cu").read_text()
    assert launchers(unit, "extern ") == [
        "32, 8, float, float",
        "64, 16, float, float",
    ]  # the CUDA branch's groups 2 and 3 only: (32, 4) and ROCm's (64, 4) stay in the unit
    assert unit.index("extern template") < unit.index("template void selective_scan_fwd_cuda")
    assert "(32, 4) here, the others in selective_scan_fwd_fp32_part1.cu to " in unit
    for k, config in ((1, "32, 8, float, float"), (2, "64, 16, float, float")):
        part = (root / KERNELS / f"selective_scan_fwd_fp32_part{k}.cu").read_text()
        assert "selective_scan_fwd_cuda<" not in part
        assert launchers(part) == [config]
    assert not (root / KERNELS / "selective_scan_fwd_fp32_part3.cu").exists()


def test_two_objects_keep_the_larger_group_in_the_unit(tmp_path: Path) -> None:
    root = three_config_tree(tmp_path)
    assert split_fwd_fp32(root, 2) == ["selective_scan_fwd_fp32_part1"]
    unit = (root / KERNELS / "selective_scan_fwd_fp32.cu").read_text()
    assert launchers(unit, "extern ") == ["64, 16, float, float"]
    part1 = (root / KERNELS / "selective_scan_fwd_fp32_part1.cu").read_text()
    assert launchers(part1) == ["64, 16, float, float"]


def test_a_resplit_into_fewer_objects_deletes_the_stale_parts(tmp_path: Path) -> None:
    root = three_config_tree(tmp_path)
    split_fwd_fp32(root, 3)
    unit = root / KERNELS / "selective_scan_fwd_fp32.cu"
    unit.write_text(re.sub(r"// mambawin.*?#endif\n", "", unit.read_text(), flags=re.S))
    split_fwd_fp32(root, 2)
    assert (root / KERNELS / "selective_scan_fwd_fp32_part1.cu").exists()
    assert not (root / KERNELS / "selective_scan_fwd_fp32_part2.cu").exists()
    assert split_fwd_fp32(root, 1) == []
    assert not (root / KERNELS / "selective_scan_fwd_fp32_part1.cu").exists()


@pytest.mark.parametrize(
    ("archs", "parts", "kept", "fwd_parts"),
    [
        ("90", 3, ["32, 4", "32, 8"], 1),
        ("80;86;89;90", 1, ["32, 4", "32, 8", "32, 16"], 0),
    ],
)
def test_units_split_by_kind_and_arch_count(
    tmp_path: Path, archs: str, parts: int, kept: list[str], fwd_parts: int
) -> None:
    """bwd: 4 objects at one or two archs, 2 at more; fwd: 2, then whole (byte for byte)."""
    root = with_bwd(three_config_tree(tmp_path))
    fwd_before = {p.name: p.read_bytes() for p in (root / KERNELS).glob("selective_scan_fwd_*")}
    assert apply_split(root, archs) == "applied"
    fwd_after = {p.name: p.read_bytes() for p in (root / KERNELS).glob("selective_scan_fwd_*")}
    assert (fwd_after == fwd_before) == (fwd_parts == 0)
    setup = (root / "setup.py").read_text()
    listed = re.findall(r'"csrc/selective_scan/(\w+)\.cu"', setup)
    unit = "selective_scan_bwd_fp32_real"
    assert listed[: parts + 1] == [unit, *(f"{unit}_part{k}" for k in range(1, parts + 1))]
    fwd = ("selective_scan_fwd_fp32", "selective_scan_fwd_fp16", "selective_scan_fwd_bf16")
    assert [name for name in listed if "_fwd_" in name] == [
        name for u in fwd for name in (u, *(f"{u}_part{k}" for k in range(1, fwd_parts + 1)))
    ]
    text = (root / KERNELS / f"{unit}.cu").read_text()
    every = [f"{t}, {i}" for t, i in BWD_CONFIGS]
    externs = [config for config in every if config not in kept]
    assert launchers(text, "extern ") == [f"{config}, float, float" for config in externs]
    held = [
        config
        for k in range(1, parts + 1)
        for config in launchers((root / KERNELS / f"{unit}_part{k}.cu").read_text())
    ]
    assert held == [f"{config}, float, float" for config in externs]
    assert not (root / KERNELS / f"{unit}_part{parts + 1}.cu").exists()
    assert apply_split(root, archs) == "already-applied"


def test_one_or_two_archs_make_4_bwd_and_2_fwd_objects_more_archs_2_and_1() -> None:
    assert [split_units.objects_for("bwd", n) for n in (1, 2, 3, 8)] == [4, 4, 2, 2]
    assert [split_units.objects_for("fwd", n) for n in (1, 2, 3, 8)] == [2, 2, 1, 1]
    # part1..part3: what stable-kernels and files= cover
    assert split_units.MAX_PARTS == 3


def test_a_dispatcher_with_one_config_is_drift(tmp_path: Path) -> None:
    root = fixture_tree(tmp_path)
    with pytest.raises(PatchError, match=r"split-units.*selective_scan_fwd_kernel\.cuh"):
        split_fwd_fp32(root, 2)
    # at four archs the fwd units stay whole, so only the bwd dispatcher needs configs to split
    with pytest.raises(PatchError, match=r"split-units.*selective_scan_bwd_kernel\.cuh"):
        apply_split(root, archs="80;86;89;90")


def gxx_link(root: Path, units: list[str], exe: Path) -> str:
    caller = exe.with_suffix(".cpp")
    caller.write_text(CALLER)
    sources = [str(root / KERNELS / f"{u}.cu") for u in units]
    argv = ["g++", "-std=c++17", "-O0", "-I", str(root / KERNELS), "-x", "c++", *sources]
    proc.run([*argv, "-x", "none", str(caller), "-o", str(exe)], timeout=300)
    return proc.run([str(exe)], timeout=30).stdout


def defined_launchers(root: Path, unit: str, obj: Path) -> list[str]:
    """The launchers unit's own object defines (nm -C), as `<kNThreads, kNItems>`."""
    argv = ["g++", "-std=c++17", "-O0", "-I", str(root / KERNELS), "-x", "c++", "-c"]
    proc.run([*argv, str(root / KERNELS / f"{unit}.cu"), "-o", str(obj)], timeout=300)
    symbols = proc.run(["nm", "-C", "--defined-only", str(obj)], timeout=30).stdout
    found = re.findall(r"void selective_scan_fwd_launch<(\d+), (\d+), float, float>", symbols)
    return sorted({f"<{t}, {i}>" for t, i in found})


@pytest.mark.skipif(proc.which("g++") is None, reason="needs g++ to link the fixture")
@pytest.mark.parametrize(("objects", "kept"), [(2, ["<32, 4>", "<32, 8>"]), (3, ["<32, 4>"])])
def test_the_split_units_link_and_launch_exactly_like_the_whole_unit(
    tmp_path: Path, objects: int, kept: list[str]
) -> None:
    whole = three_config_tree(tmp_path / "whole")
    split = three_config_tree(tmp_path / "split")
    parts = split_fwd_fp32(split, objects)
    assert len(parts) == objects - 1
    before = gxx_link(whole, ["selective_scan_fwd_fp32"], tmp_path / "whole.exe")
    after = gxx_link(split, ["selective_scan_fwd_fp32", *parts], tmp_path / "split.exe")
    assert after == before
    assert {line.split()[1:3][0] for line in before.splitlines()} == {"32", "64"}
    # the unit compiles its first group's launchers itself: no dispatcher-only object
    assert defined_launchers(split, "selective_scan_fwd_fp32", tmp_path / "unit.o") == kept


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


def _grouped_context(version: str) -> PatchContext:
    """Four archs, sm_80/86/89 proven to share compute_80's pass in a bwd unit (a table passed
    in): that unit gets two passes."""
    entry = proof_entry(
        "mamba-ssm",
        version,
        "torch",
        "13.0",
        "linux_x86_64",
        "80",
        ["80", "86", "89"],
        3,
        "§",
        units=["selective_scan_bwd_fp32_real"],
    )
    facts = GroupFacts(
        "13.0", "linux_x86_64", parse_proofs(json.dumps({"schema": 1, "proofs": [entry]}))
    )
    options = PatchOptions(archs=parse_archs("80;86;89;90"), groups=facts)
    return PatchContext(Version(version), options, "split-units")


def test_the_split_counts_front_end_passes_not_archs(tmp_path: Path) -> None:
    """Four archs with a unit proven to share a pass (two passes) split as finely as one or two
    archs: a proven unit does less work."""
    listings = {}
    for name, ctx in (
        ("one arch", context("90")),
        ("four archs, two passes", _grouped_context("2.3.2")),
        ("four archs, four passes", context("80;86;89;90")),
    ):
        root = with_bwd(three_config_tree(tmp_path / name.replace(" ", "_").replace(",", "")))
        tree = Tree(root)
        assert split_units.transform(tree, ctx) == "applied"
        write(root, tree)
        listings[name] = re.findall(r'"csrc/selective_scan/(\w+)\.cu"', tree.read("setup.py"))
    assert listings["four archs, two passes"] == listings["one arch"]
    assert listings["four archs, four passes"] != listings["one arch"]
    assert [split_units.objects_for("bwd", n) for n in (2, 4)] == [4, 2]
