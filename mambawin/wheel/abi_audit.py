"""The stable-ABI audit: may this binary load in every torch at or above its floor, on any Python?

The rules follow huggingface's kernel-abi-check (`kernels` repository, `torch_stable_abi`), carried
as facts, plus the library form of mambawin.abi (no Python at all):

- a torch C++ symbol is imported: its demangled name holds `c10::`, `at::`, `torch::` or
  `caffe2::` (ELF undefined dynamic symbols; on PE every MSVC-mangled `?…` name imported from a
  torch DLL). torch's C++ ABI changes with every minor release;
- Python is imported: libpython / `python3XX.dll`, `libtorch_python` / `torch_python.dll`, or any
  `Py*` / `_Py*` symbol;
- a torch C symbol (`aoti_torch_*`, `torch_*`) that torch at the floor does not export: the list
  is `data/torch-stable-<floor>.txt`, read from torch's own libraries by
  benchmarks/torch_stable_symbols.py (kernel-abi-check reads the same fact from pytorch's
  `torch/csrc/stable/c/shim_function_versions.txt`: 2.11's `torch_from_blob` is not in 2.10);
- a library outside the allowed set: the CUDA runtime, the C/C++ runtime (glibc, libstdc++,
  libgcc; on Windows the MSVC/UCRT DLLs and KERNEL32) and torch's own libraries.

An ELF undefined symbol does not name its library, so C symbols outside the torch families are
left to the loader (glibc, libstdc++, cudart define them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

import itanium_demangler
from packaging.version import Version

from mambawin.versions import release
from mambawin.wheel.imports import BinaryImports, ImportedSymbol

TORCH_FAMILY = re.compile(r"^(aoti_torch_|torch_)\w+$")
_TORCH_CXX = re.compile(r"(?<![\w:])(c10|at|torch|caffe2)::")
_PYTHON_SYMBOL = re.compile(r"^_?Py[A-Z_]")
_DATA = "data"

# DT_NEEDED names (compared without the version after `.so`) and PE DLLs (lower case) a stable
# library may name. torch's libraries are allowed: each symbol taken from them is judged by name.
_ELF_SYSTEM = {"libc", "libm", "libdl", "libpthread", "librt", "libgcc_s", "libstdc++"}
_ELF_TORCH = {"libtorch", "libtorch_cpu", "libtorch_cuda", "libc10", "libc10_cuda"}
_ELF_PYTHON = re.compile(r"^(libpython\d|libtorch_python\.so)")
_ELF_LOADER = re.compile(r"^ld-linux[-\w.]*\.so")
_PE_RUNTIME = re.compile(
    r"^(kernel32|ucrtbase|vcruntime140\w*|msvcp140\w*|api-ms-win-crt-[\w-]+)\.dll$"
)
_PE_TORCH = re.compile(r"^(c10|c10_cuda|torch|torch_cpu|torch_cuda)\.dll$")
_PE_PYTHON = re.compile(r"^(python3\d*|torch_python)\.dll$")
_CUDART = re.compile(r"^(libcudart\.so|cudart64_\d+\.dll$)")

_FIX_PYTHON = "build it with `mambawin build --abi stable`, whose library uses no Python C API"
_FIX_CXX = "use the stable C API (torch/csrc/stable, torch::headeronly) instead of torch's C++ API"


@dataclass(frozen=True)
class Violation:
    """One thing a stable binary must not import: the symbol or library, why, and the fix."""

    subject: str
    problem: str
    fix: str

    @property
    def line(self) -> str:
        return f"{self.subject}: {self.problem}; {self.fix}"


@dataclass(frozen=True)
class Audit:
    """The audit of one binary: what it was checked against and every violation."""

    binary: str
    floor: Version
    checked_against: Version  # the torch whose exported C symbols the list holds
    torch_symbols: tuple[str, ...]  # the stable C symbols it imports (all fine or not)
    violations: tuple[Violation, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def known_floors() -> tuple[Version, ...]:
    """The torch releases whose stable C symbols mambawin ships (data/torch-stable-X.Y.txt)."""
    names = (p.name for p in resources.files(__package__).joinpath(_DATA).iterdir())
    found = (n.removeprefix("torch-stable-").removesuffix(".txt") for n in names)
    return tuple(sorted(Version(v) for v in found if re.fullmatch(r"\d+\.\d+", v)))


@cache
def stable_symbols(torch: Version) -> frozenset[str]:
    """The stable C symbols torch `major.minor` exports, from the shipped list."""
    name = f"torch-stable-{torch.major}.{torch.minor}.txt"
    text = resources.files(__package__).joinpath(_DATA).joinpath(name).read_text(encoding="utf-8")
    return frozenset(line for line in map(str.strip, text.splitlines()) if line[:1] not in "#")


def list_for(floor: Version) -> Version | None:
    """The newest shipped list at or below floor (a stable symbol, once added, stays), or None."""
    known = [v for v in known_floors() if release(v, 2) <= release(floor, 2)]
    return known[-1] if known else None


def audit_binary(binary: str, imports: BinaryImports, floor: Version) -> Audit:
    """Every violation of the stable library form in one binary's imports."""
    against = list_for(floor)
    if against is None:
        oldest = ", ".join(str(v) for v in known_floors())
        floor_problem = Violation(
            f"torch_floor {floor}",
            f"older than any torch whose stable C symbols mambawin knows ({oldest})",
            f"build with a floor of at least {oldest.split(',')[0]} (mambawin.abi.STABLE_FLOOR)",
        )
        return Audit(binary, floor, floor, (), (floor_problem,))
    exported = stable_symbols(against)
    violations = [
        *_library_violations(imports),
        *_symbol_violations(imports, exported, against),
        *_runtime_violations(imports),
    ]
    torch_c = tuple(s.name for s in imports.symbols if TORCH_FAMILY.match(s.name))
    return Audit(binary, floor, against, torch_c, tuple(violations))


