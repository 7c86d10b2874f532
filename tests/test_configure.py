"""configure(): setup.py runs with setup() intercepted; a fake setup.py stands in for upstream."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mambawin.builder.configure import DistInfo, configure, configure_env, gencode_pairs
from mambawin.errors import BuildError
from mambawin.packages import MAMBA

FAKE_SETUP = """
import os
from setuptools import Extension, setup

assert os.environ["MAMBA_FORCE_BUILD"] == "TRUE", "configure must force the build"
ext_modules = []
if os.getenv("MAMBA_KEEP_CUDA_BUILD", "FALSE") == "TRUE":
    ext = Extension("selective_scan_cuda", sources=["csrc/a.cpp", "csrc/b.cu"])
    ext.extra_compile_args = {
        "cxx": ["-O3"],
        "nvcc": ["-O3", "-gencode", "arch=compute_86,code=sm_86",
                 "-gencode=arch=compute_89,code=compute_89",
                 "--threads", os.getenv("NVCC_THREADS") or "4"],
    }
    ext_modules.append(ext)
print("chatter on stdout, like upstream's torch.__version__ banner")
setup(name="mamba_ssm", version="2.2.6", ext_modules=ext_modules)
"""


def write_setup(tmp_path: Path, body: str) -> Path:
    (tmp_path / "setup.py").write_text(body)
    return tmp_path


def test_configure_reads_the_extension_without_building(tmp_path: Path) -> None:
    source = write_setup(tmp_path, FAKE_SETUP)
    config = configure(source, env={"NVCC_THREADS": "3", "PATH": "/usr/bin:/bin"})
    assert config.ext_name == "selective_scan_cuda"
    assert config.sources == ("csrc/a.cpp", "csrc/b.cu")
    assert config.gencode == ("arch=compute_86,code=sm_86", "arch=compute_89,code=compute_89")
    assert config.nvcc_flags[-2:] == ("--threads", "3")
    assert (config.cxx_flags, config.version) == (("-O3",), "2.2.6")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["setup.py"]  # nothing built


def test_configure_records_what_a_cross_built_wheel_packs(tmp_path: Path) -> None:
    body = FAKE_SETUP.replace(
        'setup(name="mamba_ssm", version="2.2.6", ext_modules=ext_modules)',
        'setup(name="mamba_ssm", version="2.2.6", ext_modules=ext_modules,\n'
        '      packages=["mamba_ssm", "mamba_ssm.ops"], py_modules=["selective_scan_cuda"],\n'
        '      install_requires=["torch", "einops"])',
    )
    config = configure(write_setup(tmp_path, body), env={"PATH": "/usr/bin:/bin"})
    assert config.name == "mamba_ssm"
    assert config.packages == ("mamba_ssm", "mamba_ssm.ops")
    assert config.py_modules == ("selective_scan_cuda",)
    assert config.install_requires == ("torch", "einops")


def test_configure_failure_is_a_build_error_with_the_cause(tmp_path: Path) -> None:
    source = write_setup(tmp_path, "raise RuntimeError('only supported on CUDA 11.6')\n")
    with pytest.raises(BuildError, match=r"only supported on CUDA 11\.6"):
        configure(source)


def test_no_extension_is_a_build_error(tmp_path: Path) -> None:
    source = write_setup(tmp_path, "from setuptools import setup\nsetup(name='x', version='1')\n")
    with pytest.raises(BuildError, match="declared no CUDA extension"):
        configure(source)


def test_env_forces_the_cuda_build_on() -> None:
    env = configure_env({"MAMBA_SKIP_CUDA_BUILD": "TRUE", "KEEP": "1"}, package=MAMBA)
    assert (env["MAMBA_FORCE_BUILD"], env["MAMBA_KEEP_CUDA_BUILD"]) == ("TRUE", "TRUE")
    assert (env["MAMBA_SKIP_CUDA_BUILD"], env["KEEP"]) == ("FALSE", "1")


def test_gencode_pairs_both_spellings() -> None:
    flags = ("-O3", "-gencode", "arch=compute_75,code=sm_75", "-gencode=arch=compute_90,code=sm_90")
    assert gencode_pairs(flags) == ("arch=compute_75,code=sm_75", "arch=compute_90,code=sm_90")


def test_a_setup_py_whose_metadata_setuptools_refuses_is_named_with_the_fix(
    tmp_path: Path,
) -> None:
    """The cross build asks setuptools for the wheel's .dist-info: a bad setup() argument is one
    line naming it (not a hint about torch and CUDA_HOME), and nothing is left half-written."""
    tree = tmp_path / "tree"
    shutil.copytree(Path(__file__).parent / "fixtures" / "stable_ext", tree)
    setup_py = tree / "setup.py"
    setup_py.write_text(
        setup_py.read_text().replace('python_requires=">=3.9"', 'python_requires="three"')
    )
    out = tmp_path / "dist-info"
    out.mkdir()
    with pytest.raises(BuildError, match=r"could not write the wheel's metadata .*'three'"):
        configure(tree, dist_info=DistInfo(out, "py3-none-win_amd64"))
    assert not list(out.iterdir())
