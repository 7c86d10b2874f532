"""Compile-equivalence proof for causal-conv1d: the patched kernels are the stock kernels.

alt-tokens and rocm-directives touch host code only (a TORCH_CHECK condition, the launchers'
HIP-only lines), so the device code must not change at all. For one old tag (v1.4.0) and the
newest tag they still patch (v1.6.0), the fwd and bwd sources are compiled to sm_90 cubins with
the real nvcc in a stock and a patched tree: the kernel entry symbols (the instantiations the
launchers make) and the machine code of every kernel (its `.text.<kernel>` ELF section, the bytes
cuobjdump -sass disassembles) must be identical. v1.6.1+ carry upstream's own fix, so the patches
leave their kernel sources as they are. Takes many minutes on 2 cores:
    MAMBAWIN_TEST_CAUSAL_CONV1D=REPO pytest -m slow tests/test_compile_equivalence_causal_conv1d.py
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from test_compile_equivalence import compile_cubins, kernel_symbols
from test_patches_kernels import clone, torch_nvcc_flags

from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches

pytestmark = [pytest.mark.slow, pytest.mark.upstream]

SOURCES = ("causal_conv1d_fwd.cu", "causal_conv1d_bwd.cu")
KERNEL_PATCHES = ("alt-tokens", "rocm-directives")


def code_per_kernel(cubin: bytes) -> dict[str, bytes]:
    """The bytes of every `.text.<kernel>` section of an ELF64 cubin, keyed by kernel name."""
    (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)
    ]
    names_at = sections[shstrndx][4]
    code: dict[str, bytes] = {}
    for name_at, _, _, _, offset, size, *_ in sections:
        name = cubin[names_at + name_at : cubin.index(b"\0", names_at + name_at)].decode("ascii")
        if name.startswith(".text."):
            code[name.removeprefix(".text.")] = cubin[offset : offset + size]
    return code


@pytest.fixture
def mirror() -> Path:
    value = os.environ.get("MAMBAWIN_TEST_CAUSAL_CONV1D")
    if not value:
        pytest.skip("MAMBAWIN_TEST_CAUSAL_CONV1D is not set (a Dao-AILab/causal-conv1d git repo)")
    return Path(value)


@pytest.mark.parametrize("ref", ["v1.4.0", "v1.6.0"])
def test_patched_kernels_compile_to_the_same_machine_code(
    mirror: Path, tmp_path: Path, ref: str
) -> None:
    stock, patched = (clone(mirror, ref, tmp_path / name) for name in ("stock", "patched"))
    report = apply_patches(patched, PatchOptions(), only=KERNEL_PATCHES, package=CAUSAL_CONV1D)
    assert {r.id: r.status for r in report.results if r.id in KERNEL_PATCHES} == dict.fromkeys(
        KERNEL_PATCHES, "applied"
    )
    jobs = [
        (tree / "csrc" / src, tmp_path / f"{tree.name}-{src}.cubin")
        for tree in (stock, patched)
        for src in SOURCES
    ]
    compile_cubins(jobs, torch_nvcc_flags())
    for src in SOURCES:
        before, after = tmp_path / f"stock-{src}.cubin", tmp_path / f"patched-{src}.cubin"
        symbols = kernel_symbols(before.read_bytes())
        assert symbols, src
        assert kernel_symbols(after.read_bytes()) == symbols, src
        code = code_per_kernel(before.read_bytes())
        assert set(code) == symbols, src
        assert code_per_kernel(after.read_bytes()) == code, src
