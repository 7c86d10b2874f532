"""Compile-equivalence proof: the patched kernels instantiate exactly the stock kernels.

For v2.2.6 and main, the three fwd and the three bwd *_real sources are compiled to sm_90 cubins
with the real nvcc (upstream setup.py's flags) in three trees: stock, patched with keep_complex,
and patched without complex. The kernel entry symbols read from each cubin's ELF symbol table must
match: patched-with-complex == stock, and patched-without-complex == stock minus complex<float>.
Takes many minutes on 2 cores: run with `pytest -m slow tests/test_compile_equivalence.py`.

The SASS test goes further than names: for one tag before v2.2.6 and one after, the fwd_fp32 and
bwd_fp32_real sources of a stock and a patched tree are compiled to sm_90 cubins and every kernel
both hold must disassemble (`cuobjdump -sass`) to the same instructions and encodings: the patches
change how kernels are chosen and named on Windows, never the code a GPU runs.
"""

from __future__ import annotations

import re
import struct
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.version import Version
from test_patches_kernels import (
    KERNELS,
    apply_kernel_patches,
    clone,
    torch_nvcc_flags,
    upstream_version,
)

from mambawin import proc
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches
from mambawin.wheel import sass as wheel_sass
from mambawin.wheel.gpucode import find_cuobjdump

pytestmark = [pytest.mark.slow, pytest.mark.upstream]

FWD = tuple(f"selective_scan_fwd_{t}.cu" for t in ("fp32", "fp16", "bf16"))
BWD = tuple(f"selective_scan_bwd_{t}_real.cu" for t in ("fp32", "fp16", "bf16"))
# The device-side flags of upstream setup.py (every tag), without -lineinfo/--ptxas-options=-v.
UPSTREAM_FLAGS = (
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__",
    "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr",
    "--expt-extended-lambda",
    "--use_fast_math",
)
CUDA_CONFIGS = {(32, 4), (32, 8), (32, 16), (64, 16), (128, 16)}  # (kNThreads, kNItems)
_TRAITS = re.compile(r"_kernel_traitsI((?:L[a-z]\d+E)+)(.*)EEv")
STT_FUNC, STB_GLOBAL, SHT_SYMTAB = 2, 1, 2


def kernel_symbols(cubin: bytes) -> set[str]:
    """Names of the global function symbols (the `.entry` kernels) of an ELF64 cubin."""
    assert cubin[:4] == b"\x7fELF" and cubin[4] == 2, "not an ELF64 cubin"
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    names: set[str] = set()
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != SHT_SYMTAB:
            continue
        strtab_offset = sections[link][4]
        for pos in range(offset, offset + size, entsize):
            name_at, info = struct.unpack_from("<IB", cubin, pos)
            if info & 0xF == STT_FUNC and info >> 4 == STB_GLOBAL:
                end = cubin.index(b"\0", strtab_offset + name_at)
                names.add(cubin[strtab_offset + name_at : end].decode("ascii"))
    return names


def compile_cubins(jobs: list[tuple[Path, Path]], flags: list[str]) -> None:
    """nvcc -cubin for sm_90, two at a time (the 2-core budget this proof was written for)."""
    nvcc = proc.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")

    def one(job: tuple[Path, Path]) -> None:
        source, out = job
        proc.run(
            [
                nvcc,
                "-cubin",
                "-arch=sm_90",
                *UPSTREAM_FLAGS,
                *flags,
                "-I",
                source.parent,
                source,
                "-o",
                out,
            ],
            timeout=1800,
        )

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(one, jobs))


def variants_per_config(symbols: set[str]) -> Counter[tuple[str, ...]]:
    """How many kernels each (kNThreads, kNItems, input_t, weight_t) configuration has."""
    counts: Counter[tuple[str, ...]] = Counter()
    for name in symbols:
        match = _TRAITS.search(name)
        assert match, f"unexpected kernel symbol {name}"
        ints = re.findall(r"L[a-z](\d+)E", match.group(1))
        counts[(ints[0], ints[1], match.group(2))] += 1
    return counts


def is_complex(symbol: str) -> bool:
    return "complexIf" in symbol  # c10::complex<float> in the Itanium mangling


def prepare(repo: Path, ref: str, tmp_path: Path) -> dict[str, Path]:
    """Three checkouts of ref: stock, patched keeping complex, patched without complex."""
    trees = {name: clone(repo, ref, tmp_path / name) for name in ("stock", "keep", "lean")}
    keep = apply_kernel_patches(trees["keep"], keep_complex=True)
    assert keep["complex-removal"] == "skipped" and keep["bool-switch"] == "applied", keep
    lean = apply_kernel_patches(trees["lean"])
    assert lean["complex-removal"] == "applied" and lean["bool-switch"] == "applied", lean
    return trees


