"""Which torch DLL exports each stable C symbol the objects need, and the .def files saying so.

A stable binary may import only torch's stable C ABI: the `aoti_torch_*` shim and the `torch_*`
C functions (torch/csrc/stable/c/shim.h, torch/csrc/inductor/aoti_torch/c/shim.h). They are
declared `extern "C"`, so on x64 a name carries no decoration: link.exe looks for
`__imp_aoti_torch_get_numel`, the `__declspec(dllimport)` AOTI_TORCH_EXPORT gives on Windows.

Which DLL exports which name is read from torch's own Windows import libraries (`torch/lib/*.lib`
of its win_amd64 wheel) with `dumpbin /exports`. torch's PyPI wheel for Windows is the CPU build:
it has torch_cpu.lib but no torch_cuda.lib, so the CUDA shim's names come from TORCH_CUDA_EXPORTS
unless the toolchain holds a torch_cuda.lib (a CUDA build of torch), which then wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from mambawin.errors import ToolchainError
from mambawin.toolchain.wine import WindowsToolchain, msvc_tool, windows_path
from mambawin.toolchain.wine_server import Runner

STABLE_PREFIXES = ("aoti_torch_", "torch_")
IMPORT_PREFIX = "__imp_"  # what a __declspec(dllimport) reference is called in an object
# The libraries of torch's Windows wheel that may hold stable C names. torch_python and _C are
# left out on purpose: a stable binary holds no Python C API, so nothing may come from them.
TORCH_IMPORT_LIBS = ("torch_cpu", "c10", "torch", "torch_cuda")
TORCH_CUDA_DLL = "torch_cuda.dll"
# The CUDA half of the stable C ABI (shim_cuda.cpp and the stable CUDA shims, built into
# torch_cuda on every platform). Read with `nm -D --defined-only libtorch_cuda.so` of torch
# 2.14.1's Linux CUDA wheel: libtorch_cuda.so defines each of these, libtorch_cpu.so none, and the
# Windows CPU wheel's torch_cpu.lib exports none of them (dumpbin /exports). That Windows'
# torch_cuda.dll exports them too rests on AOTI_TORCH_EXPORT being dllexport inside torch (as
# torch_cpu.lib shows for the CPU shim); nothing here has a Windows CUDA torch to confirm it.
TORCH_CUDA_EXPORTS = frozenset(
    {
        "aoti_torch_create_cuda_guard",
        "aoti_torch_create_cuda_stream_guard",
        "aoti_torch_delete_cuda_guard",
        "aoti_torch_delete_cuda_stream_guard",
        "aoti_torch_get_current_cuda_stream",
        "torch_c10_cuda_check_msg",
        "torch_c10_cuda_free_error_msg",
        "torch_cuda_stream_synchronize",
        "torch_get_cuda_stream_from_pool",
        "torch_get_current_cuda_blas_handle",
        "torch_set_current_cuda_stream",
    }
)
# torchgen's CUDA fallback ops (c_shim_cuda.h, `aoti_torch_cuda_<op>`) live in torch_cuda too.
TORCH_CUDA_PREFIX = "aoti_torch_cuda_"
_C_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def bare(symbol: str) -> str:
    """The exported name an object's reference stands for (`__imp_x` -> `x`)."""
    return symbol.removeprefix(IMPORT_PREFIX)


def is_stable_c_name(symbol: str) -> bool:
    """Whether symbol is (an import of) a C name of torch's stable ABI: a plain identifier, no
    C++ decoration (`?...@@`), starting aoti_torch_ or torch_."""
    name = bare(symbol)
    return bool(_C_NAME.match(name)) and name.startswith(STABLE_PREFIXES)


def parse_exports(text: str) -> tuple[str, ...]:
    """The exported names in `dumpbin /exports X.lib` output (the block under `ordinal name`)."""
    names: list[str] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.split() == ["ordinal", "name"]:
            inside = True
        elif inside and line == "Summary":
            break
        elif inside and line:
            names.append(line.split()[0])
    return tuple(names)


