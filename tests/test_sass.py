"""SASS per kernel (mambawin.wheel.sass): what the shared front-end pass's proof compares.

The fixtures are hand-written in cuobjdump's `-sass` layout: the same two kernels, one built from
compute_80 PTX and one from compute_86, padded differently, the internal one named by two
different path hashes.
"""

from __future__ import annotations

from pathlib import Path

from mambawin.wheel.sass import compare_sass, sass_per_kernel

HERE = Path(__file__).parent / "fixtures" / "sass"


def read(name: str, **kwargs: bool) -> dict[str, tuple[str, ...]]:
    return sass_per_kernel((HERE / name).read_text(), **kwargs)


def test_padding_and_headerflags_are_not_instructions() -> None:
    a, b = read("a.txt"), read("b.txt")
    assert a["_Z6scaleILi4EEvPf"] == b["_Z6scaleILi4EEvPf"]
    assert a["_Z6scaleILi4EEvPf"][0] == "/*0000*/ MOV R1, c[0x0][0x28] ; /* 0x00000a0000017a02 */"
    assert len(a["_Z6scaleILi4EEvPf"]) == 4  # two instructions, each two encoding halves


def test_where_a_fatbin_ends_is_not_part_of_its_last_kernel() -> None:
    """Two builds that split the same kernels over other objects hold them in other fatbins: the
    header of the next fatbin follows the last kernel of each, and must not count (a wheel-level
    comparison of 057377b's two-object split against a four-object one saw 9 false differences)."""
    text = (HERE / "a.txt").read_text()
    head = text[: text.index("\t\tFunction")]
    split = text.replace("\t\tFunction : _ZN43", head + "\t\tFunction : _ZN43", 1)
    assert split.count("Fatbin elf code:") == 2
    assert sass_per_kernel(split) == read("a.txt")


def test_path_hashes_differ_unless_read_as_one_name() -> None:
    plain = compare_sass("sm_86", read("a.txt"), read("b.txt"))
    assert not plain.same and plain.identical == 1
    assert len(plain.only_reference) == len(plain.only_candidate) == 1
    named = compare_sass(
        "sm_86", read("a.txt", same_internal_names=True), read("b.txt", same_internal_names=True)
    )
    assert named.same and named.identical == named.kernels == 2


def test_one_changed_instruction_names_its_kernel() -> None:
    text = (HERE / "b.txt").read_text().replace("MOV R1, c[0x0][0x28]", "MOV R2, c[0x0][0x28]")
    found = compare_sass("sm_86", read("a.txt"), sass_per_kernel(text))
    assert found.differing == ("_Z6scaleILi4EEvPf",)
    assert not found.same and found.to_json()["identical"] == 0


def test_nothing_to_compare_is_no_proof() -> None:
    assert not compare_sass("sm_90", {}, {}).same
