from __future__ import annotations

import pytest

from mambawin.archs import Arch, format_archs, parse_archs
from mambawin.errors import UsageError


@pytest.mark.parametrize(
    "spelling",
    ["86;89", "86,89", "8.6 8.9", "sm_86;sm_89", "89 86", " 86 ; 89 ", "86;89;86"],
)
def test_every_documented_spelling_gives_the_same_list(spelling: str) -> None:
    assert parse_archs(spelling) == (Arch(8, 6), Arch(8, 9))


def test_repeated_options_are_merged() -> None:
    assert parse_archs(["86", "sm_89", "8.6"]) == (Arch(8, 6), Arch(8, 9))


def test_ptx_is_kept_and_wins_over_a_plain_duplicate() -> None:
    archs = parse_archs(["8.6+PTX", "86"])
    assert archs == (Arch(8, 6, ptx=True),)
    assert archs[0].gencode() == ["arch=compute_86,code=sm_86", "arch=compute_86,code=compute_86"]
    assert format_archs(archs) == "86+PTX"


def test_arch_specific_suffix_and_three_digit_archs() -> None:
    assert parse_archs("90a;120") == (Arch(9, 0, "a"), Arch(12, 0))
    assert parse_archs("sm_100")[0].torch_spec() == "10.0"


@pytest.mark.parametrize("bad", ["86a", "sm_89a", "8.9a+PTX", "90f", "compute_80f"])
def test_a_suffix_no_gpu_has_is_refused_before_nvcc_sees_it(bad: str) -> None:
    # 'a' targets start at sm_90a, 'f' at sm_100f: nvcc would fail minutes into a build.
    with pytest.raises(UsageError, match="targets start at sm_"):
        parse_archs(bad)


@pytest.mark.parametrize("bad", ["abc", "8.6.1", "sm_", "86+SASS", "0", "2.0", "", ";"])
def test_nonsense_is_one_clear_usage_error(bad: str) -> None:
    with pytest.raises(UsageError, match="--arch"):
        parse_archs(bad)


@pytest.mark.parametrize(
    ("arch", "cap", "runs"),
    [
        (Arch(8, 6), (8, 9), True),
        (Arch(8, 6), (9, 0), False),
        (Arch(9, 0, "a"), (9, 0), True),
        (Arch(9, 0, "a"), (10, 0), False),
        (Arch(10, 0, "f"), (10, 3), True),  # family code runs across its family
        (Arch(10, 0, "f"), (12, 0), False),
        (Arch(10, 0, "f", ptx=True), (12, 0), False),  # family PTX never leaves the family
        (Arch(8, 0, ptx=True), (12, 0), True),  # plain PTX JIT-compiles forward
        (Arch(9, 0, ptx=True), (8, 9), False),
    ],
)
def test_runs_on_is_the_one_fit_rule(arch: Arch, cap: tuple[int, int], runs: bool) -> None:
    assert arch.runs_on(cap) is runs


@pytest.mark.parametrize("spelling", ["٩٠", "９０", "sm_８６"])
def test_an_arch_in_other_scripts_digits_is_refused(spelling: str) -> None:
    with pytest.raises(UsageError, match="invalid CUDA arch"):
        parse_archs(spelling)  # \d read them as 90 and 86
