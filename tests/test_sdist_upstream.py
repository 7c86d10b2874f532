"""Real causal-conv1d sdists: they patch (both ABIs) and configure like the git tags do, and an
sdist patches to the same tree as the matching git tag.

- MAMBAWIN_TEST_CAUSAL_CONV1D_SDIST_DIR: a folder of real sdists (`causal_conv1d-*.tar.gz`, as
  `mambawin fetch --source-from index` caches them, or those archives extracted); each is
  patched for both ABIs, idempotently, and (with torch importable) configured to the archs.
- MAMBAWIN_TEST_CAUSAL_CONV1D (a git repo of Dao-AILab/causal-conv1d) plus the package index:
  each release that is both a tag and an sdist is fetched both ways, patched, and compared.
Run:
    MAMBAWIN_TEST_CAUSAL_CONV1D_SDIST_DIR=<dir> <python with torch> -m pytest -m upstream \
        tests/test_sdist_upstream.py
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import git
import pytest
from packaging.version import Version
from test_patches_causal_conv1d_upstream import patched_and_configured
from typer.testing import CliRunner
from upstream_trees import at, clone_mirror, tree_hashes

from mambawin.cli import app
from mambawin.fetch import origin, sdist
from mambawin.fetch.version_rules import read_file_version
from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.record import RECORD

pytestmark = pytest.mark.upstream
runner = CliRunner()
SDIST_DIR = "MAMBAWIN_TEST_CAUSAL_CONV1D_SDIST_DIR"
ARCHS = "86;89"
EXPECTED_GENCODE = ("arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")
# What an sdist holds that a git checkout does not (setuptools writes them), and the record
# that names the commit (an sdist has none).
SDIST_ONLY = re.compile(r"^(PKG-INFO|setup\.cfg|[^/]+\.egg-info/.*)$")


def _sdists() -> list[str]:
    """The sdists (archives or extracted folders) in SDIST_DIR, one placeholder when unset."""
    folder = os.environ.get(SDIST_DIR)
    if not folder:
        return ["unset"]
    names = sorted(
        p.name
        for p in Path(folder).iterdir()
        if p.name.startswith("causal_conv1d-") and (p.is_dir() or p.name.endswith(".tar.gz"))
    )
    return names or ["empty"]


def _tree(name: str, tmp_path: Path) -> Path:
    """A fresh copy of the named sdist's tree (extracted as mambawin extracts it)."""
    folder = os.environ.get(SDIST_DIR)
    if not folder or name in ("unset", "empty"):
        pytest.skip(f"{SDIST_DIR} is not set, or holds no causal_conv1d-* sdist")
    source = Path(folder) / name
    target = tmp_path / "tree"
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        sdist.extract(source, target)
    return target


@pytest.mark.parametrize("name", _sdists())
@pytest.mark.parametrize("abi", ["torch", "stable"])
def test_a_real_sdist_patches_idempotently(name: str, abi: str, tmp_path: Path) -> None:
    root = _tree(name, tmp_path)
    version = Version(read_file_version(root, CAUSAL_CONV1D))
    if abi == "stable" and not CAUSAL_CONV1D.stable_versions.contains(version):
        pytest.skip(f"{version} has no stable-ABI port")
    args = ["patch", str(root), "--arch", ARCHS, "--package", "causal-conv1d", "--abi", abi]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    patched = tree_hashes(root)
    assert RECORD in patched
    second = runner.invoke(app, [*args, "--json"])
    assert second.exit_code == 0, second.output
    assert '"status": "applied"' not in second.stdout
    assert tree_hashes(root) == patched
    setup = (root / "setup.py").read_text()
    assert "causal_conv1d_bwd_part8.cu" in setup  # split-units: bwd in 9 for two archs


@pytest.mark.parametrize("name", _sdists())
def test_a_real_sdist_configures_to_exactly_the_archs(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _tree(name, tmp_path)
    if importlib.util.find_spec("torch") is None:
        pytest.skip("configure runs upstream's setup.py, which imports torch")
    config = patched_and_configured(root, monkeypatch)
    assert sum("_part" in source for source in config.sources) == 8  # split-units: bwd in 9


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> git.Repo:
    return clone_mirror(
        "MAMBAWIN_TEST_CAUSAL_CONV1D",
        "Dao-AILab/causal-conv1d",
        tmp_path_factory.mktemp("upstream") / "causal-conv1d",
    )


@pytest.mark.network
@pytest.mark.parametrize("abi", ["torch", "stable"])
def test_an_sdist_and_its_git_tag_patch_to_the_same_tree(
    work: git.Repo, abi: str, tmp_path: Path
) -> None:
    """Every release that is both a git tag and an sdist on the index (from the stable port's
    first release for --abi stable): the patched trees hold the same bytes in every file both
    have (the sdist adds setuptools' PKG-INFO, setup.cfg and .egg-info; the record names the
    commit)."""
    tags = {t.name for t in work.tags}
    try:
        files, _ = sdist.releases(CAUSAL_CONV1D)
    except Exception as exc:
        pytest.skip(f"the package index did not answer: {exc}")
    shared = [f for f in files if f"v{f.version}" in tags]
    if abi == "stable":
        shared = [f for f in shared if CAUSAL_CONV1D.stable_versions.contains(f.version)]
    assert shared, "no release is both a git tag and an sdist"
    for found in shared:
        ref = f"v{found.version}"
        from_index = origin.from_index(ref, tmp_path / ref / "sdist", package=CAUSAL_CONV1D)
        from_git = tmp_path / ref / "git"
        shutil.copytree(at(work, ref), from_git, ignore=shutil.ignore_patterns(".git"))
        for root in (from_index.path, from_git):
            args = ["patch", str(root), "--arch", ARCHS, "--package", "causal-conv1d"]
            result = runner.invoke(app, [*args, "--abi", abi])
            assert result.exit_code == 0, (ref, result.output)
        sdist_files = tree_hashes(from_index.path)
        git_files = tree_hashes(from_git)
        both = (set(sdist_files) & set(git_files)) - {RECORD}
        assert {"setup.py", "csrc/causal_conv1d.cpp", "csrc/causal_conv1d_bwd_part1.cu"} <= both
        differ = sorted(rel for rel in both if sdist_files[rel] != git_files[rel])
        assert differ == [], (ref, differ)
        only_sdist = [r for r in set(sdist_files) - set(git_files) if not SDIST_ONLY.match(r)]
        assert only_sdist == [], (ref, only_sdist)
