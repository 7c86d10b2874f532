"""Build the loader and the stub with the toolchain's cl.exe and link.exe under wine, run the
loader, and read what it, wine and torch printed.

The loader (data/loader.c, mambawin's own) takes torch's functions with GetProcAddress, so one
program serves every torch. It runs with WINEDEBUG=warn+module: wine loads a DLL even when a name
it imports is missing (Windows refuses it, error 127 ERROR_PROC_NOT_FOUND) and only that channel
says so, `No implementation for torch_cuda.dll.<name>`, which the load step counts as a failure.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from mambawin import proc
from mambawin.errors import ToolchainError
from mambawin.store.atomic import write_text
from mambawin.toolchain.wine import WindowsToolchain, msvc_tool, windows_path
from mambawin.toolchain.wine_server import Runner
from mambawin.verify.wineload.ops import Op
from mambawin.verify.wineload.stub import STUB_SOURCE, stub_def

LOADER = "loader.exe"
_OURS = re.compile(r"^mambawin-load: (\w+) (.*)$")
# Each of the loader's lines (data/loader.c), read whole: any DLL it loads may print on the same
# stream, so a line may come cut, merged or with bytes of another's; ASCII digits only (int() and
# float() read '١٢' and '1e999' too).
_WORDS = ("loaded", "error", "missing", "op")
_LOADED = re.compile(r"^(\S+) ([0-9]{1,9}\.[0-9]{1,9})$", re.ASCII)
_CODE = re.compile(r"^(\S+) ([0-9]{1,10})$", re.ASCII)
_NAME = re.compile(r"^(\S+)$")
_BEGIN = re.compile(r"^(\S+) begin$")
_END = re.compile(r"^(\S+) end (-?[0-9]{1,10})$", re.ASCII)
_NO_IMPLEMENTATION = re.compile(r"No implementation for ([\w.-]+\.dll)\.(\S+) imported from")
_NOT_FOUND = re.compile(r"Library (\S+) \(which is needed by .*?\) not found")
_WINE_LINE = re.compile(r"^[0-9a-f]{4}:(fixme|err|warn|trace):")  # wine's own channels
_BACKENDS = re.compile(r"only available for these backends: \[([^\]]*)\]")
# Windows' system error codes the loader may print for LoadLibrary.
_ERRORS = {
    126: "ERROR_MOD_NOT_FOUND: a DLL it needs is missing",
    127: "ERROR_PROC_NOT_FOUND: a DLL it needs lacks a name it imports",
    193: "ERROR_BAD_EXE_FORMAT: not a 64-bit Windows DLL",
}


@dataclass(frozen=True)
class Wine:
    """What runs the Windows programs: the toolchain, wine's launcher, its environment, a runner."""

    toolchain: WindowsToolchain
    launcher: str
    env: Mapping[str, str]
    runner: Runner


def _run(wine: Wine, program: Path | str, args: Sequence[str], cwd: Path) -> proc.Completed:
    return wine.runner([wine.launcher, str(program), *args], wine.env, cwd)


def _checked(done: proc.Completed, what: str, out: Path) -> Path:
    if done.returncode == 0 and out.is_file():
        return out
    reason = proc.last_line(done.stdout + "\n" + done.stderr) or f"exit {done.returncode}"
    raise ToolchainError(f"{what} failed under wine: {reason}; check the Windows toolchain")


def build_loader(wine: Wine, work: Path) -> Path:
    """loader.exe from data/loader.c, with cl.exe (static C runtime: nothing beside it needed)."""
    source = resources.files(__package__).joinpath("data/loader.c").read_text(encoding="utf-8")
    c_file = write_text(work / "loader.c", source)
    cl = msvc_tool(wine.toolchain, "cl")
    args = ["/nologo", "/O1", "/W3", windows_path(c_file), f"/Fe:{windows_path(work / LOADER)}"]
    return _checked(_run(wine, cl, args, work), "cl.exe loader.c", work / LOADER)


# The Visual C++ runtime DLLs a torch may import that wine 8.0 has no builtin for: torch 2.15's
# torch_cpu.dll imports VCRUNTIME140_THREADS.dll (VS 2022's runtime; on Windows the VC++
# Redistributable puts it in System32). The toolchain's MSVC ships it beside cl.exe; it is copied
# beside the stub, on the loader's DLL path, so the load is wine's only where it must be.
RUNTIME_DLLS = ("vcruntime140_threads.dll",)


def runtime_dlls(toolchain: WindowsToolchain) -> list[Path]:
    """The toolchain's copies of RUNTIME_DLLS (those it has)."""
    folder = msvc_tool(toolchain, "cl").parent
    return [folder / name for name in RUNTIME_DLLS if (folder / name).is_file()]


