"""split-units changes which object holds a kernel, never the kernel.

For an old tag (v2.0.4, a dispatcher without a ROCm branch) and a new one (v2.3.2.post1), the
bwd_fp32_real unit is compiled to sm_90 cubins with the real nvcc twice: from the tree patched
without split-units (one unit) and from the tree patched with it (the unit, keeping the first
group of launch configs, and its parts). The split side must hold exactly the same kernels, each
in exactly one object, with the same SASS instruction by instruction (`cuobjdump -sass`), and the
unit itself must hold kernels (its first group), not only the dispatcher; the same for fwd_fp32
(2 objects at one arch). Needs nvcc,
cuobjdump, torch's headers and MAMBAWIN_TEST_UPSTREAM: `pytest -m slow
tests/test_split_equivalence.py` (minutes on many cores; docs/benchmarks.md has the run).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_compile_equivalence import UPSTREAM_FLAGS, sass_of
from test_patches_kernels import KERNELS, clone, torch_nvcc_flags

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.wheel.gpucode import find_cuobjdump

pytestmark = [pytest.mark.slow, pytest.mark.upstream]

OBJECTS = {"selective_scan_fwd_fp32": 2, "selective_scan_bwd_fp32_real": 4}  # at sm_90
UNITS = tuple(OBJECTS)


def patched(repo: Path, ref: str, dest: Path, *, split: bool) -> Path:
    root = clone(repo, ref, dest)
    skip = () if split else ("split-units",)
    report = apply_patches(root, PatchOptions(archs=parse_archs("90")), skip=skip)
    status = {r.id: r.status for r in report.results}["split-units"]
    assert status == ("applied" if split else "skipped"), status
    return root


def cubins(jobs: list[tuple[Path, Path]]) -> None:
    nvcc = proc.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    flags = [*UPSTREAM_FLAGS, *torch_nvcc_flags()]

    def one(job: tuple[Path, Path]) -> None:
        source, out = job
        argv = [nvcc, "-cubin", "-arch=sm_90", *flags, "-I", source.parent, source, "-o", out]
        proc.run(argv, timeout=3600)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(one, jobs))


@pytest.mark.parametrize("ref", ["v2.0.4", "v2.3.2.post1"])
def test_split_units_hold_the_same_kernels_with_the_same_sass(
    upstream_repo: Path, tmp_path: Path, ref: str
) -> None:
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    whole = patched(upstream_repo, ref, tmp_path / "whole", split=False)
    split = patched(upstream_repo, ref, tmp_path / "split", split=True)
    pieces = {
        unit: sorted([unit, *(p.stem for p in (split / KERNELS).glob(f"{unit}_part*.cu"))])
        for unit in UNITS
    }
    jobs = [(whole / KERNELS / f"{u}.cu", tmp_path / f"whole-{u}.cubin") for u in UNITS]
    jobs += [
        (split / KERNELS / f"{p}.cu", tmp_path / f"split-{p}.cubin")
        for names in pieces.values()
        for p in names
    ]
    cubins(jobs)
    for unit in UNITS:
        before = sass_of(cuobjdump, tmp_path / f"whole-{unit}.cubin")
        after: dict[str, tuple[str, ...]] = {}
        for piece in pieces[unit]:
            found = sass_of(cuobjdump, tmp_path / f"split-{piece}.cubin")
            assert not (found.keys() & after.keys()), f"a kernel in two objects: {piece}"
            assert found, f"{piece} holds no kernel"
            after.update(found)
        print(
            f"SPLIT {ref} {unit} sm_90: {len(pieces[unit])} objects, {len(after)} kernels "
            f"(whole: {len(before)}), identical SASS for "
            f"{sum(before[k] == after.get(k) for k in before)}"
        )
        assert len(pieces[unit]) == OBJECTS[unit]
        assert after.keys() == before.keys()
        assert [k for k in before if before[k] != after[k]] == []
