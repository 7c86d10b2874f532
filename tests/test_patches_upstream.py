"""The whole registry against every real upstream tag and main (needs MAMBAWIN_TEST_UPSTREAM).

One clone per session; each ref is checked out with `git checkout -f` + `git clean -fdx`. Run:
    MAMBAWIN_TEST_UPSTREAM=<mamba git repo> python3 -m pytest -m upstream
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import git
import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.builder.configure import configure
from mambawin.cli import app
from mambawin.fetch.version_rules import release_version
from mambawin.packages import MAMBA
from mambawin.patch.record import RECORD
from mambawin.patch.registry import patch_ids
from tests.upstream_trees import at, clone_mirror, tree_hashes

pytestmark = pytest.mark.upstream
runner = CliRunner()
ARCHS = "86;89"
EXPECTED_GENCODE = ("arch=compute_86,code=sm_86", "arch=compute_89,code=sm_89")


def _refs() -> list[str]:
    """Every release tag plus main, read at collection time; one placeholder when unset."""
    path = os.environ.get("MAMBAWIN_TEST_UPSTREAM")
    if not path:
        return ["main"]
    tags = [t.name for t in git.Repo(path).tags if release_version(t.name) is not None]
    return [*sorted(tags, key=lambda t: release_version(t) or 0), "main"]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> git.Repo:
    """One local clone of the state-spaces/mamba mirror for the whole module."""
    return clone_mirror(
        "MAMBAWIN_TEST_UPSTREAM",
        "state-spaces/mamba",
        tmp_path_factory.mktemp("upstream") / "mamba",
    )


def patched(work: git.Repo, ref: str) -> Path:
    """The work tree at ref after `mambawin patch --arch 86;89`."""
    root = at(work, ref)
    first = runner.invoke(app, ["patch", str(root), "--arch", ARCHS])
    assert first.exit_code == 0, first.output
    return root


@pytest.mark.parametrize("ref", _refs())
def test_every_ref_patches_idempotently(upstream_repo: Path, work: git.Repo, ref: str) -> None:
    root = patched(work, ref)
    patched_tree = tree_hashes(root)
    assert RECORD in patched_tree
    second = runner.invoke(app, ["patch", str(root), "--arch", ARCHS, "--json"])
    assert second.exit_code == 0, second.output
    assert '"status": "applied"' not in second.stdout
    assert tree_hashes(root) == patched_tree
    if "bool-switch" in patch_ids(package=MAMBA):
        users = [
            p
            for p in (root / "csrc").rglob("*")
            if p.is_file()
            and p.name != "static_switch.h"
            and "BOOL_SWITCH(" in p.read_text(errors="replace")
        ]
        assert users == []


@pytest.mark.parametrize("ref", _refs())
def test_every_patched_ref_configures(
    upstream_repo: Path, work: git.Repo, ref: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if importlib.util.find_spec("torch") is None:
        # configure() runs the patched setup.py, whose first lines import torch's cpp_extension.
        pytest.skip("torch is not installed: setup.py imports torch.utils.cpp_extension")
    root = patched(work, ref)
    monkeypatch.setenv("NVCC_THREADS", "3")
    config = configure(root)
    assert config.gencode == EXPECTED_GENCODE
    assert config.nvcc_flags[config.nvcc_flags.index("--threads") + 1] == "3"
    if "complex-removal" in patch_ids(package=MAMBA):
        assert not [s for s in config.sources if s.endswith("_complex.cu")]


@pytest.mark.parametrize("ref", ["v1.0.0", "v2.2.6", "main"])
def test_drifted_setup_fails_naming_the_patch_and_leaves_the_tree(
    upstream_repo: Path, work: git.Repo, ref: str
) -> None:
    root = at(work, ref)
    setup = root / "setup.py"
    setup.write_text(setup.read_text().replace("    # HACK: The compiler flag", "    # note:"))
    before = tree_hashes(root)
    result = runner.invoke(app, ["patch", str(root), "--arch", ARCHS])
    assert result.exit_code == 4
    assert "arch-list" in result.output
    assert tree_hashes(root) == before


@pytest.mark.parametrize("ref", ["v1.0.0", "v2.1.0", "v2.3.2", "main"])
def test_exported_patches_git_apply_on_a_clean_checkout(
    upstream_repo: Path, work: git.Repo, ref: str, tmp_path: Path
) -> None:
    root = at(work, ref)
    out = tmp_path / "patches"
    result = runner.invoke(
        app, ["patch", str(root), "--arch", ARCHS, "--dry-run", "--export", str(out)]
    )
    assert result.exit_code == 0, result.output
    wanted = runner.invoke(app, ["patch", str(root), "--arch", ARCHS])
    assert wanted.exit_code == 0
    expected = {k: v for k, v in tree_hashes(root).items() if k != RECORD}
    root = at(work, ref)
    for patch_file in sorted(out.glob("*.patch")):
        proc.run(["git", "apply", str(patch_file)], cwd=root)
    assert tree_hashes(root) == expected