def build_stub(wine: Wine, names: Sequence[str], folder: Path) -> Path:
    """folder/torch_cuda.dll exporting exactly names, each the one stub function."""
    folder.mkdir(parents=True, exist_ok=True)
    c_file = write_text(folder / "stub.c", STUB_SOURCE)
    definition = write_text(folder / "torch_cuda.def", stub_def(names))
    obj, dll = folder / "stub.obj", folder / "torch_cuda.dll"
    cl_args = ["/nologo", "/c", "/GS-", windows_path(c_file), f"/Fo:{windows_path(obj)}"]
    _checked(_run(wine, msvc_tool(wine.toolchain, "cl"), cl_args, folder), "cl.exe stub.c", obj)
    for runtime in runtime_dlls(wine.toolchain):
        shutil.copyfile(runtime, folder / runtime.name)
    # No entry point and no C runtime: the DLL holds one function and its export table.
    link_args = ["/nologo", "/DLL", "/NOENTRY", "/NODEFAULTLIB", f"/DEF:{windows_path(definition)}"]
    link_args += [f"/OUT:{windows_path(dll)}", windows_path(obj)]
    return _checked(
        _run(wine, msvc_tool(wine.toolchain, "link"), link_args, folder), "stub link", dll
    )


def run_loader(
    wine: Wine, loader: Path, lib: Path, stub: Path, library: Path, ops: Sequence[Op]
) -> proc.Completed:
    """The loader on torch's lib folder, the stub's folder and the library, asking for ops."""
    env = {**wine.env, "WINEDEBUG": "warn+module"}
    args = [windows_path(lib), windows_path(stub), windows_path(library), *(o.spec for o in ops)]
    return wine.runner([wine.launcher, str(loader), *args], env, loader.parent)


@dataclass(frozen=True)
class OpAnswer:
    """What torch's dispatcher answered for one op called with CPU tensors."""

    name: str
    schema_found: bool  # False: "Could not find schema"
    backends: tuple[str, ...]  # where it has kernels ("only available for these backends")
    cuda_kernel: bool  # a "CUDA: registered at" line
    message: str  # torch's first line, or what went wrong

    @property
    def ok(self) -> bool:
        return self.schema_found and self.cuda_kernel


@dataclass(frozen=True)
class LoadRun:
    """What one loader run showed."""

    seconds: Mapping[str, float] = field(default_factory=dict)  # torch_cpu.dll, library
    errors: tuple[str, ...] = ()  # a load refused, a function torch lacks, a crash
    missing_names: tuple[str, ...] = ()  # wine's "No implementation for X.dll.name"
    ops: tuple[OpAnswer, ...] = ()

    @property
    def loaded(self) -> bool:
        return {"torch_cpu.dll", "library"} <= set(self.seconds) and not self.missing_names


def parse_run(done: proc.Completed, asked: Sequence[str]) -> LoadRun:
    """The loader's, wine's and torch's lines (all on stderr, in order) read into a LoadRun."""
    lines = (done.stdout + "\n" + done.stderr).splitlines()
    seconds: dict[str, float] = {}
    errors: list[str] = []
    answers: dict[str, OpAnswer] = {}
    missing = sorted({f"{m[1]}.{m[2]}" for ln in lines if (m := _NO_IMPLEMENTATION.search(ln))})
    absent = sorted({m[1] for ln in lines if (m := _NOT_FOUND.search(ln))})
    current: str | None = None
    said: list[str] = []
    for line in lines:
        ours = _OURS.match(line.strip())
        if ours is None:
            if current is not None and not _WINE_LINE.match(line):
                said.append(line)
            continue
        word, rest = ours[1], ours[2]
        if (found := _LOADED.match(rest)) and word == "loaded":
            seconds[found[1]] = float(found[2])
        elif (found := _CODE.match(rest)) and word == "error":
            errors.append(_load_error(found[1], int(found[2]), absent))
        elif (found := _NAME.match(rest)) and word == "missing":
            errors.append(f"torch_cpu.dll has no {found[1].split('!')[-1]}")
        elif (found := _BEGIN.match(rest)) and word == "op":
            current, said = found[1], []
        elif (found := _END.match(rest)) and word == "op" and current is not None:
            answers[current] = answer(current, said, int(found[2]))
            current = None
        elif word in _WORDS:  # a line of ours, cut or mixed with what a DLL printed meanwhile
            errors.append(f"the loader printed a line that cannot be read: {line.strip()[:200]!r}")
    if done.returncode not in (0, 3, 4, 5) or (current is not None):
        errors.append(f"the loader stopped (exit {done.returncode}): {proc.last_line(done.stderr)}")
    ops = tuple(answers.get(n) or OpAnswer(n, False, (), False, "not asked") for n in asked)
    return LoadRun(seconds, tuple(errors), tuple(missing), ops if seconds.get("library") else ())


def _load_error(what: str, code: int, absent: Sequence[str]) -> str:
    line = (
        f"{what}: LoadLibrary error {code} ({_ERRORS.get(code, 'see Windows system error codes')})"
    )
    return line + (f": {', '.join(absent)} not found" if absent else "")


def answer(name: str, said: Sequence[str], code: int) -> OpAnswer:
    """torch's answer for an op: code 0 means it ran on CPU tensors (no CUDA-only op)."""
    text = "\n".join(said)
    first = next((ln.split("Exception in aoti_torch: ", 1)[-1] for ln in said if ln.strip()), "")
    if code == 0:
        return OpAnswer(name, True, (), False, "it ran on CPU tensors: a CPU kernel answered")
    if "Could not find schema for" in text:
        return OpAnswer(name, False, (), False, first)
    backends = _BACKENDS.search(text)
    listed = tuple(b.strip() for b in backends[1].split(",")) if backends else ()
    cuda = any(ln.startswith("CUDA: registered at") for ln in said)
    return OpAnswer(name, True, listed, cuda, first)
