"""Which torch ABI a compiled extension is built against: one fact, used by every stage.

- "torch": torch's C++ ABI (c10::, at::, pybind11). The wheel fits one torch minor and one
  CPython: a team's matrix has a cell per Python × torch, and every torch release is a rebuild.
- "stable": torch's stable C ABI (torch/csrc/stable, torch::headeronly, the aoti_torch_* shims).
  The binary imports only C symbols torch keeps from the floor on, and no CPython symbol at all,
  so one wheel serves every torch >= STABLE_FLOOR and every Python.

The binary of a stable build is a plain shared library that registers its ops with
STABLE_TORCH_LIBRARY when `torch.ops.load_library` loads it; a small Python module under
upstream's extension name (`selective_scan_cuda`, `causal_conv1d_cuda`) loads it and binds the
old function names to `torch.ops.<namespace>.*`, so upstream's Python runs unmodified. Why not an
abi3 extension module: it would still import python3.dll on Windows (a library this Linux machine
cannot link against when it cross-builds), and abi3 excludes the free-threaded CPythons; the
library needs neither, so its wheel is tagged py3-none-<platform>.
"""

from __future__ import annotations

from typing import Literal

from packaging.version import Version

from mambawin.errors import UsageError

Abi = Literal["torch", "stable"]
ABIS: tuple[Abi, ...] = ("torch", "stable")
DEFAULT_ABI: Abi = "torch"

# The oldest torch a stable wheel loads in. 2.10 is the first release whose headers honour
# TORCH_TARGET_VERSION (they hide any API newer than the target), ship STD_TORCH_CHECK and
# torch::stable::accelerator::DeviceGuard; older torch lacks pieces the bindings use.
STABLE_FLOOR = Version("2.10")

# The oldest CPython the floor's torch ships wheels for (torch 2.10: 3.10 to 3.14): a stable
# wheel's Requires-Python, which upstream's `>=3.9` would leave below what its torch installs on.
STABLE_FLOOR_PYTHON = Version("3.10")

# A stable wheel runs on every CPython: its binary holds no Python C API.
STABLE_PYTHON_TAG = "py3"
STABLE_ABI_TAG = "none"

# What the stable build's library adds to upstream's extension name (stable_library).
STABLE_SUFFIX = "_stable"


def parse_abi(text: str) -> Abi:
    """The ABI named by text ("torch" or "stable"); UsageError naming the choices."""
    wanted = text.strip().lower()
    for abi in ABIS:
        if wanted == abi:
            return abi
    msg = f"unknown ABI {text!r}: use one of {', '.join(ABIS)} (--abi)"
    raise UsageError(msg)


def target_version(floor: Version = STABLE_FLOOR) -> str:
    """TORCH_TARGET_VERSION for floor: 0xMMmmpp… as torch's headers compare it (2.10 -> 0x020a…)."""
    major, minor = floor.release[:2]
    return f"0x{major:02x}{minor:02x}000000000000"


def torch_requirement(floor: Version = STABLE_FLOOR) -> str:
    """The Requires-Dist a stable wheel carries: any torch at or above the floor."""
    return f"torch>={floor}"


def stable_library(extension: str) -> str:
    """The stable build's shared library for upstream's extension module: `<extension>_stable`.

    Its ops live in the `torch.ops.<extension>` namespace; the module named `<extension>` is the
    Python shim that loads the library and binds upstream's function names to those ops.
    """
    return f"{extension}{STABLE_SUFFIX}"


def stable_library_files(extension: str) -> tuple[str, ...]:
    """The file names the shim loads the library from, first found wins: setuptools names it
    `<library>.abi3.so` on Linux (py_limited_api) and `<library>.pyd` on Windows; neither name
    depends on the running Python, which never imports it as a module."""
    library = stable_library(extension)
    return (f"{library}.abi3.so", f"{library}.so", f"{library}.pyd")


def stable_shim(extension: str) -> str:
    """The shim's file at the wheel's top level: the module under upstream's extension name
    (`selective_scan_cuda.py`), which upstream's Python imports and which loads the library."""
    return f"{extension}.py"
