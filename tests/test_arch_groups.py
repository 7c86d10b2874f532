"""Archs share one nvcc front-end pass only in the compile units a SASS proof covers
(patch/arch_groups.py): the grouping rules per unit, the lines the build says, the proof table's
shape, and the entry the proof script writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mambawin.archs import parse_archs
from mambawin.patch.arch_groups import (
    FrontEnd,
    ProofTable,
    group_key,
    parse_proofs,
    plan_front_end,
    proof_entry,
    setup_units,
    shipped_proofs,
    table_text,
    unit_stem,
    with_proof,
)

LINUX = "linux_x86_64"
KEY = group_key("mamba-ssm", "2.2.4", "torch", "13.0", LINUX)
PROVEN = "SASS proven identical: mamba-ssm 2.2.4, CUDA 13.0, torch ABI"
UNIT = "selective_scan_bwd_fp16_real"
OTHER = "selective_scan_fwd_bf16"


def table(*entries: dict[str, Any]) -> ProofTable:
    return parse_proofs(json.dumps({"schema": 1, "proofs": list(entries)}))


def entry(
    archs: tuple[str, ...] = ("80", "86", "89"), ptx: str = "80", **changes: Any
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "package": "mamba-ssm",
        "version": "2.2.4",
        "abi": "torch",
        "cuda": "13.0",
        "platform": LINUX,
        "ptx_arch": ptx,
        "archs": archs,
        "kernels": 1188,
        "evidence": "docs/benchmarks.md §26",
        "units": [UNIT],
    }
    return proof_entry(**(fields | changes))


def passes_of(front: FrontEnd, unit: str = UNIT) -> tuple[str, ...]:
    """The -gencode values unit is compiled with: its own where proven, else setup.py's."""
    return tuple(front.table().get(unit, front.gencode()))


FULL = table(entry())
TODAY = ("arch=compute_80,code=sm_80", "arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")


def test_a_proven_unit_shares_the_lowest_pass_and_setup_py_keeps_one_pass_per_arch() -> None:
    front = plan_front_end(parse_archs("80;86;89;90"), KEY, FULL)
    assert front.gencode() == (*TODAY, "arch=compute_90,code=sm_90")  # setup.py: today's
    assert front.table() == {
        UNIT: ["arch=compute_80,code=[sm_80,sm_86,sm_89]", "arch=compute_90,code=sm_90"]
    }
    assert front.lines() == (
        f"front end ({PROVEN}): compute_80 for sm_80, sm_86, sm_89 in 1 unit ({UNIT}); "
        "every other unit one pass per arch",
        f"{UNIT}: sm_90 keeps its own pass: no SASS proof for it (mamba-ssm 2.2.4, torch ABI, "
        "CUDA 13.0)",
    )
    assert front.split_passes == 2  # split-units counts a proven unit's passes
    assert front.targets == 4  # ptxas still runs per arch: nvcc's --threads is as before
    unit = front.to_json()["units"][UNIT]
    assert unit[0] == {
        "ptx_arch": "80",
        "archs": ["80", "86", "89"],
        "ptx": False,
        "gencode": ["arch=compute_80,code=[sm_80,sm_86,sm_89]"],
        "evidence": "docs/benchmarks.md §26",
    }
    assert [p["gencode"] for p in front.to_json()["passes"]] == [[g] for g in front.gencode()]


def test_the_trees_units_name_the_unproven_ones_and_parts_map_to_their_unit() -> None:
    units = [f"{UNIT}_part2", UNIT, OTHER, "selective_scan_fwd_fp16"]
    front = plan_front_end(parse_archs("80;86;89;90"), KEY, FULL, units)
    assert list(front.table()) == [UNIT]  # the part is its unit's, not a unit of its own
    assert front.lines()[1] == (
        "selective_scan_fwd_bf16, selective_scan_fwd_fp16 keep a pass per arch: no SASS proof "
        "for them (mamba-ssm 2.2.4, torch ABI, CUDA 13.0)"
    )
    # The list names the unproven units; it never changes which are proven.
    assert plan_front_end(parse_archs("80;86;89;90"), KEY, FULL).table() == front.table()


