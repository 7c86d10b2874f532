"""Which torches a Windows wheel is loaded against, and their DLLs from the registry.

Which torches: the ones this machine's pip would install (`pip install --dry-run --report`, so
its constraints and index settings apply): the newest of the floor's minor and the newest of all.
torch's win_amd64 wheels come from pip (`pip download --platform win_amd64`, the toolchain's own
downloader); only `torch/lib/*.dll` is unpacked, into mambawin's cache (`torch-windows/<version>`,
a folder mambawin owns), once per version: a later verify reuses it and never downloads again.
Besides the DLLs the folder keeps `exports.json`: the C names torch_cuda.dll exports when the
wheel has one (a CUDA build), and the C names that torch version's own headers declare
AOTI_TORCH_EXPORT (what the stub's names are checked against, stub.py).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pefile
from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.errors import CommandError, FileSystemError, UpstreamError, WheelError, os_error
from mambawin.store.atomic import fill_dir, staging_dir, write_text
from mambawin.store.owned import cache_dir, claim, mark, marked_as
from mambawin.toolchain.wine_setup import pip_download
from mambawin.userfile import parse_json
from mambawin.verify.resolve import report_installs
from mambawin.wheel.imports import open_pe

OWNED_AS = "torch-windows-dlls"  # the kind in each version folder's ownership marker
EXPORTS = "exports.json"
# The headers that declare torch's stable C functions (the aoti shim, the stable C API); a
# declaration reads `AOTI_TORCH_EXPORT <type> name(`.
_HEADERS = ("torch/include/torch/csrc/inductor/aoti_torch/", "torch/include/torch/csrc/stable/")
_DECLARED = re.compile(r"AOTI_TORCH_EXPORT\s+[\w\s\*]*?\b(\w+)\s*\(")

Downloader = Callable[[Sequence[str], Path], None]
Lister = Callable[[], Sequence[str]]


@dataclass(frozen=True)
class TorchDlls:
    """One torch's Windows DLLs as unpacked here, and what its C names are."""

    version: str
    lib: Path  # torch/lib: torch_cpu.dll, c10.dll ...
    cuda_exports: frozenset[str] | None  # torch_cuda.dll's C exports; None: a CPU build
    declared: frozenset[str]  # C names its headers declare AOTI_TORCH_EXPORT


def dlls_root() -> Path:
    """Where torch's Windows DLLs are kept, one folder per version."""
    return cache_dir() / "torch-windows"


# The torch the DLLs come from: any CPython's win_amd64 wheel holds the same torch/lib.
_PIP_TARGET = ("--only-binary=:all:", "--platform", "win_amd64", "--python-version", "3.12")
Resolver = Callable[[str], str]


def installable_versions(floor: Version, resolve: Resolver | None = None) -> tuple[str, ...]:
    """The torches the load step loads against, as this machine's pip would install them: the
    newest of the floor's minor version, then the newest from the floor on. pip chooses (its
    constraints and index settings apply), so a version it would refuse is never chosen."""
    pick = resolve or pip_resolves
    minor = f"{floor.release[0]}.{floor.release[1] if len(floor.release) > 1 else 0}"
    return (pick(f"torch>={floor},=={minor}.*"), pick(f"torch>={floor}"))


def pip_resolves(requirement: str) -> str:
    """The torch version pip would install for requirement on win_amd64 (a dry run, nothing
    installed); UpstreamError naming the requirement and what constrains pip when it cannot."""
    with tempfile.TemporaryDirectory(prefix="mambawin-torch-") as scratch:
        argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--quiet"]
        argv += ["--ignore-installed", "--report", "-", "--target", scratch, *_PIP_TARGET]
        done = proc.run([*argv, requirement], timeout=300, check=False)
    return read_choice(requirement, done)


def read_choice(requirement: str, done: proc.Completed) -> str:
    """The torch version in pip's report of requirement; UpstreamError when pip refused it (its
    reason and what constrains it named) or its report cannot be read."""
    if done.returncode != 0:
        reason = proc.last_line(done.stderr) or f"exit {done.returncode}"
        msg = (
            f"pip cannot install {requirement} for win_amd64 here ({reason}){constraints_note()}: "
            "allow it in pip's constraints and index, or leave the step out with --skip load"
        )
        raise UpstreamError(msg)
    try:
        installs = report_installs(done.stdout)
    except ValueError as exc:
        raise UpstreamError(f"pip's report for {requirement} cannot be read: {exc}") from None
    versions = [v for name, v in installs if name.lower() == "torch"]
    try:
        return str(Version(versions[0])) if len(versions) == 1 else _no_choice(requirement)
    except InvalidVersion:
        return _no_choice(requirement)


def _no_choice(requirement: str) -> str:
    msg = f"pip's report for {requirement} names no one torch version: check pip's index settings"
    raise UpstreamError(msg)


def constraints_note(env: Mapping[str, str] | None = None) -> str:
    """What may keep pip from a torch: PIP_CONSTRAINT when set, else where pip's own are."""
    given = (os.environ if env is None else env).get("PIP_CONSTRAINT", "").strip()
    if given:
        return f"; PIP_CONSTRAINT={given} applies"
    return "; pip's constraints, if any, are in `pip config list` (constraint, index-url)"


def wanted(floor: Version, available: Iterable[str]) -> tuple[str, ...]:
    """The newest release of the floor's minor version (2.10 -> 2.10.0), then the newest release
    of all, among those available (installable_versions: pip's own choices); one version when
    they are the same. UpstreamError when the floor has no release."""
    releases = sorted(v for v in _releases(available) if v >= floor)
    same = [v for v in releases if v.release[:2] == floor.release[:2]]
    if not same:
        listed = ", ".join(str(v) for v in releases[-3:]) or "none"
        msg = f"the registry has no Windows torch {floor}.x (newer: {listed}): check pip's index"
        raise UpstreamError(msg)
    return tuple(dict.fromkeys([str(same[-1]), str(releases[-1])]))


