"""The compiler-flags patch's flags, run through the real g++ and nvcc: the objects hold no path
of the folder they were built in (the unit tests only read the command lines)."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pytest
from packaging.version import Version

from mambawin import proc
from mambawin.builder.environment import OBJDIR_AS_TEMPDIR, RANDOM_SEED
from mambawin.patch.setup_py import compiler_flags

HEADER = "#pragma once\ninline const char* header_file() { return __FILE__; }\n"
UNIT = (
    '#include "h.h"\nconst char* unit_file() { return __FILE__; }\n'
    "const char* from_header() { return header_file(); }\n"
)
KERNEL = (
    '#include "h.h"\n__global__ void twice(float* x) { x[threadIdx.x] *= 2; }\n'
    "const char* unit_file() { return __FILE__; }\n"
    "const char* from_header() { return header_file(); }\n"
)
# Internal linkage: nvcc names these `_GLOBAL__N__<hash>…` / `_INTERNAL_<hash>…`, the hash taken
# from the source's absolute path unless the patch fixes it.
INTERNAL_KERNEL = (
    KERNEL
    + "namespace { __global__ void thrice(float* x) { x[threadIdx.x] *= 3; } }\n"
    + "static __device__ float half(float v) { return v / 2; }\n"
    + "__global__ void halve(float* x) { x[threadIdx.x] = half(x[threadIdx.x]); }\n"
    + "void launch(float* x) { thrice<<<1, 32>>>(x); halve<<<1, 32>>>(x); }\n"
)


class _Ext:
    def __init__(self) -> None:
        self.name = "kernel_ext"
        self.extra_compile_args: dict[str, list[str]] = {
            "cxx": ["-O3"],
            "nvcc": ["-O3", "-lineinfo", "-gencode", "arch=compute_90,code=sm_90"],
        }


def patched_flags(torch_dir: Path, cuda_home: str | None) -> dict[str, list[str]]:
    """The flags the patch's block gives on Linux, run as setup.py would run it."""
    ext = _Ext()
    exec(
        compiler_flags.BLOCK,
        {
            "os": os,
            "re": re,
            "sys": sys,
            "Version": Version,
            "ext_modules": [ext],
            "torch": types.SimpleNamespace(
                __file__=str(torch_dir / "__init__.py"), version=types.SimpleNamespace(hip=None)
            ),
            "CUDA_HOME": cuda_home,
            "get_cuda_bare_metal_version": lambda _home: ("", Version("12.8")),
        },
    )
    return ext.extra_compile_args


def tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel: str = KERNEL
) -> tuple[Path, Path]:
    root = tmp_path / "build_tree_marker"
    (root / "csrc").mkdir(parents=True)
    torch_include = tmp_path / "site_marker" / "torch" / "include"
    torch_include.mkdir(parents=True)
    (torch_include / "h.h").write_text(HEADER)
    (root / "csrc" / "unit.cpp").write_text(UNIT)
    (root / "csrc" / "kernel.cu").write_text(kernel)
    monkeypatch.chdir(root)
    return root, torch_include.parent


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="gcc's flags are the Linux build's")
def test_gpp_objects_name_no_build_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gxx = proc.which("g++")
    if gxx is None:
        pytest.skip("no g++")
    root, torch_dir = tree(tmp_path, monkeypatch)
    cxx = [f for f in patched_flags(torch_dir, None)["cxx"] if not f.startswith("-std=")]
    obj = tmp_path / "unit.o"
    source = str(root / "csrc" / "unit.cpp")  # absolute, as torch's ninja file names it
    proc.run([gxx, *cxx, f"-I{torch_dir / 'include'}", "-c", source, "-o", str(obj)])
    data = obj.read_bytes()
    assert b"build_tree_marker" not in data and b"site_marker" not in data
    assert b"./csrc/unit.cpp" in data and b"torch/include/h.h" in data


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="gcc's flags are the Linux build's")
def test_debug_info_names_no_build_folder_beside_the_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mambawin's builds compile in a build folder beside the tree (its cwd), and Python's CFLAGS
    carry -g: the debug info's DW_AT_comp_dir was that folder's absolute path (a stable wheel
    built on the H100 showed it, docs/benchmarks.md section 16)."""
    gxx = proc.which("g++")
    if gxx is None:
        pytest.skip("no g++")
    root, torch_dir = tree(tmp_path, monkeypatch)
    cxx = [f for f in patched_flags(torch_dir, None)["cxx"] if not f.startswith("-std=")]
    build = tmp_path / "build" / "temp_marker"
    build.mkdir(parents=True)
    source = str(root / "csrc" / "unit.cpp")
    include = f"-I{torch_dir / 'include'}"
    proc.run([gxx, "-g", *cxx, include, "-c", source, "-o", "unit.o"], cwd=build)
    data = (build / "unit.o").read_bytes()
    assert str(tmp_path).encode() not in data
    # The patch's -g0 comes after Python's -g: the binding has no debug info at all now; where a
    # compiler keeps some, the folders in it are the mapped ones.
    if b".debug_info" in data:
        assert b"../build/temp_marker" in data and b"./csrc/unit.cpp" in data


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="gcc's flags are the Linux build's")
def test_nvcc_objects_name_no_build_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = proc.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    root, torch_dir = tree(tmp_path, monkeypatch)
    flags = patched_flags(torch_dir, str(Path(nvcc).resolve().parent.parent))
    assert "-lineinfo" not in flags["nvcc"]
    nvcc_flags = [f for f in flags["nvcc"] if not f.startswith("-std=")]
    obj = tmp_path / "kernel.o"
    source = str(root / "csrc" / "kernel.cu")
    proc.run([nvcc, *nvcc_flags, f"-I{torch_dir / 'include'}", "-c", source, "-o", str(obj)])
    data = obj.read_bytes()
    assert b"build_tree_marker" not in data and b"site_marker" not in data
    assert b"./csrc/kernel.cu" in data and b"torch/include/h.h" in data


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="gcc's flags are the Linux build's")
def test_one_kernel_in_two_folders_gives_one_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the paths mapped, -lineinfo gone and nvcc's front ends given one fixed source path,
    nvcc's object no longer depends on the folder: two cache folders (two machines) give
    byte-identical objects, internal-linkage kernels included (without the fixed path their
    `_GLOBAL__N__<hash>` names follow each folder; docs/build.md, "Reproducible")."""
    nvcc = proc.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    release = re.search(r"release (\d+\.\d+)", proc.run([nvcc, "--version"]).stdout)
    if release is None or Version(release.group(1)) < Version("12.9"):
        pytest.skip("--frandom-seed needs nvcc 12.9+")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", f"{OBJDIR_AS_TEMPDIR} {RANDOM_SEED}")
    objects = []
    for place in ("one", "two/deeper"):
        root, torch_dir = tree(tmp_path / place, monkeypatch, INTERNAL_KERNEL)
        flags = patched_flags(torch_dir, str(Path(nvcc).resolve().parent.parent))
        nvcc_flags = [f for f in flags["nvcc"] if not f.startswith("-std=")]
        obj = root / "kernel.o"
        source = str(root / "csrc" / "kernel.cu")
        proc.run([nvcc, *nvcc_flags, f"-I{torch_dir / 'include'}", "-c", source, "-o", str(obj)])
        objects.append(obj.read_bytes())
    assert b"_GLOBAL__N__" in objects[0]  # the unit has internal-linkage kernels
    assert objects[0] == objects[1]