def test_each_unit_gets_only_the_archs_its_own_proofs_cover() -> None:
    proofs = table(
        entry(units=[UNIT, "selective_scan_fwd_fp16"]),
        entry(("80", "89"), units=[OTHER]),  # fwd_bf16 differs at sm_86: proven for sm_89 only
    )
    front = plan_front_end(parse_archs("80;86;89"), KEY, proofs, [UNIT, OTHER])
    assert passes_of(front) == ("arch=compute_80,code=[sm_80,sm_86,sm_89]",)
    assert passes_of(front, OTHER) == (
        "arch=compute_80,code=[sm_80,sm_89]",
        "arch=compute_86,code=sm_86",
    )
    assert passes_of(front, "selective_scan_bwd_fp32_real") == TODAY  # unlisted: setup.py's
    assert front.split_passes == 1  # the fewest a proven unit gets
    assert front.lines() == (
        f"front end ({PROVEN}): compute_80 for sm_80, sm_86, sm_89 in 2 units "
        "(selective_scan_bwd_fp16_real, selective_scan_fwd_fp16); compute_80 for sm_80, sm_89 in "
        "1 unit (selective_scan_fwd_bf16); every other unit one pass per arch",
        "selective_scan_fwd_bf16: sm_86 keeps its own pass: no SASS proof for it (mamba-ssm "
        "2.2.4, torch ABI, CUDA 13.0)",
    )


@pytest.mark.parametrize(
    "key",
    [
        group_key("causal-conv1d", "2.2.4", "torch", "13.0", LINUX),  # another package
        group_key("mamba-ssm", "2.2.5", "torch", "13.0", LINUX),  # another release
        group_key("mamba-ssm", "2.2.4", "stable", "13.0", LINUX),  # the other ABI
        group_key("mamba-ssm", "2.2.4", "torch", "12.9", LINUX),  # another nvcc
        group_key("mamba-ssm", "2.2.4", "torch", "13.0", "win_amd64"),  # Windows: no proof
    ],
)
def test_a_proof_holds_only_for_its_exact_key(key: Any) -> None:
    archs = parse_archs("80;86;89")
    front = plan_front_end(archs, key, FULL)
    assert front.gencode() == TODAY and front.table() == {}
    why = f"no SASS proof for {key.unproven_text()}"
    assert front.unshared == (f"sm_86, sm_89 keep their own pass: {why}",)
    listed = plan_front_end(archs, key, FULL, [UNIT])
    assert listed.unshared == (
        f"{UNIT} keeps a pass per arch: no SASS proof for it ({key.text()})",
    )


def test_the_unproven_line_names_the_release_abi_cuda_and_a_non_linux_platform() -> None:
    conv = group_key("causal-conv1d", "1.5.0.post8", "torch", "13.0.88", LINUX)
    front = plan_front_end(parse_archs("80;86;89;90"), conv, ProofTable(), ["causal_conv1d_update"])
    assert front.lines() == (
        "front end: compute_80 for sm_80; compute_86 for sm_86; compute_89 for sm_89; "
        "compute_90 for sm_90",
        "causal_conv1d_update keeps a pass per arch: no SASS proof for it (causal-conv1d "
        "1.5.0.post8, torch ABI, CUDA 13.0)",
    )
    win = group_key("causal-conv1d", "1.6.2", "stable", "13.0", "win_amd64")
    assert plan_front_end(parse_archs("80;86"), win, FULL).unshared == (
        "sm_86 keeps its own pass: no SASS proof for causal-conv1d 1.6.2 (stable ABI, CUDA 13.0, "
        "win_amd64)",
    )


def test_without_proofs_or_with_grouping_off_every_unit_is_compiled_as_today() -> None:
    archs = parse_archs("80;86;8.9+PTX;90;90a")
    today = tuple(g for a in archs for g in a.gencode())
    assert plan_front_end(archs, KEY, ProofTable()).gencode() == today
    off = plan_front_end(archs, KEY, None, [UNIT])
    assert off.gencode() == today and off.unshared == () and off.table() == {}
    assert table_text(off) is None  # no table in the tree
    assert off.split_passes == 5  # one per arch, as before


def test_partial_proofs_group_what_they_cover_and_explain_the_rest() -> None:
    front = plan_front_end(parse_archs("80;86;89"), KEY, table(entry(("80", "86"))))
    assert passes_of(front) == ("arch=compute_80,code=[sm_80,sm_86]", "arch=compute_89,code=sm_89")
    assert front.unshared == (
        f"{UNIT}: sm_89 keeps its own pass: no SASS proof for it (mamba-ssm 2.2.4, torch ABI, "
        "CUDA 13.0)",
    )


def test_an_arch_joins_the_lowest_pass_a_proof_covers_not_just_the_lowest_pass() -> None:
    front = plan_front_end(parse_archs("80;86;89"), KEY, table(entry(("86", "89"), "86")))
    assert passes_of(front) == ("arch=compute_80,code=sm_80", "arch=compute_86,code=[sm_86,sm_89]")
    assert front.unshared == (
        f"{UNIT}: sm_86 keeps its own pass: no SASS proof for it (mamba-ssm 2.2.4, torch ABI, "
        "CUDA 13.0)",
    )


