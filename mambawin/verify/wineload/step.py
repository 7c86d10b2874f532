"""The load step: one win_amd64 stable wheel, loaded under wine against the DLLs of its floor
torch and of the newest torch the registry has (docs/verify.md, "load").

Per torch version: fetch its DLLs (cached), check the stub's names against what torch_cuda.dll
exports, build the stub, run the loader, and require torch_cpu.dll and the library to load with
no missing imported name and every op the shim calls to be known to the dispatcher with a CUDA
kernel. Skipped, with the reason, for a wheel that is not win_amd64 or not stable, and where wine
or the Windows toolchain is absent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from mambawin.abi import stable_library, stable_shim
from mambawin.errors import MambawinError, WheelError, os_error
from mambawin.packages import get_package
from mambawin.stage import Status
from mambawin.toolchain.wine import (
    WindowsToolchain,
    default_root,
    missing_parts,
    toolchain_at,
    wine_environ,
)
from mambawin.toolchain.wine_server import NO_WINE, Runner, find_wine, wine_runner
from mambawin.verify.report import StepResult, named
from mambawin.verify.wineload.loader import (
    LoadRun,
    Wine,
    build_loader,
    build_stub,
    parse_run,
    run_loader,
)
from mambawin.verify.wineload.ops import Op, known_schemas, ops_of, shim_ops
from mambawin.verify.wineload.stub import cuda_imports, refused
from mambawin.verify.wineload.torches import (
    TorchDlls,
    dlls_root,
    installable_versions,
    torch_dlls,
    wanted,
)
from mambawin.wheel.imports import read_imports
from mambawin.wheel.info import open_wheel
from mambawin.wheel.naming import WINDOWS
from mambawin.wheel.provenance import Provenance
from mambawin.wheel.stable_wheel import floor_of, is_stable


def _cached_dlls(version: str) -> TorchDlls:
    return torch_dlls(version, dlls_root())


@dataclass(frozen=True)
class Library:
    """What the step needs of the wheel: the library's bytes, its name, the ops to ask for."""

    name: str
    data: bytes
    ops: tuple[Op, ...]
    cuda_names: tuple[str, ...]


@dataclass(frozen=True)
class LoadTools:
    """What the load step reaches outside itself; tests pass fakes."""

    find_wine: Callable[[], str | None] = find_wine
    toolchain: Callable[[Path | None], WindowsToolchain] = lambda root: toolchain_at(
        root or default_root()
    )
    versions: Callable[[Version], Sequence[str]] = installable_versions  # pip's own choice
    dlls: Callable[[str], TorchDlls] = _cached_dlls
    runner: Runner = field(default_factory=wine_runner)
    library: Callable[[Path, str], Library] = lambda wheel, project: read_library(wheel, project)
    ready: Callable[[WindowsToolchain], str | None] = lambda toolchain: _not_ready(toolchain)


def load_step(
    wheel: Path,
    project: str,
    provenance: Provenance | None,
    work: Path,
    windows_root: Path | None = None,
    tools: LoadTools | None = None,
) -> StepResult:
    """The load step's result for one wheel (never raises: a failure is its result)."""
    name = named("load", project)
    tools = tools or LoadTools()
    why = skip_reason(wheel, provenance)
    launcher = tools.find_wine()
    try:  # a root whose path no Windows list can hold is this step's failure, not a traceback
        toolchain = tools.toolchain(windows_root)
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, str(exc), {"error": str(exc)})
    why = why or (NO_WINE if launcher is None else None) or tools.ready(toolchain)
    if why is not None or launcher is None:
        return StepResult(name, Status.SKIP, f"not loaded: {why}")
    try:
        library = tools.library(wheel, project)
        floor = floor_of(provenance)
        versions = wanted(floor, tools.versions(floor))
        env = wine_environ(toolchain, dict(os.environ))
        wine = Wine(toolchain, launcher, env, tools.runner)
        work.mkdir(parents=True, exist_ok=True)
        binary = work / library.name
        binary.write_bytes(library.data)
        loader = build_loader(wine, work)
        rows = [_one(wine, loader, binary, library, tools.dlls(v), work) for v in versions]
    except OSError as exc:  # the scratch folder, the copy of the library, the stub's files
        error = os_error(exc, "write the load step's files")
        return StepResult(name, Status.FAIL, str(error), {"error": str(error)})
    except MambawinError as exc:
        return StepResult(name, Status.FAIL, str(exc), {"error": str(exc)})
    return _result(name, library, rows)