def _releases(texts: Iterable[str]) -> list[Version]:
    found = []
    for text in texts:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease:
            found.append(version)
    return found


def torch_dlls(version: str, root: Path, download: Downloader = pip_download) -> TorchDlls:
    """torch `version`'s Windows DLLs under root, fetched and unpacked the first time only."""
    folder = root / version
    if marked_as(folder) != OWNED_AS or not (folder / EXPORTS).is_file():
        claim(root, "torch-windows")
        with staging_dir(root, f".{version}.wheel.") as wheels:
            try:
                download([f"torch=={version}"], wheels)
            except CommandError as exc:  # pip chose it, so this is its index or its network
                msg = (
                    f"pip could not download torch {version} for win_amd64 "
                    f"({proc.last_line(exc.tail) or exc}){constraints_note()}: check pip's index "
                    "and the network, or leave the step out with --skip load"
                )
                raise UpstreamError(msg) from None
            found = sorted(wheels.glob("torch-*.whl"))
            if not found:
                msg = f"pip downloaded no torch {version} wheel for win_amd64: check pip's index"
                raise UpstreamError(msg)
            fill_dir(folder, lambda tmp: _unpack(found[0], tmp))
    return read_dlls(version, folder)


def read_dlls(version: str, folder: Path) -> TorchDlls:
    """The DLL folder as _unpack left it; FileSystemError naming the fix when its exports.json
    is unreadable or of another shape (a list, names that are not text)."""
    path = folder / EXPORTS
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        msg = f"{path} is unreadable ({exc}): remove {folder} and run again"
        raise FileSystemError(msg) from None
    cuda = _names(data.get("torch_cuda.dll") if isinstance(data, dict) else None)
    declared = _names(data.get("declared") if isinstance(data, dict) else None)
    if declared is None or (cuda is None and data.get("torch_cuda.dll") is not None):
        msg = (
            f"{path} is not what mambawin writes there (an object of name lists): remove "
            f"{folder} and run again"
        )
        raise FileSystemError(msg)
    return TorchDlls(version, folder / "lib", cuda, declared)


def _names(value: object) -> frozenset[str] | None:
    """A JSON list of names as a set; None for anything else (null, a string, a number)."""
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return frozenset(value)
    return None


def _unpack(wheel: Path, tmp: Path) -> None:
    """torch/lib/*.dll of the wheel into tmp/lib, and exports.json beside it."""
    declared: set[str] = set()
    try:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith("torch/lib/") and member.lower().endswith(".dll"):
                    target = tmp / "lib" / Path(member).name
                    target.parent.mkdir(exist_ok=True)
                    target.write_bytes(archive.read(member))
                elif member.startswith(_HEADERS) and member.endswith(".h"):
                    text = archive.read(member).decode("utf-8", "replace")
                    declared.update(_DECLARED.findall(text))
    except zipfile.BadZipFile as exc:
        msg = f"{wheel.name} is not a readable wheel ({exc}): pip's cache may be damaged"
        raise UpstreamError(msg) from None
    except OSError as exc:
        raise os_error(exc, "unpack torch's DLLs") from exc
    cuda = tmp / "lib" / "torch_cuda.dll"
    exports = {
        "torch_cuda.dll": sorted(dll_exports(cuda)) if cuda.is_file() else None,
        "declared": sorted(declared),
    }
    write_text(tmp / EXPORTS, json.dumps(exports, indent=1) + "\n")
    mark(tmp, OWNED_AS)


def dll_exports(dll: Path) -> frozenset[str]:
    """Every name a DLL exports (pefile: its export directory), read whole: a CUDA torch's
    torch_cuda.dll exports tens of thousands, past pefile's default limit of 8,192, so the limit
    is the directory's own count; a table that cannot be read whole is an UpstreamError, never
    a shorter list (the stub is checked against these names)."""
    try:
        pe = open_pe(dll, dll.name, directories=(), max_exports=0)
        declared = _export_count(pe, dll.name)
        pe.close()
        pe = open_pe(dll, dll.name, directories=(_EXPORTS,), max_exports=declared + 1)
    except WheelError as exc:
        raise UpstreamError(str(exc).replace("rebuild the wheel", "download torch again")) from None
    table = getattr(pe, "DIRECTORY_ENTRY_EXPORT", None)
    names = [s.name for s in (table.symbols if table is not None else ()) if s.name]
    pe.close()  # the file stays mapped until closed
    if len(names) != declared:
        msg = (
            f"{dll.name}: its export directory names {declared:,} symbols but {len(names):,} "
            "could be read: download torch again"
        )
        raise UpstreamError(msg)
    return frozenset(n.decode("ascii", "replace") for n in names)


_EXPORTS = "IMAGE_DIRECTORY_ENTRY_EXPORT"


def _export_count(pe: pefile.PE, name: str) -> int:
    """NumberOfNames of the export directory as the file holds it (0 without one)."""
    directories = pe.OPTIONAL_HEADER.DATA_DIRECTORY
    entry = directories[0] if directories else None  # IMAGE_DIRECTORY_ENTRY_EXPORT
    if entry is None or not entry.VirtualAddress:
        return 0
    try:
        raw = pe.get_data(entry.VirtualAddress, 40)
    except pefile.PEFormatError:
        raw = b""
    if len(raw) < 40:
        raise WheelError(f"{name}: its export directory lies outside the file")
    return int.from_bytes(raw[24:28], "little")  # IMAGE_EXPORT_DIRECTORY.NumberOfNames