def test_a_proof_for_a_lower_ptx_arch_not_in_the_build_groups_nothing() -> None:
    front = plan_front_end(parse_archs("86;89"), KEY, FULL)  # proven from compute_80 only
    assert front.table() == {}
    assert front.gencode() == ("arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")


def test_a_pass_serves_a_higher_major_only_where_proven() -> None:
    """compute_80's PTX is valid input for sm_90's ptxas; whether the SASS is sm_90's own pass's is
    a fact of each unit (mamba-ssm's fp16 units: yes; its bf16 units: no), so a proof decides."""
    across = table(entry(("80", "86", "89", "90")), entry(("80", "89"), units=[OTHER]))
    front = plan_front_end(parse_archs("80;86;89;90"), KEY, across, [UNIT, OTHER])
    assert front.table() == {
        UNIT: ["arch=compute_80,code=[sm_80,sm_86,sm_89,sm_90]"],
        OTHER: [
            "arch=compute_80,code=[sm_80,sm_89]",
            "arch=compute_86,code=sm_86",
            "arch=compute_90,code=sm_90",
        ],
    }
    assert front.split_passes == 1
    assert front.unshared == (
        f"{OTHER}: sm_86, sm_90 keep their own pass: no SASS proof for it (mamba-ssm 2.2.4, "
        "torch ABI, CUDA 13.0)",
    )
    # sm_90a's code is tied to its own arch: it never joins, proof or not
    suffixed = plan_front_end(parse_archs("80;90a"), KEY, across, [UNIT])
    assert suffixed.table() == {} and suffixed.unshared == ()


def test_suffixed_archs_never_group() -> None:
    front = plan_front_end(parse_archs("90;90a;100f;103f"), KEY, FULL)
    assert [p.archs for p in front.passes] == [(a,) for a in parse_archs("90;90a;100f;103f")]
    assert front.unshared == () and front.table() == {}  # nothing could have shared


def test_ptx_is_kept_in_the_pass_of_its_own_arch_and_a_ptx_arch_keeps_its_own_pass() -> None:
    host = plan_front_end(parse_archs("8.0+PTX;86;89"), KEY, FULL)
    assert passes_of(host) == ("arch=compute_80,code=[sm_80,sm_86,sm_89,compute_80]",)
    assert host.lines()[0].startswith(
        f"front end ({PROVEN}): compute_80 for sm_80, sm_86, sm_89 +PTX"
    )
    assert host.targets == 4
    joiner = plan_front_end(parse_archs("80;8.6+PTX;89"), KEY, FULL)
    assert passes_of(joiner) == (
        "arch=compute_80,code=[sm_80,sm_89]",
        "arch=compute_86,code=sm_86",
        "arch=compute_86,code=compute_86",
    )
    assert joiner.unshared == (
        "sm_86+PTX keeps its own pass: its PTX needs a compute_86 pass anyway",
    )


def test_one_arch_is_one_pass_as_today() -> None:
    front = plan_front_end(parse_archs("90"), KEY, FULL)
    assert front.gencode() == ("arch=compute_90,code=sm_90",)
    assert front.lines() == ("front end: compute_90 for sm_90",)


def test_unit_stems_of_setup_py_and_of_parts() -> None:
    assert unit_stem("csrc/causal_conv1d_bwd_part3.cu") == "causal_conv1d_bwd"
    assert unit_stem("csrc\\selective_scan\\selective_scan_fwd_bf16.cu") == OTHER
    setup = (
        'sources=["csrc/causal_conv1d.cpp", "csrc/causal_conv1d_fwd.cu",\n'
        "'csrc/causal_conv1d_bwd.cu', \"csrc/causal_conv1d_bwd_part1.cu\",  # mambawin\n"
        '"csrc/causal_conv1d_update.cu"]'
    )
    assert setup_units(setup) == ("causal_conv1d_bwd", "causal_conv1d_fwd", "causal_conv1d_update")


def test_the_table_text_is_sorted_json_of_the_proven_units() -> None:
    proofs = table(entry(units=[UNIT, "selective_scan_bwd_fp16_complex"]))
    text = table_text(plan_front_end(parse_archs("80;86"), KEY, proofs))
    assert text == (
        "{\n"
        '  "selective_scan_bwd_fp16_complex": [\n    "arch=compute_80,code=[sm_80,sm_86]"\n  ],\n'
        '  "selective_scan_bwd_fp16_real": [\n    "arch=compute_80,code=[sm_80,sm_86]"\n  ]\n'
        "}\n"
    )


def test_the_key_normalises_the_release_and_takes_cuda_major_minor() -> None:
    assert group_key("mamba-ssm", "v2.2.4", "torch", "13.0.88", LINUX) == KEY
    assert group_key("mamba-ssm", "2.2.4", "torch", "V13.0", LINUX) == KEY
    assert group_key("mamba-ssm", "2.2.4", "torch", "not a version", LINUX).cuda == ""


