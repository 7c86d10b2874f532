"""causal-conv1d's split-units on hand-written fixtures.

tests/fixtures/causal_conv1d has the dispatchers and 18 explicit instantiations per unit;
tests/fixtures/causal_conv1d_split is a host-only stand-in g++ compiles: whole and split, every
instantiation must be defined in exactly one object (`nm`), and a caller linked with either must
print the same for every dispatcher. The SASS proof with the real nvcc is
tests/test_split_equivalence_causal_conv1d.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from packaging.version import Version
from test_patches_causal_conv1d import BWD, FWD, hashes, statuses, tree

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.errors import PatchError
from mambawin.patch.arch_groups import GroupFacts, parse_proofs, proof_entry
from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.causal_conv1d import split_units
from mambawin.patch.engine import apply_patches

HOST_FIXTURE = Path(__file__).parent / "fixtures" / "causal_conv1d_split"
_INSTANCE = re.compile(r"^template void (causal_conv1d\w*_cuda<[^>]+>)\(", re.MULTILINE)


def apply_split(root: Path, archs: str = "90") -> str:
    """split-units alone on root, written to disk; its outcome."""
    tree = Tree(root)
    options = PatchOptions(archs=parse_archs(archs) if archs else ())
    outcome = split_units.transform(tree, PatchContext(Version("1.6.1"), options, "split-units"))
    for rel, data in tree.changed().items():
        if data is None:
            (root / rel).unlink()
        else:
            (root / rel).write_bytes(data)
    return outcome


def instances(path: Path) -> list[str]:
    return _INSTANCE.findall(path.read_text())


def pieces(root: Path, unit: str) -> list[Path]:
    """The unit and its parts, in setup.py's order."""
    listed = re.findall(r'"csrc/(\w+)\.cu"', (root / "setup.py").read_text())
    return [root / "csrc" / f"{name}.cu" for name in listed if name.startswith(unit)]


