"""Install the CPU stand-ins for the compiled extensions and the two packages' Python APIs.

`install_fakes(monkeypatch)` makes `selective_scan_cuda`, `causal_conv1d_cuda`, `causal_conv1d`
and `mamba_ssm.ops.selective_scan_interface` importable from tests/fixtures/verify; monkeypatch
removes them again after the test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

VERIFY = Path(__file__).resolve().parents[1] / "fixtures" / "verify"
_PACKAGES = (
    "mamba_ssm",
    "mamba_ssm.ops",
    "mamba_ssm.ops.selective_scan_interface",
    "mamba_ssm.modules",
    "mamba_ssm.modules.mamba_simple",
    "mamba_ssm.modules.mamba2",
    "causal_conv1d",
)


def load(name: str, file: str) -> ModuleType:
    """A fresh module object from a fixture file."""
    spec = importlib.util.spec_from_file_location(name, VERIFY / file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install_fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, ModuleType]:
    """Register fresh fakes; returns the extension modules by their real names."""
    fakes = {
        "selective_scan_cuda": load("selective_scan_cuda", "fake_selective_scan_cuda.py"),
        "causal_conv1d_cuda": load("causal_conv1d_cuda", "fake_causal_conv1d_cuda.py"),
    }
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    for name in _PACKAGES:
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(VERIFY / "fakepkgs"))
    return fakes


def forget_packages() -> None:
    """Forget the fake packages imported during a test (monkeypatch restores only what it set)."""
    for name in _PACKAGES:
        sys.modules.pop(name, None)
