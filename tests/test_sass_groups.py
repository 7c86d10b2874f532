"""The front-end proof's own scripts: benchmarks/sass_variants.py rewrites the baked -gencode block
into one shared pass (and leaves it for `per`), benchmarks/sass_groups.py counts a split part
for its unit and turns per-unit verdicts into proof entries only where every kernel matched."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

BAKED = """\
    if not getattr(torch.version, "hip", None):
        cc_flag = [f for f in cc_flag if f != "-gencode" and "arch=" not in f]
        cc_flag += ["-gencode", "arch=compute_80,code=sm_80"]
        cc_flag += ["-gencode", "arch=compute_86,code=sm_86"]
        cc_flag += ["-gencode", "arch=compute_90,code=sm_90"]
    # <<< mambawin arch-list
"""


@pytest.fixture
def scripts(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import sass_groups
    import sass_variants

    return sass_variants, sass_groups


def test_a_variant_replaces_the_whole_baked_block(
    scripts: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    variants, _ = scripts
    setup = tmp_path / "setup.py"
    setup.write_text(BAKED)
    variants.rewrite(setup, variants.gencode_line("g80=80:86"))
    text = setup.read_text()
    assert 'cc_flag += ["-gencode", "arch=compute_80,code=[sm_80,sm_86]"]\n' in text
    assert "code=sm_" not in text and text.count("-gencode") == 2  # the filter line and ours
    setup.write_text(BAKED)
    variants.rewrite(setup, variants.gencode_line("per"))
    assert setup.read_text() == BAKED


def test_an_unpatched_setup_is_refused(
    scripts: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    variants, _ = scripts
    setup = tmp_path / "setup.py"
    setup.write_text('cc_flag.append("arch=compute_80,code=sm_80")\n')
    with pytest.raises(SystemExit, match="mambawin patch --arch"):
        variants.rewrite(setup, variants.gencode_line("g80=80:86"))


def test_a_part_counts_for_its_unit(scripts: tuple[ModuleType, ModuleType]) -> None:
    _, groups = scripts
    assert groups.unit_of(Path("selective_scan_bwd_fp16_real_part1.o")) == (
        "selective_scan_bwd_fp16_real"
    )
    assert groups.unit_of(Path("causal_conv1d_fwd.o")) == "causal_conv1d_fwd"


def test_only_units_whose_every_kernel_matched_are_proven(
    scripts: tuple[ModuleType, ModuleType],
) -> None:
    _, groups = scripts
    table = [
        {"ptx": "80", "arch": "86", "unit": "fwd", "kernels": 10, "same": True},
        {"ptx": "80", "arch": "89", "unit": "fwd", "kernels": 10, "same": True},
        {"ptx": "80", "arch": "86", "unit": "update", "kernels": 5, "same": False},
        {"ptx": "80", "arch": "89", "unit": "update", "kernels": 5, "same": True},
        {"ptx": "80", "arch": "86", "unit": "bwd", "kernels": 7, "same": False},
        {"ptx": "80", "arch": "89", "unit": "bwd", "kernels": 7, "same": False},
    ]
    args = argparse.Namespace(
        package="causal-conv1d",
        version="1.5.0.post8",
        abi="torch",
        cuda="13.0",
        platform="linux_x86_64",
        evidence="docs/benchmarks.md",
    )
    entries = groups.unit_proofs(args, table)
    found = {tuple(e["archs"]): (e["units"], e["kernels"]) for e in entries}
    assert found == {("80", "86", "89"): (["fwd"], 20), ("80", "89"): (["update"], 5)}