def skip_reason(wheel: Path, provenance: Provenance | None) -> str | None:
    """Why this wheel is not loaded under wine, or None."""
    platforms = {tag.platform for tag in parse_wheel_filename(wheel.name)[3]}
    if WINDOWS not in platforms:
        return f"a {', '.join(sorted(platforms))} wheel: the load step runs {WINDOWS} wheels"
    if not is_stable(provenance):
        return (
            "a torch-ABI wheel: it imports python3XX.dll and torch's CUDA DLLs, which no "
            "registry's Windows torch serves; only stable wheels are loaded under wine"
        )
    return None


def _not_ready(toolchain: WindowsToolchain) -> str | None:
    problems = missing_parts(toolchain)
    return f"the Windows toolchain is not ready: {problems[0]}" if problems else None


def read_library(wheel: Path, project: str) -> Library:
    """The stable library, the ops its shim calls and the CUDA names it imports."""
    extension = get_package(project).extension
    library, shim = f"{stable_library(extension)}.pyd", stable_shim(extension)
    with open_wheel(wheel) as (archive, info):
        data = archive.read(library) if library in info.members else None
        source = archive.read(shim) if shim in info.members else b""
    if data is None:
        raise WheelError(f"{wheel.name} holds no {library}: rebuild it with --abi stable")
    ops = ops_of(extension, shim_ops(source, shim), data, known_schemas())
    return Library(library, data, tuple(ops), cuda_imports(read_imports(data, library)))


def _one(
    wine: Wine, loader: Path, binary: Path, library: Library, torch: TorchDlls, work: Path
) -> dict[str, Any]:
    """One torch version's row: refused stub names, or what the loader showed."""
    row: dict[str, Any] = {"torch": torch.version, "stub": list(library.cuda_names)}
    problems = refused(library.cuda_names, torch)
    if problems:
        return {**row, "loaded": False, "refused": problems}
    started = time.monotonic()
    stub = build_stub(wine, library.cuda_names, work / f"stub-{torch.version}")
    done = run_loader(wine, loader, torch.lib, stub.parent, binary, library.ops)
    run = parse_run(done, [op.qualified for op in library.ops])
    return {**row, **_run_row(run), "seconds": round(time.monotonic() - started, 2)}


def _run_row(run: LoadRun) -> dict[str, Any]:
    return {
        "loaded": run.loaded,
        "load_seconds": dict(run.seconds),
        "errors": list(run.errors),
        "missing_names": list(run.missing_names),
        "ops": [
            {
                "name": a.name,
                "ok": a.ok,
                "schema": a.schema_found,
                "cuda_kernel": a.cuda_kernel,
                "backends": list(a.backends),
                "message": a.message,
            }
            for a in run.ops
        ],
    }


def row_problem(row: Mapping[str, Any], asked: int) -> str | None:
    """The first thing wrong in one version's row, or None."""
    torch = f"torch {row['torch']}"
    if row.get("refused"):
        return f"{torch}: the stub may not export {row['refused'][0]}"
    if row.get("missing_names"):
        names = ", ".join(row["missing_names"])
        return f"{torch}: wine found no implementation for {names} (Windows refuses: error 127)"
    if row.get("errors"):
        return f"{torch}: {row['errors'][0]}"
    if not row.get("loaded"):
        return f"{torch}: not loaded"
    bad = [op for op in row["ops"] if not op["ok"]]
    if bad or len(row["ops"]) != asked:
        op = bad[0] if bad else {"name": "?", "message": "not asked"}
        return f"{torch}: {op['name']} is not registered with a CUDA kernel: {op['message']}"
    return None


def row_line(row: Mapping[str, Any]) -> str:
    """'torch 2.10.0: torch_cpu.dll 0.51 s, library 0.06 s, 3/3 ops with a CUDA kernel (9.1 s)'."""
    took = row.get("load_seconds", {})
    ok = sum(1 for op in row.get("ops", ()) if op["ok"])
    return (
        f"torch {row['torch']}: torch_cpu.dll {took.get('torch_cpu.dll', 0):.2f} s, library "
        f"{took.get('library', 0):.2f} s, {ok}/{len(row.get('ops', ()))} ops registered with a "
        f"CUDA kernel ({row.get('seconds', 0)} s)"
    )


def _result(name: str, library: Library, rows: Sequence[Mapping[str, Any]]) -> StepResult:
    details = {
        "library": library.name,
        "ops": [op.qualified for op in library.ops],
        "torch_cuda_names": list(library.cuda_names),
        "torches": list(rows),
    }
    problems = [p for row in rows if (p := row_problem(row, len(library.ops))) is not None]
    if problems:
        return StepResult(name, Status.FAIL, "; ".join(problems), details)
    lines = "; ".join(row_line(row) for row in rows)
    return StepResult(name, Status.OK, f"{library.name} loaded under wine: {lines}", details)
