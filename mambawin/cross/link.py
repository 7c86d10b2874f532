"""Link the stable library with Microsoft's link.exe under wine, against import libraries made for
exactly the torch symbols the objects use.

Three runs: link.exe with /FORCE:UNRESOLVED and no torch library lists what the objects need
from torch (every other symbol resolves from the CUDA runtime and the MSVC/UCRT libraries the
objects name); lib.exe turns a .def per torch DLL into an import library; link.exe links for real,
where any unresolved symbol fails the link.

The CUDA runtime is cudart_static.lib (nvcc's own default, `-cudart static`): the library then
needs only the driver's nvcuda.dll, which cudart_static loads at run time. CUDA 13's cudart.lib
is no plain import library of cudart64_13.dll either: it is a loader that finds
nvcudart_hybrid64.dll or cudart at run time, and which of those a user's machine has depends on
its driver and on the CUDA torch was built with (cu126 torch ships cudart64_12.dll). A stable
wheel serves every torch >= the floor, so it carries its runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mambawin.errors import BuildError
from mambawin.proc import last_line
from mambawin.store.atomic import write_text
from mambawin.toolchain.wine import WindowsToolchain, msvc_tool, windows_path
from mambawin.toolchain.wine_server import Runner
from mambawin.winbuild.closure import LINK_OPTIONS, parse_link
from mambawin.winbuild.torch_exports import Selection, def_text

CUDA_RUNTIME = "cudart_static.lib"
# cudart_static.lib is compiled /MT and names LIBCMT; the objects are /MD (MSVCRT), and mixing the
# two CRTs is LNK4098. setuptools' options plus /Brepro: a PE timestamp from the content, not the
# clock, so two builds of one tree give the same bytes.
STABLE_LINK_OPTIONS = (*LINK_OPTIONS, "/Brepro", "/NODEFAULTLIB:LIBCMT")


def link_args(
    toolchain: WindowsToolchain,
    objects: Sequence[Path],
    out: Path,
    import_libs: Sequence[Path] = (),
    *,
    force_unresolved: bool = False,
) -> list[str]:
    """link.exe's arguments for the stable library: a DLL exporting nothing (torch.ops.load_library
    runs its static initialisers, which register the ops), the CUDA runtime, torch's import libs."""
    args = [*STABLE_LINK_OPTIONS, *(["/FORCE:UNRESOLVED"] if force_unresolved else [])]
    args += [f"/LIBPATH:{windows_path(toolchain.cuda / 'lib' / 'x64')}", CUDA_RUNTIME]
    args += [windows_path(lib) for lib in import_libs]
    args += [f"/OUT:{windows_path(out)}"]
    return args + [windows_path(obj) for obj in objects]


def unresolved_symbols(
    toolchain: WindowsToolchain,
    objects: Sequence[Path],
    workdir: Path,
    *,
    wine: str,
    env: Mapping[str, str],
    runner: Runner,
) -> tuple[str, ...]:
    """What the objects need that neither they, the CUDA runtime nor the CRT define (sorted)."""
    probe = workdir / "unresolved-probe.dll"
    workdir.mkdir(parents=True, exist_ok=True)  # link.exe does not make it: LNK1104
    args = link_args(toolchain, objects, probe, force_unresolved=True)
    done = runner([wine, str(msvc_tool(toolchain, "link")), *args], env, workdir)
    closure = parse_link(done.stdout + "\n" + done.stderr)
    if closure.fatal is not None:
        msg = f"link.exe stopped before listing the unresolved symbols: {closure.fatal}"
        raise BuildError(msg)
    return tuple(sorted(u.symbol for u in closure.unresolved))


def import_library_args(definition: Path, out: Path) -> list[str]:
    """lib.exe's arguments turning a .def into an x64 import library."""
    return [
        "/nologo",
        f"/def:{windows_path(definition)}",
        "/machine:x64",
        f"/out:{windows_path(out)}",
    ]


def make_import_libraries(
    toolchain: WindowsToolchain,
    selection: Selection,
    workdir: Path,
    *,
    wine: str,
    env: Mapping[str, str],
    runner: Runner,
) -> list[Path]:
    """One import library per torch DLL, naming exactly the selected symbols."""
    libs = []
    for dll, names in selection.imports.items():
        stem = dll.removesuffix(".dll")
        definition = write_text(workdir / f"{stem}.def", def_text(dll, names))
        out = workdir / f"{stem}.lib"
        args = import_library_args(definition, out)
        done = runner([wine, str(msvc_tool(toolchain, "lib")), *args], env, workdir)
        if done.returncode != 0 or not out.is_file():
            reason = last_line(done.stdout + "\n" + done.stderr) or f"exit {done.returncode}"
            raise BuildError(f"lib.exe could not make {out.name} from {definition.name}: {reason}")
        libs.append(out)
    return libs


def link_library(
    toolchain: WindowsToolchain,
    objects: Sequence[Path],
    import_libs: Sequence[Path],
    out: Path,
    *,
    wine: str,
    env: Mapping[str, str],
    runner: Runner,
) -> Path:
    """The library itself; BuildError with link.exe's first error when the link fails."""
    args = link_args(toolchain, objects, out, import_libs)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = runner([wine, str(msvc_tool(toolchain, "link")), *args], env, out.parent)
    if done.returncode == 0 and out.is_file():
        return out
    output = done.stdout + "\n" + done.stderr
    first = next((ln.strip() for ln in output.splitlines() if " error LNK" in ln), None)
    reason = first or last_line(output) or f"exit {done.returncode}"
    raise BuildError(f"link.exe could not link {out.name}: {reason}")
