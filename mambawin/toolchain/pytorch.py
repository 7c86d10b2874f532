"""Python and torch facts, read without importing torch (that alone takes seconds)."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mambawin.stage import Status
from mambawin.toolchain.probe import Check, version_of

PYTHON_REQUIRED = SpecifierSet(">=3.10")
TORCH_INDEX = "https://download.pytorch.org/whl"

# The guard torch puts at the top of its public headers, e.g. ATen/ATen.h in torch 2.15:
#   #if ... __cplusplus < 202002L  /  #error C++20 or later compatible compiler is required ...
_CPLUSPLUS_GUARD = re.compile(r"__cplusplus\s*<\s*(\d{6})L")
_CPLUSPLUS_STD = {"201103": 11, "201402": 14, "201703": 17, "202002": 20, "202302": 23}
_GUARDED_HEADERS = ("ATen/ATen.h", "torch/csrc/api/include/torch/all.h", "c10/macros/Macros.h")


@dataclass(frozen=True)
class Gpu:
    """One visible GPU and its compute capability."""

    name: str
    capability: tuple[int, int]

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


@dataclass(frozen=True)
class TorchFacts:
    """What the build needs to know about the installed torch."""

    installed: bool = False
    version: str = ""
    cuda: str | None = None
    cxx_std: int | None = None
    location: str = ""
    gpus: tuple[Gpu, ...] = ()
    error: str = ""

    @property
    def cpu_only(self) -> bool:
        """torch.version.cuda is None: PyPI's Windows wheels are CPU-only and carry no +cpu tag."""
        return self.installed and self.cuda is None


TorchFactsProvider = Callable[[], TorchFacts]


def read_torch_facts() -> TorchFacts:
    """torch's version, CUDA and C++ standard from its files: torch/version.py and its headers."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return TorchFacts()
    root = Path(next(iter(spec.submodule_search_locations)))
    values = _assignments((root / "version.py").read_text(encoding="utf-8"))
    cuda = values.get("cuda")
    return TorchFacts(
        installed=True,
        version=str(values.get("__version__", "")),
        cuda=str(cuda) if cuda else None,
        cxx_std=cxx_std(root / "include"),
        location=str(root),
    )


def package_version(root: Path) -> str:
    """The version of the torch package folder at root (its version.py's __version__, read
    without running it); '' when it has none a reader can trust."""
    try:
        values = _assignments((root / "version.py").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return ""
    version = values.get("__version__")
    return version if isinstance(version, str) else ""


def _assignments(source: str) -> dict[str, object]:
    """Literal `name = value` / `name: T = value` assignments of a module, without running it."""
    found: dict[str, object] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError:
                continue
    return found


def cxx_std(include_dir: Path) -> int | None:
    """The C++ standard torch's headers insist on (their `__cplusplus < 2020xxL` #error guard)."""
    levels: list[int] = []
    for name in _GUARDED_HEADERS:
        try:
            head = (include_dir / name).read_text(encoding="utf-8", errors="replace")[:4000]
        except OSError:
            continue
        levels += [_CPLUSPLUS_STD.get(m, 0) for m in _CPLUSPLUS_GUARD.findall(head)]
    best = max(levels, default=0)
    return best or None


# ---- checks ------------------------------------------------------------------------------------


def python_checks(
    version: tuple[int, ...] = tuple(sys.version_info[:3]), bits64: bool = sys.maxsize > 2**32
) -> list[Check]:
    """Python version and 64-bit interpreter (torch has no 32-bit CUDA builds)."""
    text = ".".join(str(v) for v in version)
    if not bits64:
        return [
            Check(
                "python",
                Status.FAIL,
                found=sys.executable,
                version=text,
                required="64-bit",
                hint="this is a 32-bit Python: install 64-bit Python from python.org",
                blocking=True,
            )
        ]
    if Version(text) not in PYTHON_REQUIRED:
        return [
            Check(
                "python",
                Status.FAIL,
                found=sys.executable,
                version=text,
                required=str(PYTHON_REQUIRED),
                hint="install Python 3.10 or newer (64-bit) and a CUDA torch for it",
                blocking=True,
            )
        ]
    return [
        Check(
            "python",
            Status.OK,
            found=sys.executable,
            version=text,
            required=f"{PYTHON_REQUIRED}, 64-bit",
        )
    ]


def cu_tag(cuda: Version | None) -> str:
    """The download.pytorch.org index name for a CUDA version: 13.0 -> cu130."""
    return f"cu{cuda.major}{cuda.minor}" if cuda else "cu130"


def install_command(nvcc: Version | None, *, replace: bool = True) -> str:
    """The pip command that installs a torch built for this CUDA.

    replace: a torch is there and must be swapped (pip keeps a satisfied `torch` otherwise).
    """
    force = "--force-reinstall " if replace else ""
    return f"pip install {force}torch --index-url {TORCH_INDEX}/{cu_tag(nvcc)}"


def torch_checks(torch: TorchFacts, nvcc: Version | None) -> list[Check]:
    """torch installed, built with CUDA, and with the same CUDA major as nvcc."""
    if torch.error:
        return [Check("torch", Status.FAIL, hint=torch.error, blocking=True)]
    if not torch.installed:
        return [
            Check(
                "torch",
                Status.FAIL,
                found="not installed",
                required="a CUDA build",
                hint=install_command(nvcc, replace=False),
                blocking=True,
            )
        ]
    return [
        Check("torch", Status.OK, found=torch.location, version=torch.version),
        _torch_cuda(torch, nvcc),
    ]


def _torch_cuda(torch: TorchFacts, nvcc: Version | None) -> Check:
    need = f"CUDA {nvcc.major}.x (nvcc {nvcc.public})" if nvcc else "a CUDA build"
    if torch.cuda is None:
        hint = (
            f"torch {torch.version} is CPU-only (torch.version.cuda is None): "
            f"{install_command(nvcc)}"
        )
        return Check(
            "torch CUDA", Status.FAIL, found="CPU-only", required=need, hint=hint, blocking=True
        )
    built = version_of(torch.cuda)
    if nvcc is None or built is None:
        return Check(
            "torch CUDA",
            Status.SKIP,
            found=f"CUDA {torch.cuda}",
            version=torch.cuda,
            required=need,
            hint="nvcc not found, so the CUDA versions cannot be compared",
        )
    if built.major != nvcc.major:
        # torch's _check_cuda_version raises on a major mismatch, before compiling anything.
        hint = (
            f"torch was built with CUDA {torch.cuda} but nvcc is {nvcc.public}: install CUDA "
            f"{torch.cuda} or {install_command(nvcc)}"
        )
        return Check(
            "torch CUDA",
            Status.FAIL,
            found=f"CUDA {torch.cuda}",
            version=torch.cuda,
            required=need,
            hint=hint,
            blocking=True,
        )
    if built.minor != nvcc.minor:
        hint = (
            f"minor mismatch (torch {torch.cuda}, nvcc {nvcc.major}.{nvcc.minor}): torch only "
            "warns; the wheel will need a driver for the newer of the two"
        )
        return Check(
            "torch CUDA",
            Status.WARN,
            found=f"CUDA {torch.cuda}",
            version=torch.cuda,
            required=need,
            hint=hint,
        )
    return Check(
        "torch CUDA", Status.OK, found=f"CUDA {torch.cuda}", version=torch.cuda, required=need
    )
