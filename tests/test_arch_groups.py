"""Archs share one nvcc front-end pass only where a SASS proof says so (patch/arch_groups.py):
the grouping rules, the proof table's shape, and the entry the proof script writes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mambawin.archs import parse_archs
from mambawin.patch.arch_groups import (
    ProofTable,
    group_key,
    parse_proofs,
    plan_front_end,
    proof_entry,
    shipped_proofs,
    with_proof,
)

LINUX = "linux_x86_64"
KEY = group_key("mamba-ssm", "2.2.4", "torch", "13.0", LINUX)
PROVEN = "SASS proven identical: mamba-ssm 2.2.4, CUDA 13.0, torch ABI"


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
    }
    return proof_entry(**(fields | changes))


FULL = table(entry())


def test_proven_archs_share_the_lowest_ones_pass_and_a_new_major_keeps_its_own() -> None:
    front = plan_front_end(parse_archs("80;86;89;90"), KEY, FULL)
    assert front.gencode() == (
        "arch=compute_80,code=[sm_80,sm_86,sm_89]",
        "arch=compute_90,code=sm_90",
    )
    assert front.lines() == (
        f"front end: compute_80 for sm_80, sm_86, sm_89 ({PROVEN}); compute_90 for sm_90",
    )
    assert front.targets == 4  # ptxas still runs per arch: nvcc's --threads is as before
    assert front.to_json()["passes"][0] == {
        "ptx_arch": "80",
        "archs": ["80", "86", "89"],
        "ptx": False,
        "gencode": ["arch=compute_80,code=[sm_80,sm_86,sm_89]"],
        "evidence": "docs/benchmarks.md §26",
    }


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
    assert front.gencode() == tuple(g for a in archs for g in a.gencode())
    why = f"no SASS proof for {key.unproven_text()}"
    assert front.unshared == (f"sm_86, sm_89 keep their own pass: {why}",)


def test_the_unproven_line_names_the_release_abi_cuda_and_a_non_linux_platform() -> None:
    conv = group_key("causal-conv1d", "1.6.2", "torch", "13.0.88", LINUX)
    front = plan_front_end(parse_archs("80;86;89;90"), conv, ProofTable())
    assert front.lines()[1] == (
        "sm_86, sm_89 keep their own pass: no SASS proof for causal-conv1d 1.6.2 (torch ABI, "
        "CUDA 13.0)"
    )
    win = group_key("causal-conv1d", "1.6.2", "stable", "13.0", "win_amd64")
    assert plan_front_end(parse_archs("80;86"), win, FULL).unshared == (
        "sm_86 keeps its own pass: no SASS proof for causal-conv1d 1.6.2 (stable ABI, CUDA 13.0, "
        "win_amd64)",
    )


def test_without_proofs_or_with_grouping_off_the_gencode_is_todays() -> None:
    archs = parse_archs("80;86;8.9+PTX;90;90a")
    today = tuple(g for a in archs for g in a.gencode())
    assert plan_front_end(archs, KEY, ProofTable()).gencode() == today
    off = plan_front_end(archs, KEY, None)
    assert off.gencode() == today and off.unshared == ()  # off: nothing to explain


def test_partial_proofs_group_what_they_cover_and_explain_the_rest() -> None:
    front = plan_front_end(parse_archs("80;86;89"), KEY, table(entry(("80", "86"))))
    assert front.gencode() == ("arch=compute_80,code=[sm_80,sm_86]", "arch=compute_89,code=sm_89")
    assert front.unshared == (
        "sm_89 keeps its own pass: no SASS proof for mamba-ssm 2.2.4 (torch ABI, CUDA 13.0)",
    )


def test_an_arch_joins_the_lowest_pass_a_proof_covers_not_just_the_lowest_pass() -> None:
    front = plan_front_end(parse_archs("80;86;89"), KEY, table(entry(("86", "89"), "86")))
    assert front.gencode() == ("arch=compute_80,code=sm_80", "arch=compute_86,code=[sm_86,sm_89]")
    assert front.unshared == (
        "sm_86 keeps its own pass: no SASS proof for mamba-ssm 2.2.4 (torch ABI, CUDA 13.0)",
    )


def test_a_proof_for_a_lower_ptx_arch_not_in_the_build_groups_nothing() -> None:
    front = plan_front_end(parse_archs("86;89"), KEY, FULL)  # proven from compute_80 only
    assert front.gencode() == ("arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")


def test_suffixed_archs_never_group() -> None:
    front = plan_front_end(parse_archs("90;90a;100f;103f"), KEY, FULL)
    assert [p.archs for p in front.passes] == [(a,) for a in parse_archs("90;90a;100f;103f")]
    assert front.unshared == ()  # nothing could have shared: no reason to give


def test_ptx_is_kept_in_the_pass_of_its_own_arch_and_a_ptx_arch_keeps_its_own_pass() -> None:
    host = plan_front_end(parse_archs("8.0+PTX;86;89"), KEY, FULL)
    assert host.gencode() == ("arch=compute_80,code=[sm_80,sm_86,sm_89,compute_80]",)
    assert host.lines()[0].startswith("front end: compute_80 for sm_80, sm_86, sm_89 +PTX (")
    assert host.targets == 4
    joiner = plan_front_end(parse_archs("80;8.6+PTX;89"), KEY, FULL)
    assert joiner.gencode() == (
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


def test_the_key_normalises_the_release_and_takes_cuda_major_minor() -> None:
    assert group_key("mamba-ssm", "v2.2.4", "torch", "13.0.88", LINUX) == KEY
    assert group_key("mamba-ssm", "2.2.4", "torch", "V13.0", LINUX) == KEY
    assert group_key("mamba-ssm", "2.2.4", "torch", "not a version", LINUX).cuda == ""


def test_the_shipped_table_loads_and_is_empty() -> None:
    assert shipped_proofs() == ProofTable()


def test_proof_entry_writes_what_the_loader_reads_back() -> None:
    written = proof_entry(
        "causal-conv1d", "v1.6.2", "stable", "13.0.88", LINUX, "80", ["89", "80", "86"], 5, "§26"
    )
    assert written == {
        "package": "causal-conv1d",
        "version": "1.6.2",
        "abi": "stable",
        "cuda": "13.0",
        "platform": LINUX,
        "ptx_arch": "80",
        "archs": ["80", "86", "89"],
        "kernels": 5,
        "evidence": "§26",
    }
    proof = table(written).proofs[0]
    assert (proof.ptx_arch, proof.archs, proof.kernels) == ("80", ("80", "86", "89"), 5)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ptx": "86", "archs": ("80", "89")}, "ptx_arch must be one of"),
        ({"archs": ("80",)}, "two or more archs"),
        ({"archs": ("80", "90")}, "share ptx_arch's major"),
        ({"archs": ("80", "90a")}, "plain archs"),
        ({"kernels": 0}, "kernels must be"),
        ({"cuda": "thirteen"}, "cuda must be major.minor"),
        ({"evidence": ""}, "non-empty strings"),
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


def test_with_proof_adds_an_entry_replaces_the_same_comparison_and_keeps_the_file_valid() -> None:
    empty = '{"schema": 1, "about": "kept", "proofs": []}'
    one = with_proof(empty, entry())
    assert json.loads(one)["about"] == "kept" and parse_proofs(one) == FULL
    newer = entry(kernels=1200)
    again = with_proof(one, newer)
    assert [p.kernels for p in parse_proofs(again).proofs] == [1200]  # replaced, not doubled
    other = with_proof(again, entry(abi="stable"))
    assert len(parse_proofs(other).proofs) == 2
    with pytest.raises(ValueError, match="kernels must be"):
        with_proof(one, entry() | {"kernels": 0})
