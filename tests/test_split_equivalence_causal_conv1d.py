"""causal-conv1d's split-units changes which object holds a kernel, never the kernel.

For an old tag (v1.5.4: bwd with 4 channel-last switches) and the newest (v1.6.1.post4: 5, plus
the deterministic switch in both layouts), causal_conv1d_fwd.cu and causal_conv1d_bwd.cu are
compiled to sm_90 cubins with the real nvcc twice: from the tree patched without split-units (one
unit each) and from the tree patched with it for one arch (the unit and its parts: fwd 3 objects,
bwd 9). The split side must hold exactly the same kernels, each in exactly one object, with the
same SASS instruction by instruction (`cuobjdump -sass`). Each compile's seconds are printed.
Needs nvcc, cuobjdump, torch's headers and MAMBAWIN_TEST_CAUSAL_CONV1D; compiles as many units at
once as the machine has cores (MAMBAWIN_TEST_JOBS overrides):
    MAMBAWIN_TEST_CAUSAL_CONV1D=REPO pytest -m slow -s tests/test_split_equivalence_causal_conv1d.py
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_compile_equivalence import UPSTREAM_FLAGS, sass_of
from test_patches_kernels import clone, torch_nvcc_flags

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import PatchOptions
from mambawin.patch.causal_conv1d import split_units
from mambawin.patch.engine import apply_patches
from mambawin.wheel.gpucode import find_cuobjdump

pytestmark = [pytest.mark.slow, pytest.mark.upstream]

CSRC = "csrc"


@pytest.fixture
def mirror() -> Path:
    value = os.environ.get("MAMBAWIN_TEST_CAUSAL_CONV1D")
    if not value:
        pytest.skip("MAMBAWIN_TEST_CAUSAL_CONV1D is not set (a Dao-AILab/causal-conv1d git repo)")
    return Path(value)


def patched(repo: Path, ref: str, dest: Path, *, split: bool) -> Path:
    root = clone(repo, ref, dest)
    skip = () if split else ("split-units",)
    options = PatchOptions(archs=parse_archs("90"))
    report = apply_patches(root, options, skip=skip, package=CAUSAL_CONV1D)
    status = {r.id: r.status for r in report.results}["split-units"]
    assert status == ("applied" if split else "skipped"), status
    return root


def cubins(jobs: list[tuple[Path, Path]]) -> dict[str, float]:
    """Compile every (source, cubin) for sm_90; the seconds each compile took, by cubin name."""
    nvcc = proc.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    flags = [*UPSTREAM_FLAGS, *torch_nvcc_flags()]
    workers = int(os.environ.get("MAMBAWIN_TEST_JOBS") or os.cpu_count() or 2)

    def one(job: tuple[Path, Path]) -> tuple[str, float]:
        source, out = job
        argv = [nvcc, "-cubin", "-arch=sm_90", *flags, "-I", source.parent, source, "-o", out]
        start = time.monotonic()
        proc.run(argv, timeout=3600)
        return out.name, round(time.monotonic() - start, 1)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, jobs))


# v1.7.0 is a release on the package index only (no tag in the repository): a repository with its
# extracted sdist committed and tagged v1.7.0 stands in for it (docs/benchmarks.md §24).
@pytest.mark.parametrize("ref", ["v1.5.4", "v1.6.1.post4", "v1.7.0"])
def test_split_units_hold_the_same_kernels_with_the_same_sass(
    mirror: Path, tmp_path: Path, ref: str
) -> None:
    tagged = proc.run(["git", "-C", str(mirror), "tag", "--list", ref]).stdout.split()
    if ref not in tagged:
        pytest.skip(f"{mirror} has no tag {ref}")
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    whole = patched(mirror, ref, tmp_path / "whole", split=False)
    split = patched(mirror, ref, tmp_path / "split", split=True)
    pieces = {
        unit: [unit, *sorted(p.stem for p in (split / CSRC).glob(f"{unit}_part*.cu"))]
        for unit in split_units.UNITS
    }
    # bwd first, the whole units before the parts: the longest compiles start first.
    units = sorted(split_units.UNITS, key=lambda u: "_bwd" not in u)
    jobs = [(whole / CSRC / f"{u}.cu", tmp_path / f"whole-{u}.cubin") for u in units]
    jobs += [
        (split / CSRC / f"{p}.cu", tmp_path / f"split-{p}.cubin") for u in units for p in pieces[u]
    ]
    seconds = cubins(jobs)
    print(f"SECONDS {ref} sm_90: {seconds}")
    for unit in split_units.UNITS:
        assert len(pieces[unit]) == split_units.parts_for(unit, 1)
        before = sass_of(cuobjdump, tmp_path / f"whole-{unit}.cubin")
        after: dict[str, tuple[str, ...]] = {}
        for piece in pieces[unit]:
            found = sass_of(cuobjdump, tmp_path / f"split-{piece}.cubin")
            assert found, f"{piece} holds no kernel"
            assert not (found.keys() & after.keys()), f"a kernel in two objects: {piece}"
            after.update(found)
        print(
            f"SPLIT {ref} {unit} sm_90: {len(pieces[unit])} objects, {len(after)} kernels "
            f"(whole: {len(before)}), identical SASS for "
            f"{sum(before[k] == after.get(k) for k in before)}"
        )
        assert after.keys() == before.keys()
        assert [k for k in before if before[k] != after[k]] == []
