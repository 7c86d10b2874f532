"""The --abi stable set on every real causal-conv1d tag and main (MAMBAWIN_TEST_CAUSAL_CONV1D).

Every tag from v1.5.0 and main patches cleanly and idempotently, with the binding shape its version
has; every older tag is refused before any file changes. With torch importable (a CUDA torch's
headers), each patched tree also configures to the stable library with its flags, and its binding
compiles (g++ -fsyntax-only) against those headers at TORCH_TARGET_VERSION. Run:
    MAMBAWIN_TEST_CAUSAL_CONV1D=<causal-conv1d git repo> <python with torch> -m pytest \
        -m upstream tests/test_patches_stable_upstream.py
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import git
import pytest
from packaging.version import Version
from typer.testing import CliRunner

from mambawin import proc
from mambawin.abi import target_version
from mambawin.builder.configure import configure
from mambawin.cli import app
from mambawin.fetch.version_rules import release_version
from mambawin.patch.causal_conv1d import stable_functions
from mambawin.patch.causal_conv1d.stable_kernels import LEFTOVER, SOURCES
from mambawin.patch.causal_conv1d.stable_shapes import shape_of
from mambawin.patch.registry import STABLE_VERSIONS
from tests.upstream_trees import at, clone_mirror, tree_hashes

pytestmark = pytest.mark.upstream
runner = CliRunner()
ENV = "MAMBAWIN_TEST_CAUSAL_CONV1D"
SUPPORTED = STABLE_VERSIONS["causal-conv1d"]
CPP = "csrc/causal_conv1d.cpp"


def _refs() -> list[str]:
    path = os.environ.get(ENV)
    if not path:
        return ["main"]
    tags = [t.name for t in git.Repo(path).tags if release_version(t.name) is not None]
    return [*sorted(tags, key=lambda t: release_version(t) or Version("0")), "main"]


def supported(ref: str) -> bool:
    version = release_version(ref)
    return version is None or SUPPORTED.contains(version, prereleases=True)


def expected_shape(ref: str) -> str:
    version = release_version(ref)
    if version is not None and version < Version("1.5.1"):
        return "returning"
    if version is not None and version < Version("1.6.0"):
        return "out"
    return "out-deterministic"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> git.Repo:
    """One local clone of the Dao-AILab/causal-conv1d mirror for the whole module."""
    return clone_mirror(
        ENV, "Dao-AILab/causal-conv1d", tmp_path_factory.mktemp("upstream") / "causal-conv1d"
    )


def patch_stable(root: Path) -> str:
    args = ["patch", str(root), "--abi", "stable", "--arch", "90", "--package", "causal-conv1d"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("ref", [r for r in _refs() if supported(r)])
def test_every_supported_ref_ports_idempotently(work: git.Repo, ref: str) -> None:
    root = at(work, ref)
    patch_stable(root)
    patched = tree_hashes(root)
    patch_stable(root)
    assert tree_hashes(root) == patched
    binding = (root / CPP).read_text()
    assert shape_of(binding) is not None
    assert shape_of(binding).name == expected_shape(ref)  # type: ignore[union-attr]
    assert "PYBIND11_MODULE" not in binding
    for source in SOURCES:
        assert LEFTOVER.search((root / source).read_text()) is None, source
    shim = (root / "causal_conv1d_cuda.py").read_text()
    compile(shim, "causal_conv1d_cuda.py", "exec")
    functions = root / stable_functions.FILE
    # v1.5.1+: cpp_functions.py's three functions come from the shim (torch.compile traces them).
    if expected_shape(ref) != "returning":
        text = functions.read_text()
        assert text.count(stable_functions.MARK) == 1 and text.rstrip().endswith(")")
        compile(text, "cpp_functions.py", "exec")
    else:
        assert not functions.exists()
    compile((root / "setup.py").read_text(), "setup.py", "exec")
    assert (
        "if (chunk * kChunkSize + i < params.seqlen)"
        not in (root / "csrc/causal_conv1d_bwd.cu").read_text()
    )  # silu-bwd-tail still applies underneath


@pytest.mark.parametrize("ref", [r for r in _refs() if not supported(r)])
def test_every_older_ref_is_refused_untouched(work: git.Repo, ref: str) -> None:
    root = at(work, ref)
    before = tree_hashes(root)
    result = runner.invoke(app, ["patch", str(root), "--abi", "stable", "--arch", "90"])
    assert result.exit_code == 2, result.output
    assert f"outside the versions its stable-ABI port supports ({SUPPORTED})" in result.output
    assert tree_hashes(root) == before


def torch_include() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs torch (its headers, and setup.py imports it)")
    return Path(next(iter(spec.submodule_search_locations))) / "include"


@pytest.mark.parametrize("ref", [r for r in _refs() if supported(r)])
def test_every_supported_ref_configures_and_its_binding_compiles(
    work: git.Repo, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    include = torch_include()
    root = at(work, ref)
    patch_stable(root)
    monkeypatch.delenv("CAUSAL_CONV1D_SKIP_CUDA_BUILD", raising=False)
    config = configure(root)
    define = f"-DTORCH_TARGET_VERSION={target_version()}"
    assert config.ext_name == "causal_conv1d_cuda_stable"
    assert {"-DUSE_CUDA", define} <= set(config.cxx_flags) & set(config.nvcc_flags)
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    compiler = shutil.which("g++")
    if compiler is None or not (cuda / "cuda_runtime.h").is_file():
        pytest.skip("the syntax check needs g++ and CUDA's headers (CUDA_HOME)")
    argv = [compiler, "-std=c++17", "-fsyntax-only", "-DUSE_CUDA", define]
    argv += [f"-I{include}", f"-I{cuda}", f"-I{root / 'csrc'}", str(root / CPP)]
    result = proc.run(argv, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
