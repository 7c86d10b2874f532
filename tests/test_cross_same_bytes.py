"""A cross-built Windows wheel of a real causal-conv1d is the same bytes from any folder: two
`build --platform win_amd64` runs in cache folders of different length, under different HOMEs,
give one wheel (docs/benchmarks.md §31: without nvcc.exe's fixed seed and temporary names they
differed in every unit's internal device symbol names)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mambawin import proc

ROOT = Path(__file__).resolve().parents[1]


def needs(var: str) -> str:
    value = os.environ.get(var)
    if not value:
        pytest.skip(f"set {var}")
    return value


@pytest.mark.windows_toolchain
def test_two_cross_builds_in_two_folders_give_one_wheel(tmp_path: Path) -> None:
    toolchain = needs("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    repo = needs("MAMBAWIN_TEST_CAUSAL_CONV1D")  # a causal-conv1d clone with v1.6.1.post4
    if proc.which("wine") is None and proc.which("wine64") is None:
        pytest.skip("wine is not on PATH")
    pytest.importorskip("torch")  # setup.py is configured with torch's cpp_extension
    wheels = []
    for place in ("a", "a/much/longer/cache/folder/for/the/second/build"):
        home = tmp_path / place / "home"
        home.mkdir(parents=True)
        env = {
            **os.environ,
            "HOME": str(home),
            "MAMBAWIN_CACHE_DIR": str(tmp_path / place / "cache"),
            "PYTHONPATH": str(ROOT),
        }
        env.pop("SOURCE_DATE_EPOCH", None)  # the wheel's date comes from the commit
        out = tmp_path / place / "out"
        argv = [
            sys.executable,
            "-m",
            "mambawin",
            "build",
            "--package",
            "causal-conv1d",
            "--repo",
            repo,
            "--ref",
            "v1.6.1.post4",
            "--abi",
            "stable",
            "--platform",
            "win_amd64",
            "--arch",
            "90",
            "--jobs",
            "2",
            "--windows-root",
            toolchain,
            "--out",
            str(out),
        ]
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        (wheel,) = out.glob("*.whl")
        wheels.append(wheel)
    assert wheels[0].name == wheels[1].name
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
