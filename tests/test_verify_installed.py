"""verify when the wheel under test is already installed where mambawin runs (real pip, real venvs).

The host environment is a real venv with mambawin copied into its site-packages (as a regular
install puts it) and an older mamba_ssm wheel pip-installed next to it. verify must still import
the extension from the wheel under test, and `--installed` must use the host's copy.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

import mambawin

# A stand-in for torch: the test is about which copy of the extension is imported, not kernels.
FAKE_TORCH = """__version__ = "2.8.0"
class version:
    cuda = "12.8"
class cuda:
    @staticmethod
    def is_available():
        return False
"""


def fake_wheel(
    folder: Path,
    marker: str,
    version: str = "2.2.6",
    name: str = "mamba_ssm",
    extension: str = "selective_scan_cuda",
) -> Path:
    """A wheel whose pure-Python stand-in extension says which copy it is (RECORD by `wheel`)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    dist = f"{name}-{version}.dist-info"
    with WheelFile(path, "w") as archive:
        archive.writestr(f"{name}/__init__.py", f"WHO = {marker!r}\n")
        archive.writestr(f"{extension}.py", f"WHO = {marker!r}\n")
        archive.writestr(
            f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{dist}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
    return path


def _purelib(python: Path) -> Path:
    out = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(python, site-packages) of a venv holding mambawin and a pip-installed mamba_ssm."""
    root = tmp_path_factory.mktemp("host")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", root / "venv"], check=True)
    python = root / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = _purelib(python)
    # mambawin's dependencies (typer, rich, packaging, ...) come from this test's environment.
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    (purelib / "_deps.pth").write_text("".join(f"{d}\n" for d in dirs if Path(d).is_dir()))
    shutil.copytree(
        Path(mambawin.__file__).parent,
        purelib / "mambawin",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (purelib / "torch").mkdir()
    (purelib / "torch" / "__init__.py").write_text(FAKE_TORCH)
    installed = fake_wheel(root / "old", "installed copy")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            python,
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            installed,
        ],
        check=True,
        capture_output=True,
    )
    return python, purelib


def _verify(python: Path, cwd: Path, *args: str, code: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, "-m", "mambawin", "verify", *args, "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.stdout.strip(), done.stderr
    assert code is None or done.returncode == code, done.stderr
    return json.loads(done.stdout)


def _install_step(report: dict) -> dict:
    return next(s for s in report["steps"] if s["name"] == "install")


def test_verify_wheel_ignores_the_copy_installed_where_mambawin_runs(host, tmp_path):
    python, purelib = host
    assert (purelib / "selective_scan_cuda.py").read_text() == "WHO = 'installed copy'\n"
    wheel = fake_wheel(tmp_path / "new", "under test", version="2.3.0")
    step = _install_step(_verify(python, tmp_path, str(wheel)))
    assert step["status"] == "ok", step["summary"]
    origin = Path(step["details"]["extension"])
    assert "mambawin-verify-" in str(origin) and purelib not in origin.parents
    assert "throwaway venv" in step["summary"]


def test_verify_installed_uses_the_host_copy(host, tmp_path):
    python, purelib = host
    step = _install_step(_verify(python, tmp_path, "--installed"))
    assert step["status"] == "ok", step["summary"]
    assert Path(step["details"]["extension"]) == purelib / "selective_scan_cuda.py"
    assert "current environment" in step["summary"]


def _wheelhouse(folder: Path, conv_version: str) -> Path:
    fake_wheel(folder, "under test", version="2.3.2")
    fake_wheel(folder, "conv under test", conv_version, "causal_conv1d", "causal_conv1d_cuda")
    return folder


def test_a_wheelhouse_installs_both_wheels_into_one_venv(host, tmp_path):
    python, purelib = host
    report = _verify(python, tmp_path, str(_wheelhouse(tmp_path / "house", "1.6.1")))
    names = [s["name"] for s in report["steps"]]
    assert names[:8] == [
        "static",
        "fit",
        "static causal_conv1d",
        "fit causal_conv1d",
        "requirements",
        "requirements causal_conv1d",
        "pair",
        "install",
    ]
    assert {"smoke", "conv", "calls", "blocks"} <= set(names)
    install = _install_step(report)
    assert install["status"] == "ok", install["summary"]
    found = {k: Path(v) for k, v in install["details"]["extensions"].items()}
    assert set(found) == {"selective_scan_cuda", "causal_conv1d_cuda"}
    assert found["selective_scan_cuda"].parent == found["causal_conv1d_cuda"].parent
    assert purelib not in found["selective_scan_cuda"].parents
    pair = next(s for s in report["steps"] if s["name"] == "pair")
    assert pair["status"] == "ok", pair["summary"]


def test_a_wheelhouse_with_an_old_causal_conv1d_fails_the_pair(host, tmp_path):
    python, _ = host
    report = _verify(python, tmp_path, str(_wheelhouse(tmp_path / "house", "1.2.0")), code=8)
    pair = next(s for s in report["steps"] if s["name"] == "pair")
    assert pair["status"] == "fail"
    assert "mamba_ssm 2.3.2 needs causal_conv1d>=1.5.1, found 1.2.0" in pair["summary"]