def _runtime_violations(imports: BinaryImports) -> Iterable[Violation]:
    """A static libstdc++ inside the library: measured on an H100 (torch 2.11), the binding's
    STD_TORCH_CHECK then ended the process with SIGSEGV instead of raising in Python."""
    if imports.runtime_defined:
        yield Violation(
            ", ".join(imports.runtime_defined),
            "defined here: the library carries its own static C++ runtime, so an error its checks "
            "throw cannot reach torch and ends the process",
            "link with the shared libstdc++: build with a g++ that does (e.g. CXX=/usr/bin/g++), "
            "not one that links libstdc++ statically",
        )


def _library_violations(imports: BinaryImports) -> Iterable[Violation]:
    for library in imports.libraries:
        problem = library_problem(library, imports.format)
        if problem:
            yield Violation(library, *problem)


def library_problem(library: str, fmt: str) -> tuple[str, str] | None:
    """(problem, fix) when a stable binary may not name this library, else None."""
    if fmt == "pe":
        lower = library.lower()
        if _PE_PYTHON.match(lower):
            return "imports Python's DLL (a stable library has no Python C API)", _FIX_PYTHON
        if _PE_RUNTIME.match(lower) or _PE_TORCH.match(lower) or _CUDART.match(lower):
            return None
    else:
        if _ELF_PYTHON.match(library):
            return "needs a Python library (a stable library has no Python C API)", _FIX_PYTHON
        stem = library.split(".so")[0]
        if stem in _ELF_SYSTEM | _ELF_TORCH or _ELF_LOADER.match(library) or _CUDART.match(library):
            return None
    return (
        "not a library a stable wheel may need (the CUDA runtime, the C/C++ runtime and torch's "
        "own libraries only)",
        "link it statically or drop the dependency",
    )


def _symbol_violations(
    imports: BinaryImports, exported: frozenset[str], against: Version
) -> Iterable[Violation]:
    for symbol in imports.symbols:
        problem = symbol_problem(symbol, exported, against, imports.format)
        if problem:
            yield Violation(symbol.name, *problem)


def symbol_problem(
    symbol: ImportedSymbol, exported: frozenset[str], against: Version, fmt: str
) -> tuple[str, str] | None:
    """(problem, fix) when a stable binary may not import this symbol, else None; exported is
    the stable C symbols of torch `against`."""
    name = symbol.name
    if _PYTHON_SYMBOL.match(name):
        return "a Python C API symbol (a stable library has no Python C API)", _FIX_PYTHON
    from_torch = fmt == "pe" and _PE_TORCH.match((symbol.library or "").lower()) is not None
    if name.startswith("_Z") or (from_torch and name.startswith("?")):
        what = torch_cxx(name) if name.startswith("_Z") else name
        if what is not None or from_torch:
            return f"a torch C++ symbol ({what or name}) of one torch minor only", _FIX_CXX
        return None
    if TORCH_FAMILY.match(name) and name not in exported:
        return (
            f"not a stable C symbol torch {against} exports (newer, or not in the stable C API)",
            "drop it, or raise the floor to the torch that added it (mambawin.abi.STABLE_FLOOR)",
        )
    if from_torch and name not in exported:
        return (
            f"imported from {symbol.library} but not a stable C symbol of torch {against}",
            _FIX_CXX,
        )
    return None


def torch_cxx(mangled: str) -> str | None:
    """The demangled name when an Itanium-mangled symbol belongs to torch's C++ API, else None."""
    try:
        parsed = itanium_demangler.parse(mangled)
    except (NotImplementedError, ValueError, IndexError, KeyError, AttributeError):
        parsed = None  # a name the demangler does not know: not judged (as kernel-abi-check)
    text = str(parsed) if parsed is not None else ""
    return text if _TORCH_CXX.search(text) else None
