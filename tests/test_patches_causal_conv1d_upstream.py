"""causal-conv1d's patch set against every real tag and main (needs MAMBAWIN_TEST_CAUSAL_CONV1D).

Every tag patches cleanly and idempotently, with its fwd and bwd units split (split-units);
from v1.4.0 (what mamba-ssm 2.x needs) every tag and
main also configures (setup.py run with setup() intercepted, so torch must be importable) to
exactly the requested archs, with NVCC_THREADS honoured. Run:
    MAMBAWIN_TEST_CAUSAL_CONV1D=<causal-conv1d git repo> <python with torch> -m pytest -m upstream
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

import git
import pytest
from packaging.version import Version
from typer.testing import CliRunner

from mambawin import proc
from mambawin.builder.configure import configure
from mambawin.cli import app
from mambawin.fetch.version_rules import release_version
from mambawin.patch.record import RECORD
from tests.upstream_trees import at, clone_mirror, tree_hashes

pytestmark = pytest.mark.upstream
runner = CliRunner()
ENV = "MAMBAWIN_TEST_CAUSAL_CONV1D"
ARCHS = "86;89"  # two archs: split-units makes fwd 3 translation units and bwd 9
EXPECTED_GENCODE = ("arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")
CONFIGURED_FROM = Version("1.4.0")
_NESTED = re.compile(r"^[ \t]+#(ifndef|ifdef|if|else|endif)\b", re.MULTILINE)


def _refs() -> list[str]:
    """Every release tag plus main, read at collection time; one placeholder when unset."""
    path = os.environ.get(ENV)
    if not path:
        return ["main"]
    tags = [t.name for t in git.Repo(path).tags if release_version(t.name) is not None]
    return [*sorted(tags, key=lambda t: release_version(t) or Version("0")), "main"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> git.Repo:
    """One local clone of the Dao-AILab/causal-conv1d mirror for the whole module."""
    return clone_mirror(
        ENV, "Dao-AILab/causal-conv1d", tmp_path_factory.mktemp("upstream") / "causal-conv1d"
    )


def configured(ref: str) -> bool:
    version = release_version(ref)
    return version is None or version >= CONFIGURED_FROM


@pytest.mark.parametrize("ref", _refs())
def test_every_ref_patches_idempotently(work: git.Repo, ref: str) -> None:
    root = at(work, ref)
    first = runner.invoke(app, ["patch", str(root), "--arch", ARCHS, "--package", "causal-conv1d"])
    assert first.exit_code == 0, first.output
    patched = tree_hashes(root)
    assert RECORD in patched
    second = runner.invoke(app, ["patch", str(root), "--arch", ARCHS, "--json"])
    assert second.exit_code == 0, second.output
    assert '"status": "applied"' not in second.stdout
    assert tree_hashes(root) == patched
    for rel in ("csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu"):
        assert not _NESTED.search((root / rel).read_text()), rel
    checks = [
        ln.split(', "')[0]
        for ln in (root / "csrc/causal_conv1d.cpp").read_text().splitlines()
        if ln.strip().startswith("TORCH_CHECK(")
    ]
    assert not [c for c in checks if re.search(r"\b(and|or)\b", c)]
    bwd = (root / "csrc/causal_conv1d_bwd.cu").read_text()
    assert "if (chunk * kChunkSize + i < params.seqlen)" not in bwd  # silu-bwd-tail, every tag
    assert bwd.count("// mambawin silu-bwd-tail") == 1
    assert_split(work, root, ref)


def assert_split(work: git.Repo, root: Path, ref: str) -> None:
    """split-units for two archs: fwd in 3 translation units, bwd in 9, each listed by setup.py
    after its unit; every one of upstream's 18 instantiations per unit in exactly one of them,
    and every part the patched unit's text (all earlier patches in it) with other lines kept."""
    listed = re.findall(r'^\s*"csrc/(\w+)\.cu",', (root / "setup.py").read_text(), re.M)
    stock = at_ref_text(work, ref)
    for unit, count in (("causal_conv1d_fwd", 3), ("causal_conv1d_bwd", 9)):
        names = [unit, *(f"{unit}_part{k}" for k in range(1, count))]
        start = listed.index(unit)
        assert listed[start : start + count] == names, ref
        found = [_INSTANCE.findall((root / "csrc" / f"{n}.cu").read_text()) for n in names]
        assert sorted(x for lines in found for x in lines) == sorted(
            _INSTANCE.findall(stock[unit])
        ), (ref, unit)
        assert [len(lines) for lines in found] == [18 // count] * count, (ref, unit)
        code = {_code_only(root / "csrc" / f"{n}.cu") for n in names}
        assert len(code) == 1, (ref, unit)
        for name in names:
            assert not _NESTED.search((root / "csrc" / f"{name}.cu").read_text()), name


_INSTANCE = re.compile(r"^template void causal_conv1d\w*_cuda<[^>]+>", re.MULTILINE)


def _code_only(path: Path) -> str:
    lines = path.read_text().splitlines()
    return "\n".join(
        ln for ln in lines if not ln.startswith(("template void", "// mambawin split"))
    )


def at_ref_text(work: git.Repo, ref: str) -> dict[str, str]:
    """Upstream's fwd and bwd units at ref (the work tree itself is patched)."""
    rev = ref if ref != "main" else "origin/main"
    return {
        unit: work.git.show(f"{rev}:csrc/{unit}.cu") + "\n"
        for unit in ("causal_conv1d_fwd", "causal_conv1d_bwd")
    }


def patched_and_configured(root: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """root patched for ARCHS by the CLI, then configured: the extension, exactly the archs'
    gencode and setup.py's NVCC_THREADS, as every causal-conv1d release must give them."""
    result = runner.invoke(app, ["patch", str(root), "--arch", ARCHS])
    assert result.exit_code == 0, result.output
    monkeypatch.setenv("NVCC_THREADS", "3")
    monkeypatch.delenv("CAUSAL_CONV1D_SKIP_CUDA_BUILD", raising=False)
    config = configure(root)
    assert config.ext_name == "causal_conv1d_cuda"
    assert config.gencode == EXPECTED_GENCODE
    assert config.nvcc_flags[config.nvcc_flags.index("--threads") + 1] == "3"
    return config


@pytest.mark.parametrize("ref", [r for r in _refs() if configured(r)])
def test_every_ref_from_v1_4_configures_to_exactly_the_archs(
    work: git.Repo, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("configure runs upstream's setup.py, which imports torch")
    config = patched_and_configured(at(work, ref), monkeypatch)
    assert not [f for f in config.nvcc_flags if f.startswith("-gencode=")]
    assert any(f.startswith("-std=c++") for f in config.cxx_flags)
    assert sum("_part" in source for source in config.sources) == 2 + 8  # split-units


@pytest.mark.parametrize("ref", ["v1.0.0", "v1.4.0", "main"])
def test_drifted_setup_fails_naming_the_patch_and_leaves_the_tree(work: git.Repo, ref: str) -> None:
    root = at(work, ref)
    setup = root / "setup.py"
    setup.write_text(setup.read_text().replace("    # HACK: The compiler flag", "    # note:"))
    before = tree_hashes(root)
    result = runner.invoke(app, ["patch", str(root), "--arch", ARCHS])
    assert result.exit_code == 4
    assert "arch-list" in result.output
    assert tree_hashes(root) == before


@pytest.mark.parametrize("ref", ["v1.2.0", "v1.5.0.post8", "v1.6.0", "v1.6.1.post4"])
def test_exported_patches_git_apply_on_a_clean_checkout(
    work: git.Repo, ref: str, tmp_path: Path
) -> None:
    root = at(work, ref)
    out = tmp_path / "patches"
    result = runner.invoke(
        app, ["patch", str(root), "--arch", ARCHS, "--dry-run", "--export", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["patch", str(root), "--arch", ARCHS]).exit_code == 0
    expected = {k: v for k, v in tree_hashes(root).items() if k != RECORD}
    root = at(work, ref)
    for patch_file in sorted(out.glob("*.patch")):
        proc.run(["git", "apply", str(patch_file)], cwd=root)
    assert tree_hashes(root) == expected


def test_v1_6_0_patched_kernels_match_upstreams_own_msvc_fix(work: git.Repo) -> None:
    """v1.6.0 + alt-tokens/rocm-directives == v1.6.1's PR #93 code, up to mambawin's comments."""
    fixed = {rel: (at(work, "v1.6.1") / rel).read_text() for rel in _KERNELS}
    root = at(work, "v1.6.0")
    result = runner.invoke(
        app, ["patch", str(root), "--only", "alt-tokens", "--only", "rocm-directives"]
    )
    assert result.exit_code == 0, result.output
    for rel in _KERNELS:
        assert _code(root / rel) == _code_text(fixed[rel]), rel


_KERNELS = ("csrc/causal_conv1d.cpp", "csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_bwd.cu")


def _code(path: Path) -> str:
    return _code_text(path.read_text())


def _code_text(text: str) -> str:
    """Tokens without comments or ROCM_ONLY's definition (placed differently, same meaning)."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"#ifndef ROCM_ONLY.*?#endif\s*#endif", "", text, flags=re.DOTALL)
    text = re.sub(r"^\s*#define ROCM_ONLY\(x\).*$", "", text, flags=re.MULTILINE)
    return " ".join(text.split())
