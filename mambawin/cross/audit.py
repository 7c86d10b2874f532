"""Check a cross-built library statically: what its PE import table names, and its GPU code.

A stable library may import only
- torch's stable C ABI, from torch_cpu.dll and torch_cuda.dll, each name a C name
  (`aoti_torch_*`, `torch_*`): no c10/torch C++ symbol, no torch_python, no python3XX.dll;
- the C/C++ runtime: MSVCP140*.dll, VCRUNTIME140*.dll, the UCRT's api-ms-win-crt-*.dll
  (ucrtbase.dll when a linker names it directly) and KERNEL32.dll.
The CUDA runtime is linked in (cudart_static), so no cudart64_*.dll may appear. The import table
is read whole with pefile (wheel.imports); the GPU code from the `.nv_fatb` section with
wheel/gpucode.py's fatbin reader (cuobjdump on Linux reads no PE file).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mambawin.archs import Arch
from mambawin.errors import WheelError
from mambawin.wheel.gpucode import GpuCode, read_fatbin
from mambawin.wheel.imports import read_imports
from mambawin.winbuild.torch_exports import is_stable_c_name

TORCH_DLLS = ("torch_cpu.dll", "torch_cuda.dll")
_RUNTIME_DLLS = re.compile(
    r"^(kernel32|msvcp140(_\d+|_atomic_wait|_codecvt_ids)?|vcruntime140(_1|_threads)?|ucrtbase"
    r"|api-ms-win-crt-[a-z]+-l\d+-\d+-\d+)\.dll$",
    re.IGNORECASE,
)

Imports = Mapping[str, tuple[str, ...]]  # DLL -> imported names (ordinals as "#N")


@dataclass(frozen=True)
class Audit:
    """What the library imports and carries, and every way it breaks the stable contract."""

    imports: Imports
    gpu: GpuCode
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def pe_imports(library: Path) -> dict[str, tuple[str, ...]]:
    """Each DLL the PE file imports from (delay-loaded ones too), with the names (or `#ordinal`)
    it imports: read whole by wheel.imports (a table pefile cannot read fully is a WheelError,
    never "no imports")."""
    try:
        data = library.read_bytes()
    except OSError as exc:
        raise WheelError(f"{library} cannot be read: {exc}") from None
    if data[:2] != b"MZ":
        raise WheelError(f"{library} is not a PE file: rebuild it")
    imports = read_imports(data, library.name)
    found: dict[str, list[str]] = {dll: [] for dll in imports.libraries}
    for symbol in imports.symbols:
        found.setdefault(symbol.library or "", []).append(symbol.name)
    return {dll: tuple(names) for dll, names in found.items()}


def import_problems(imports: Imports) -> list[str]:
    """Every DLL and torch symbol outside the stable contract, one line each."""
    problems = []
    for dll, names in imports.items():
        if dll.lower() in TORCH_DLLS:
            foreign = [n for n in names if not is_stable_c_name(n)]
            if foreign:
                problems.append(f"{dll}: not torch's stable C ABI: {', '.join(foreign[:5])}")
        elif not _RUNTIME_DLLS.match(dll):
            problems.append(f"imports {dll}: neither torch's stable ABI nor the C/C++ runtime")
    return problems


def gpu_problems(gpu: GpuCode, archs: Sequence[Arch]) -> list[str]:
    """Each requested arch whose SASS (or PTX, for +PTX) the fatbin lacks."""
    problems = [f"no {a.sm} SASS in .nv_fatb" for a in archs if a.sm not in gpu.sass]
    problems += [
        f"no {a.compute} PTX in .nv_fatb" for a in archs if a.ptx and a.compute not in gpu.ptx
    ]
    return problems


def audit_library(library: Path, archs: Sequence[Arch]) -> Audit:
    """The library's imports and GPU code, judged."""
    imports = pe_imports(library)
    gpu = read_fatbin(library)
    problems = [*import_problems(imports), *gpu_problems(gpu, archs)]
    return Audit(imports, gpu, tuple(problems))