def test_the_shipped_table_loads_and_each_proof_names_its_evidence() -> None:
    """Every shipped proof is one the loader accepts, and the benchmarks section it cites holds
    a row for each of its units (the comparison that proved it)."""
    table = shipped_proofs()
    assert table.proofs
    benchmarks = (Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md").read_text()
    for proof in table.proofs:
        section = proof.evidence.rsplit("§", 1)[-1]
        start = benchmarks.index(f"\n## {section}. ")
        text = benchmarks[start : benchmarks.find("\n## ", start + 1)]
        assert f"{proof.key.package} {proof.key.version}" in text, proof
        for unit in proof.units:
            assert f"| {unit} |" in text, (proof, unit)


def test_proof_entry_writes_what_the_loader_reads_back() -> None:
    written = proof_entry(
        "causal-conv1d",
        "v1.6.2",
        "stable",
        "13.0.88",
        LINUX,
        "80",
        ["89", "80", "86"],
        5,
        "§26",
        units=["causal_conv1d_fwd", "causal_conv1d_bwd_part2", "causal_conv1d_bwd"],
    )
    assert written == {
        "package": "causal-conv1d",
        "version": "1.6.2",
        "abi": "stable",
        "cuda": "13.0",
        "platform": LINUX,
        "ptx_arch": "80",
        "archs": ["80", "86", "89"],
        "units": ["causal_conv1d_bwd", "causal_conv1d_fwd"],  # a part is its unit's
        "kernels": 5,
        "evidence": "§26",
    }
    proof = table(written).proofs[0]
    assert (proof.ptx_arch, proof.archs, proof.kernels) == ("80", ("80", "86", "89"), 5)
    assert proof.units == ("causal_conv1d_bwd", "causal_conv1d_fwd")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ptx": "86", "archs": ("80", "89")}, "ptx_arch must be one of"),
        ({"archs": ("80",)}, "two or more archs"),
        ({"ptx": "86", "archs": ("86", "80")}, "not be below ptx_arch"),
        ({"archs": ("80", "90a")}, "plain archs"),
        ({"kernels": 0}, "kernels must be"),
        ({"cuda": "thirteen"}, "cuda must be major.minor"),
        ({"evidence": ""}, "non-empty strings"),
        ({"units": []}, "units must name one or more"),
        ({"units": ["csrc/x y.cu"]}, "units must name one or more"),
    ],
)
def test_a_bad_proof_is_refused_naming_what_is_wrong(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        entry(**changes)


@pytest.mark.parametrize(
    "text",
    [
        '{"proofs": []}',  # no schema
        '{"schema": 1, "proofs": {}}',
        '{"schema": 1, "proofs": [{"package": "mamba-ssm"}]}',
    ],
)
def test_a_bad_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"sass_groups\.json"):
        parse_proofs(text)


@pytest.mark.parametrize(
    ("units", "message"),
    [
        (None, "lacks units"),  # a whole-extension entry of before: refused, never guessed
        ([], "units must name"),
        (["b", "a"], "units must be sorted"),
        (["a", "a"], "units must be sorted"),
        (["a_part2"], "units must name"),
    ],
)
def test_the_loader_refuses_an_entry_without_proper_units(units: Any, message: str) -> None:
    raw = dict(entry())
    if units is None:
        del raw["units"]
    else:
        raw["units"] = units
    with pytest.raises(ValueError, match=message):
        table(raw)


@pytest.mark.parametrize(
    "text",
    [
        '{"schema": 1, "proofs": 3}',
    ],
)
def test_a_bad_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"sass_groups\.json"):
        parse_proofs(text)


def test_with_proof_adds_an_entry_replaces_the_same_comparison_and_keeps_the_file_valid() -> None:
    empty = '{"schema": 1, "about": "kept", "proofs": []}'
    one = with_proof(empty, entry())
    assert json.loads(one)["about"] == "kept" and parse_proofs(one) == FULL
    newer = entry(kernels=1200)
    again = with_proof(one, newer)
    assert [p.kernels for p in parse_proofs(again).proofs] == [1200]  # replaced, not doubled
    other = with_proof(again, entry(abi="stable"))
    assert len(parse_proofs(other).proofs) == 2
    # Another set of archs from the same PTX arch is another comparison (its own units).
    third = with_proof(other, entry(("80", "89"), units=[OTHER]))
    assert len(parse_proofs(third).proofs) == 3
    with pytest.raises(ValueError, match="kernels must be"):
        with_proof(one, entry() | {"kernels": 0})
