"""Symbol closure: do the objects link into the extension, as far as this machine can tell?

Microsoft's link.exe links every object as setuptools and torch would (`/DLL /LTCG`, the export
`PyInit_<name>`, torch's Windows libraries and cudart.lib) with `/FORCE:UNRESOLVED`, so it lists
every unresolved symbol (LNK2001/LNK2019) instead of stopping at the first. An unresolved symbol is
accepted only when it comes from a library the package registries do not have:
- Python's C API (`Py*`, `_Py*`): no python3XX.lib outside a Windows CPython;
- torch's CUDA libraries (`c10::cuda::`, `at::cuda::`, `torch::cuda::`, imported with
  `__declspec(dllimport)`): c10_cuda.lib and torch_cuda.lib are not in torch's CPU wheel.
Anything else, such as a kernel launcher the binding calls and no object defines (the LNK2001 a
wrong complex-removal gives), breaks the closure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mambawin.builder.results import ClosureReport, SymbolReport
from mambawin.toolchain.wine import WindowsToolchain, msvc_tool, windows_path
from mambawin.toolchain.wine_server import Runner

# What torch's CUDAExtension links on Windows (torch/utils/cpp_extension.py, 2.11), and the two
# its CPU wheel lacks.
TORCH_LIBRARIES = ("c10", "torch", "torch_cpu", "torch_python", "cudart", "c10_cuda", "torch_cuda")
ABSENT_LIBRARIES = ("c10_cuda", "torch_cuda")
# setuptools' MSVC link options for an extension (its ldflags_shared), and torch's /LTCG match.
LINK_OPTIONS = ("/nologo", "/INCREMENTAL:NO", "/LTCG", "/DLL", "/MANIFEST:EMBED,ID=2")
# LNK2001 ends with the symbol; LNK2019 adds ` referenced in function "..." (...)`.
_UNRESOLVED = re.compile(
    r"^(?P<obj>\S+) : error (?P<code>LNK20(?:01|19)): unresolved external symbol "
    r"(?:\"(?P<readable>.*?)\" \((?P<decorated>[^)\s]+)\)|(?P<plain>[^\s\"]+))"
    r"(?: referenced in function .*)?$"
)
_PRAGMA_LIB = re.compile(r'pragma\s+comment\s*\(\s*lib\s*,\s*"([^"]+)"\s*\)')
_ABSENT_NAMESPACES = ("c10::cuda::", "at::cuda::", "torch::cuda::")


@dataclass(frozen=True)
class Unresolved:
    """One symbol no object and no available library defines."""

    symbol: str  # the decorated name
    readable: str  # link.exe's undecorated form, or the name again
    objects: tuple[str, ...]  # which objects need it

    @property
    def accepted(self) -> str | None:
        """Why it is fine (its library is not to be had here), or None when it breaks the link."""
        bare = self.symbol.removeprefix("__imp_")
        if bare.startswith(("Py", "_Py")):
            return "Python's C API (python3XX.lib)"
        if self.symbol.startswith("__imp_") and any(n in self.readable for n in _ABSENT_NAMESPACES):
            return "torch's CUDA libraries (c10_cuda.lib, torch_cuda.lib)"
        return None


@dataclass(frozen=True)
class Closure:
    """The link's verdict."""

    unresolved: tuple[Unresolved, ...]
    fatal: str | None = None  # a link that did not get as far as listing symbols

    @property
    def broken(self) -> tuple[Unresolved, ...]:
        return tuple(u for u in self.unresolved if u.accepted is None)

    @property
    def holds(self) -> bool:
        return self.fatal is None and not self.broken

    def report(self) -> ClosureReport:
        """The verdict as the backend's result carries it (BuildResult.closure)."""
        symbols = tuple(
            SymbolReport(u.symbol, u.readable, u.objects, u.accepted) for u in self.unresolved
        )
        return ClosureReport(self.holds, self.fatal, symbols)


def python_libraries(pyconfig: Path | None) -> list[str]:
    """The libraries pyconfig.h names with #pragma comment(lib, ...): they are not here."""
    if pyconfig is None or not pyconfig.is_file():
        return []
    return _PRAGMA_LIB.findall(pyconfig.read_text(encoding="utf-8", errors="replace"))


def link_args(
    toolchain: WindowsToolchain,
    objects: Sequence[Path],
    ext_name: str,
    out: Path,
    skip_libraries: Sequence[str],
) -> list[str]:
    """link.exe's arguments: setuptools' options, torch's libraries that exist, the objects."""
    assert toolchain.torch is not None
    args = [*LINK_OPTIONS, "/FORCE:UNRESOLVED"]
    args += [f"/LIBPATH:{windows_path(toolchain.torch / 'lib')}"]
    args += [f"/LIBPATH:{windows_path(toolchain.cuda / 'lib' / 'x64')}"]
    args += [f"{name}.lib" for name in TORCH_LIBRARIES if name not in ABSENT_LIBRARIES]
    args += [f"/NODEFAULTLIB:{name}" for name in skip_libraries]
    args += [f"/EXPORT:PyInit_{ext_name.split('.')[-1]}", f"/OUT:{windows_path(out)}"]
    return args + [windows_path(obj) for obj in objects]


def parse_link(output: str) -> Closure:
    """The unresolved symbols link.exe listed (once each, with every object needing them)."""
    needs: dict[str, tuple[str, list[str]]] = {}
    fatal = None
    for line in output.splitlines():
        match = _UNRESOLVED.match(line.strip())
        if match:
            symbol = match["decorated"] or match["plain"]
            readable = match["readable"] or symbol
            entry = needs.setdefault(symbol, (readable, []))
            if match["obj"] not in entry[1]:
                entry[1].append(match["obj"])
        elif "fatal error LNK" in line and fatal is None:
            fatal = line.strip()
    found = tuple(Unresolved(s, r, tuple(objs)) for s, (r, objs) in needs.items())
    return Closure(found, fatal)


def check_closure(
    toolchain: WindowsToolchain,
    objects: Sequence[Path],
    ext_name: str,
    workdir: Path,
    *,
    wine: str,
    env: Mapping[str, str],
    runner: Runner,
    pyconfig: Path | None = None,
) -> Closure:
    """Link the objects with link.exe under wine and judge what stays unresolved."""
    link = msvc_tool(toolchain, "link")
    out = workdir / f"{ext_name.split('.')[-1]}.pyd"
    args = link_args(toolchain, objects, ext_name, out, python_libraries(pyconfig))
    done = runner([wine, str(link), *args], env, workdir)
    return parse_link(done.stdout + "\n" + done.stderr)