@dataclass(frozen=True)
class ExportTable:
    """The DLL exporting each stable C name; `dll_for` answers for one."""

    dll_of: Mapping[str, str]
    cuda_from: str  # where torch_cuda.dll's names came from: its .lib, or TORCH_CUDA_EXPORTS

    def dll_for(self, symbol: str) -> str | None:
        """The DLL exporting symbol (with or without __imp_), None when torch exports it nowhere."""
        name = bare(symbol)
        found = self.dll_of.get(name)
        if found is None and name.startswith(TORCH_CUDA_PREFIX):
            return TORCH_CUDA_DLL
        return found


def export_table(listings: Mapping[str, Iterable[str]]) -> ExportTable:
    """The table from each DLL's export listing (`torch_cpu.dll` -> names); the stable C names
    only, TORCH_CUDA_EXPORTS standing in for a torch_cuda.dll nobody listed."""
    dll_of: dict[str, str] = {}
    for dll, names in listings.items():
        for name in names:
            if is_stable_c_name(name):
                dll_of.setdefault(name, dll)
    cuda_from = "torch_cuda.lib"
    if TORCH_CUDA_DLL not in listings:
        cuda_from = "TORCH_CUDA_EXPORTS (torch's Linux libtorch_cuda.so, see symbols.py)"
        for name in sorted(TORCH_CUDA_EXPORTS):
            dll_of.setdefault(name, TORCH_CUDA_DLL)
    return ExportTable(dll_of, cuda_from)


def read_export_table(
    toolchain: WindowsToolchain, *, wine: str, env: Mapping[str, str], runner: Runner
) -> ExportTable:
    """The table read from the toolchain's torch import libraries with dumpbin under wine."""
    if toolchain.torch is None:
        raise ToolchainError("this Windows toolchain was set up without torch: use --torch")
    lib_dir = toolchain.torch / "lib"
    dumpbin = msvc_tool(toolchain, "dumpbin")
    listings: dict[str, tuple[str, ...]] = {}
    for name in TORCH_IMPORT_LIBS:
        lib = lib_dir / f"{name}.lib"
        if not lib.is_file():
            continue
        done = runner([wine, str(dumpbin), "/nologo", "/exports", windows_path(lib)], env, lib_dir)
        if done.returncode != 0:
            msg = (
                f"dumpbin /exports {lib} failed (exit {done.returncode}): "
                "set the Windows toolchain up again"
            )
            raise ToolchainError(msg)
        # An import library is named after its DLL (torch_cpu.lib -> torch_cpu.dll; dumpbin
        # /headers shows `DLL name : torch_cpu.dll` on each of its members).
        listings[f"{name}.dll"] = parse_exports(done.stdout)
    if "torch_cpu.dll" not in listings:
        msg = f"{lib_dir} has no torch_cpu.lib: set the Windows toolchain up again with torch"
        raise ToolchainError(msg)
    return export_table(listings)


@dataclass(frozen=True)
class Selection:
    """The objects' unresolved symbols sorted out: per DLL the names its import library must
    name; stable names torch exports nowhere; and symbols outside the stable C ABI."""

    imports: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.missing and not self.foreign


def select(unresolved: Iterable[str], table: ExportTable) -> Selection:
    """Sort the symbols link.exe left unresolved (sorted, each once) by the DLL exporting them."""
    imports: dict[str, set[str]] = {}
    missing: set[str] = set()
    foreign: set[str] = set()
    for symbol in unresolved:
        if not is_stable_c_name(symbol):
            foreign.add(symbol)
            continue
        dll = table.dll_for(symbol)
        if dll is None:
            missing.add(bare(symbol))
        else:
            imports.setdefault(dll, set()).add(bare(symbol))
    return Selection(
        {dll: tuple(sorted(names)) for dll, names in sorted(imports.items())},
        tuple(sorted(missing)),
        tuple(sorted(foreign)),
    )


def def_text(dll: str, names: Sequence[str]) -> str:
    """A module-definition file for `lib /def`: the DLL's name and the names it exports."""
    lines = [f"LIBRARY {dll}", "EXPORTS", *(f"    {name}" for name in names)]
    return "\n".join(lines) + "\n"