@pytest.mark.parametrize("ref", ["v2.2.6", "main"])
def test_patched_kernels_equal_stock(upstream_repo: Path, tmp_path: Path, ref: str) -> None:
    trees = prepare(upstream_repo, ref, tmp_path)
    kernels = {name: root / KERNELS for name, root in trees.items()}
    for source in BWD:  # complex-removal does not touch the bwd real files: compile them once
        assert (kernels["lean"] / source).read_bytes() == (kernels["keep"] / source).read_bytes()
    jobs = [
        (kernels[tree] / src, tmp_path / f"{tree}-{src}.cubin")
        for tree, sources in (("stock", FWD + BWD), ("keep", FWD + BWD), ("lean", FWD))
        for src in sources
    ]
    compile_cubins(jobs, torch_nvcc_flags())
    symbols = {out.name: kernel_symbols(out.read_bytes()) for _, out in jobs}
    for src in FWD + BWD:
        stock, keep = symbols[f"stock-{src}.cubin"], symbols[f"keep-{src}.cubin"]
        assert stock, src
        assert keep == stock, (src, sorted(stock ^ keep)[:5])
        per_config = variants_per_config(stock)
        assert {(int(t), int(i)) for t, i, _ in per_config} == CUDA_CONFIGS, src
        assert set(per_config.values()) == {16 if src in FWD else 32}, (src, per_config)
    for src in FWD:
        stock, lean = symbols[f"stock-{src}.cubin"], symbols[f"lean-{src}.cubin"]
        assert any(is_complex(name) for name in stock), src
        assert lean == {name for name in stock if not is_complex(name)}, src
        assert len(lean) == len(stock) // 2 == 80, src


# ---- SASS per kernel ----------------------------------------------------------------------------

# v2.1.0 predates upstream's own CUDA 13 fix (v2.2.6); v2.3.2.post1 is the newest release.
SASS_REFS = ("v2.1.0", "v2.3.2.post1")
SASS_SOURCES = ("selective_scan_fwd_fp32.cu", "selective_scan_bwd_fp32_real.cu")


def sass_of(cuobjdump: str, cubin: Path) -> dict[str, tuple[str, ...]]:
    return wheel_sass.sass_of(cuobjdump, cubin)


def stock_tree(repo: Path, ref: str, dest: Path) -> Path:
    """ref as upstream tagged it; before v2.2.6 with upstream's own CUDA 13 fix, or nvcc 13 fails.

    cuda13-cub makes the v2.2.6 change (PR #776: cub::LaneId() -> threadIdx.x & 0x1f), so the
    stock side is what upstream itself would compile today, and both sides build with one nvcc.
    """
    root = clone(repo, ref, dest)
    if upstream_version(root) < Version("2.2.6"):
        report = apply_patches(root, PatchOptions(), only=("cuda13-cub",))
        assert [r.status for r in report.results if r.id == "cuda13-cub"] == ["applied"]
    return root


@pytest.mark.parametrize("ref", SASS_REFS)
def test_patched_kernels_have_the_stock_sass(upstream_repo: Path, tmp_path: Path, ref: str) -> None:
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    stock = stock_tree(upstream_repo, ref, tmp_path / "stock")
    patched = clone(upstream_repo, ref, tmp_path / "patched")
    statuses = apply_kernel_patches(patched)
    assert statuses["bool-switch"] == "applied" == statuses["complex-removal"], statuses
    jobs = [
        (root / KERNELS / src, tmp_path / f"{name}-{src}.cubin")
        for name, root in (("stock", stock), ("patched", patched))
        for src in SASS_SOURCES
    ]
    compile_cubins(jobs, torch_nvcc_flags())
    for src in SASS_SOURCES:
        before = sass_of(cuobjdump, tmp_path / f"stock-{src}.cubin")
        after = sass_of(cuobjdump, tmp_path / f"patched-{src}.cubin")
        common = sorted(before.keys() & after.keys())
        same = [name for name in common if before[name] == after[name]]
        print(
            f"SASS {ref} {src} sm_90: stock {len(before)} kernels, patched {len(after)}, "
            f"identical SASS for {len(same)} of {len(common)} common kernels"
        )
        # complex-removal drops the complex<float> fwd kernels; nothing is ever added.
        lost = {name for name in before.keys() - after.keys() if not is_complex(name)}
        assert after.keys() <= before.keys() and not lost, sorted(after.keys() ^ before.keys())
        assert common, src
        assert same == common, sorted(set(common) - set(same))[:3]
