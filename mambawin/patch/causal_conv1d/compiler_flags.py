"""compiler-flags for causal-conv1d: the C++ standard and MSVC spellings are decided at build time.

Why: setup.py passes gcc-style `-O3` to cl.exe (D9002) and, like mamba, builds against torch headers
that demand C++20 in newer torch (2.14, 2.15) ("#error C++20 or later compatible compiler is
required to use ATen"); CUDA 13.2's CCCL needs /Zc:preprocessor with MSVC. Every tag has the helpers
the injected block calls (get_cuda_bare_metal_version, CUDA_HOME, Version, re, sys) and a
module-level `setup(` line, so mamba's block is inserted unchanged."""

from __future__ import annotations

from dataclasses import replace

from packaging.specifiers import SpecifierSet

from mambawin.patch.setup_py import compiler_flags as shared

PATCH = replace(
    shared.PATCH,
    versions=SpecifierSet(">=1.0.0"),
    why="upstream hard-codes gcc-style -O3 (and -std=c++17 for HIP) in every tag; newer torch "
    "headers need C++20 (2.14, 2.15; 2.11 takes C++17), read from the installed torch; "
    "pytorch#148317 (/Zc:preprocessor)",
)