@pytest.mark.parametrize(("archs", "fwd", "bwd"), [("90", 1, 9), ("86;90", 1, 9)])
def test_one_or_two_archs_split_bwd_per_dtype_combination_and_keep_fwd_whole(
    tmp_path: Path, archs: str, fwd: int, bwd: int
) -> None:
    root = tree(tmp_path)
    before = {unit: instances(root / f"csrc/{unit}.cu") for unit in split_units.UNITS}
    assert apply_split(root, archs) == "applied"
    for unit, count in (("causal_conv1d_fwd", fwd), ("causal_conv1d_bwd", bwd)):
        files = pieces(root, unit)
        assert [p.stem for p in files] == [unit, *(f"{unit}_part{k}" for k in range(1, count))]
        found = [instances(p) for p in files]
        assert sorted(line for lines in found for line in lines) == sorted(before[unit])
        assert all(len(lines) == 18 // count for lines in found)
        for lines in found:  # a dtype combination's two layouts stay together
            combos = {line.split("<", 1)[1] for line in lines}
            assert len(combos) == len(lines) // 2
    first = instances(root / BWD)
    assert first == [
        "causal_conv1d_bwd_cuda<float, float>",
        "causal_conv1d_channellast_bwd_cuda<float, float>",
    ]
    assert apply_split(root, archs) == "already-applied"


def test_a_part_is_the_unit_with_other_instantiations(tmp_path: Path) -> None:
    root = tree(tmp_path)
    original = (root / BWD).read_text()
    apply_split(root)

    def code(path: Path) -> str:
        lines = path.read_text().splitlines()
        return "\n".join(ln for ln in lines if not ln.startswith(("template void", "// mambawin")))

    expected = code(root / BWD)
    assert expected == "\n".join(
        ln for ln in original.splitlines() if not ln.startswith("template void")
    )
    for part in pieces(root, "causal_conv1d_bwd")[1:]:
        assert code(part) == expected  # includes, #ifndef USE_ROCM branches, templates: all kept
        assert part.read_text().startswith(original.split("\ntemplate void")[0])


@pytest.mark.parametrize("archs", ["80;86;90", ""])
def test_more_archs_or_upstreams_list_split_bwd_in_three_and_keep_fwd(
    tmp_path: Path, archs: str
) -> None:
    root = tree(tmp_path)
    fwd = (root / FWD).read_text()
    apply_split(root, archs)
    assert (root / FWD).read_text() == fwd
    assert [p.stem for p in pieces(root, "causal_conv1d_fwd")] == ["causal_conv1d_fwd"]
    bwd = pieces(root, "causal_conv1d_bwd")
    assert [len(instances(p)) for p in bwd] == [6, 6, 6]
    assert "<float, at::Half>" in bwd[1].read_text()  # contiguous groups, by weight type


def test_through_the_engine_it_runs_last_on_the_kernels_and_twice_changes_nothing(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, "1.0.0")  # every tag: >=1.0.0
    report = apply_patches(root, PatchOptions(archs=parse_archs("90")))
    assert {r.id: r.status for r in report.results}["split-units"] == "applied"
    part = (root / "csrc" / "causal_conv1d_bwd_part4.cu").read_text()
    assert "// mambawin silu-bwd-tail" in part  # copied after the fix, not before
    setup = (root / "setup.py").read_text()
    assert setup.count("# mambawin split-units") == 8
    compile(setup, "setup.py", "exec")
    before = hashes(root)
    assert statuses(root)["split-units"] == "already-applied"
    assert hashes(root) == before


def test_rocm_directives_are_in_the_parts_too(tmp_path: Path) -> None:
    root = tree(tmp_path, "1.3.0")
    apply_patches(root, PatchOptions(archs=parse_archs("90")))
    bwd = pieces(root, "causal_conv1d_bwd")
    assert len(bwd) == 9
    for part in bwd:
        assert "ROCM_ONLY((void *)) kernel" in part.read_text()


def test_crlf_units_stay_crlf(tmp_path: Path) -> None:
    root = tree(tmp_path)
    for rel in (FWD, BWD, "setup.py"):
        path = root / rel
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert apply_split(root) == "applied"
    assert b"\r\n" in (root / BWD).read_bytes()
    assert b"\n" not in (root / BWD).read_bytes().replace(b"\r\n", b"")
    assert "causal_conv1d_bwd_part1.cu" in (root / "setup.py").read_text()


def test_fewer_parts_on_a_repatch_remove_the_extra_ones(tmp_path: Path) -> None:
    root = tree(tmp_path)
    originals = {rel: (root / rel).read_bytes() for rel in (FWD, BWD, "setup.py")}
    apply_split(root, "90")
    for rel, data in originals.items():  # upstream's files back, the parts left over
        (root / rel).write_bytes(data)
    apply_split(root, "80;86;90")
    assert sorted(p.name for p in (root / "csrc").glob("*_part*.cu")) == [
        "causal_conv1d_bwd_part1.cu",
        "causal_conv1d_bwd_part2.cu",
    ]


@pytest.mark.parametrize(
    ("rel", "old", "new", "anchor"),
    [
        ("setup.py", '"csrc/causal_conv1d_bwd.cu",', '"csrc/bwd.cu",', "causal_conv1d_bwd.cu"),
        (BWD, "template void causal_conv1d", "template void conv1d", "template void"),
        (
            BWD,
            "\ntemplate void causal_conv1d_bwd_cuda<float, float>",
            "\ntemplate void causal_conv1d_bwd_launch<128, 4, float, float>"
            "(ConvParamsBwd &params, cudaStream_t stream);"
            "\ntemplate void causal_conv1d_bwd_cuda<float, float>",
            "only the dispatchers' instantiations (found: template void causal_conv1d_bwd_launch",
        ),
        (
            BWD,
            "\ntemplate void causal_conv1d_bwd_cuda<float, float>",
            "\nvoid helper() {}\ntemplate void causal_conv1d_bwd_cuda<float, float>",
            "every definition inside a template (found: void helper() {})",
        ),
    ],
)
def test_drift_names_the_file_and_writes_nothing(
    tmp_path: Path, rel: str, old: str, new: str, anchor: str
) -> None:
    root = tree(tmp_path)
    path = root / rel
    assert old in path.read_text()
    path.write_text(path.read_text().replace(old, new))
    before = hashes(root)
    name = re.escape(Path(rel).name)
    with pytest.raises(PatchError, match=rf"split-units.*{name}.*{re.escape(anchor)}"):
        apply_patches(root, PatchOptions(archs=parse_archs("90")))
    assert hashes(root) == before


def test_skip_patch_keeps_the_units_whole(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert statuses(root, skip=("split-units",))["split-units"] == "skipped"
    assert not list((root / "csrc").glob("*_part*.cu"))


def defined_symbols(obj: Path) -> set[str]:
    """The causal_conv1d functions obj defines (explicit and implicit instantiations alike)."""
    out = proc.run(["nm", "-C", "--defined-only", str(obj)], timeout=60).stdout
    return {line.split(" ", 2)[2] for line in out.splitlines() if "causal_conv1d_" in line}


def gxx(root: Path, units: list[str], out: Path) -> tuple[list[set[str]], str]:
    """Compile each unit to an object; the symbols each defines, and what the linked caller
    prints."""
    out.mkdir()
    csrc = root / "csrc"
    objects = []
    for unit in units:
        obj = out / f"{unit}.o"
        argv = ["g++", "-std=c++17", "-O0", "-I", str(csrc), "-x", "c++", "-c"]
        proc.run([*argv, str(csrc / f"{unit}.cu"), "-o", str(obj)], timeout=300)
        objects.append(obj)
    exe = out / "caller"
    caller = ["g++", "-std=c++17", "-I", str(csrc), str(csrc / "caller.cpp")]
    proc.run([*caller, *map(str, objects), "-o", str(exe)], timeout=300)
    return [defined_symbols(o) for o in objects], proc.run([str(exe)], timeout=30).stdout


@pytest.mark.skipif(shutil.which("g++") is None or shutil.which("nm") is None, reason="g++, nm")
def test_split_objects_define_each_instantiation_once_and_behave_like_the_whole(
    tmp_path: Path,
) -> None:
    whole = tmp_path / "whole"
    split = tmp_path / "split"
    shutil.copytree(HOST_FIXTURE, whole)
    shutil.copytree(HOST_FIXTURE, split)
    assert apply_split(split) == "applied"
    units = ["causal_conv1d_fwd", "causal_conv1d_bwd"]
    before, printed = gxx(whole, units, tmp_path / "whole-obj")
    names = [p.stem for unit in units for p in pieces(split, unit)]
    assert len(names) == 10
    after, printed_split = gxx(split, names, tmp_path / "split-obj")
    seen: set[str] = set()
    for symbols in after:
        assert symbols, "an object without instantiations"
        assert not symbols & seen, f"defined in two objects: {sorted(symbols & seen)[:3]}"
        seen |= symbols
    assert seen == before[0] | before[1]
    assert printed_split == printed
    assert len(printed.splitlines()) == 72  # 2 widths x 9 combinations x 4 dispatchers


def test_four_archs_in_two_front_end_passes_split_bwd_per_dtype_combination(
    tmp_path: Path,
) -> None:
    """The part count follows the passes a proven unit gets: in bwd and fwd, 80/86/89 proven to
    share compute_80's (a table passed in) and 90 make two passes, so bwd splits as for two
    archs (causal_conv1d_update, unproven, keeps four: it is not split)."""
    entry = proof_entry(
        "causal-conv1d",
        "1.6.1",
        "torch",
        "13.0",
        "linux_x86_64",
        "80",
        ["80", "86", "89"],
        3,
        "§",
        units=["causal_conv1d_bwd", "causal_conv1d_fwd"],
    )
    facts = GroupFacts(
        "13.0", "linux_x86_64", parse_proofs(json.dumps({"schema": 1, "proofs": [entry]}))
    )
    options = PatchOptions(archs=parse_archs("80;86;89;90"), groups=facts)
    ctx = PatchContext(Version("1.6.1"), options, "split-units", "causal-conv1d")
    root = tree(tmp_path)
    staged = Tree(root)
    assert split_units.transform(staged, ctx) == "applied"
    for rel, data in staged.changed().items():
        if data is not None:
            (root / rel).write_bytes(data)
    assert len(pieces(root, "causal_conv1d_bwd")) == 9
    assert [split_units.parts_for("causal_conv1d_bwd", n) for n in (0, 2, 4)] == [3, 9, 3]
