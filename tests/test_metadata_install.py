"""A rewritten wheel installs with pip (offline) and its torch guard names both versions."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from mambawin import proc
from mambawin.errors import CommandError
from mambawin.wheel.provenance import Provenance
from mambawin.wheel.repack import rewrite_wheel

TAG = "py3-none-any"  # pip refuses a platform tag that is not this machine's, so keep it neutral
INIT = '"""Mamba."""\n\n__version__ = "2.2.6"\nimport selective_scan_cuda  # noqa\n'


def tiny_wheel(folder: Path) -> Path:
    """mamba_ssm 2.2.6 whose package imports a top-level module, like selective_scan_cuda."""
    src = folder / "src"
    dist = src / "mamba_ssm-2.2.6.dist-info"
    (src / "mamba_ssm").mkdir(parents=True)
    dist.mkdir()
    (src / "mamba_ssm" / "__init__.py").write_text(INIT)
    (src / "selective_scan_cuda.py").write_text("LOADED = True\n")
    # A binary stand-in for another Python (cp39), so this interpreter never tries to load it.
    (src / "selective_scan_cuda.cpython-39-x86_64-linux-gnu.so").write_bytes(b"\x7fELF stand-in")
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mamba_ssm\nVersion: 2.2.6\n"
        "Requires-Dist: torch\nRequires-Dist: triton\n\n"
    )
    (dist / "WHEEL").write_text(
        f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: {TAG}\n\n"
    )
    path = folder / f"mamba_ssm-2.2.6-{TAG}.whl"
    with WheelFile(path, "w") as out:
        out.write_files(str(src))
    return path


def fake_torch(folder: Path, version: str, cuda: str | None) -> Path:
    """A `torch` package that only has __version__ and version.cuda, like a real one."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(
        f"from types import SimpleNamespace\n__version__ = {version!r}\n"
        f"version = SimpleNamespace(cuda={cuda!r})\n"
    )
    return folder


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rewritten wheel (built for torch 2.8 / CUDA 12.9) installed with pip --target."""
    tmp_path = tmp_path_factory.mktemp("install")
    provenance = Provenance(torch_version="2.8.0+cu129", cuda_version="12.9.1")
    wheel = rewrite_wheel(
        tiny_wheel(tmp_path), tmp_path / "out", local_version="cu129torch2.8", provenance=provenance
    )
    target = tmp_path / "site"
    proc.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "--target",
            str(target),
            str(wheel),
        ],
        timeout=300,
    )
    return target


def import_mamba(site: Path, torch_dir: Path, **env: str) -> str:
    """Import mamba_ssm in a fresh interpreter without site-packages (so no real torch)."""
    path = os.pathsep.join([str(site), str(torch_dir)])
    environ = {k: v for k, v in os.environ.items() if k != "MAMBAWIN_SKIP_TORCH_CHECK"}
    environ.update(PYTHONPATH=path, **env)
    try:
        done = proc.run(
            [sys.executable, "-S", "-c", "import mamba_ssm; print('imported')"],
            env=environ,
            timeout=60,
        )
    except CommandError as exc:
        return exc.tail
    return done.stdout


def test_pip_installs_the_rewritten_wheel(installed: Path) -> None:
    dist_info = installed / "mamba_ssm-2.2.6+cu129torch2.8.dist-info"
    assert (dist_info / "mambawin-provenance.json").is_file()
    assert (installed / "selective_scan_cuda.cpython-39-x86_64-linux-gnu.so").is_file()
    assert "Requires-Dist: triton\n" in (dist_info / "METADATA").read_text()  # Linux keeps it


@pytest.mark.parametrize(
    ("version", "cuda"), [("2.7.1+cu126", "12.6"), ("2.8.0+cu130", "13.0"), ("2.8.0+cpu", None)]
)
def test_a_different_torch_gets_a_message_naming_both(
    installed: Path, tmp_path: Path, version: str, cuda: str | None
) -> None:
    output = import_mamba(installed, fake_torch(tmp_path / "torch", version, cuda))
    assert "ImportError: mamba_ssm was built for torch 2.8 with CUDA 12.x" in output
    assert f"but torch {version} with CUDA {cuda} is installed" in output
    assert "selective_scan_cuda" not in output.split("ImportError")[-1]


def test_the_matching_torch_imports(installed: Path, tmp_path: Path) -> None:
    torch_dir = fake_torch(tmp_path / "torch", "2.8.1+cu128", "12.8")
    assert import_mamba(installed, torch_dir).strip() == "imported"


def test_the_guard_can_be_switched_off_at_import(installed: Path, tmp_path: Path) -> None:
    torch_dir = fake_torch(tmp_path / "torch", "2.7.1", "12.6")
    output = import_mamba(installed, torch_dir, MAMBAWIN_SKIP_TORCH_CHECK="1")
    assert output.strip() == "imported"
