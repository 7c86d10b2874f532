"""ssd-custom-ops on every real mamba-ssm tag from v2.2.3 and main (MAMBAWIN_TEST_UPSTREAM).

Each supported ref's ssd_combined.py takes the block (with main's state_dtype passed on only where
upstream has it), the result still parses, a second run is already-applied, and a drifted file is
refused with exit 4's PatchError before anything is staged. Run:
    MAMBAWIN_TEST_UPSTREAM=<mamba git repo> python -m pytest -m upstream \
        tests/test_patches_ssd_custom_ops.py
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import git
import pytest
from packaging.version import Version

from mambawin.errors import PatchError
from mambawin.fetch.version_rules import release_version
from mambawin.packages import MAMBA
from mambawin.patch import registry
from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.mamba import ssd_custom_ops

pytestmark = pytest.mark.upstream
ENV = "MAMBAWIN_TEST_UPSTREAM"
FILE = ssd_custom_ops.FILE


def _refs() -> list[str]:
    path = os.environ.get(ENV)
    if not path:
        return ["main"]
    tags = [t.name for t in git.Repo(path).tags if release_version(t.name) is not None]
    supported = [t for t in tags if ssd_custom_ops.VERSIONS.contains(release_version(t) or "0")]
    return [*sorted(supported, key=lambda t: release_version(t) or Version("0")), "main"]


def _tree(tmp_path: Path, ref: str) -> Tree:
    mirror = os.environ.get(ENV)
    if not mirror:
        pytest.skip(f"{ENV} is not set (path to a mamba git repo)")
    rev = "origin/main" if ref == "main" else ref
    shown = subprocess.run(
        ["git", "-C", mirror, "show", f"{rev}:{FILE}"], capture_output=True, check=False
    )
    if shown.returncode and ref == "main":
        shown = subprocess.run(["git", "-C", mirror, "show", f"main:{FILE}"], capture_output=True)
    path = tmp_path / FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(shown.stdout)
    return Tree(tmp_path)


def _ctx(ref: str) -> PatchContext:
    version = release_version(ref) or Version("2.3.2")
    return PatchContext(version, PatchOptions(abi="stable"), ssd_custom_ops.ID)


@pytest.mark.parametrize("ref", _refs())
def test_every_supported_ref_takes_the_custom_ops(tmp_path: Path, ref: str) -> None:
    tree = _tree(tmp_path, ref)
    upstream = tree.read(FILE)
    assert ssd_custom_ops.transform(tree, _ctx(ref)) == "applied"
    patched = tree.read(FILE)
    assert patched.startswith(upstream.rstrip("\n"))
    module = ast.parse(patched)
    names = [n.name for n in module.body if isinstance(n, ast.FunctionDef)]
    # The helpers are defined again after upstream's: the autograd Functions call the ops.
    assert names.count(ssd_custom_ops.FWD) == 2
    assert names.count(ssd_custom_ops.BWD) == 2
    takes_state_dtype = "state_dtype=None):" in upstream.split(f"def {ssd_custom_ops.BWD}")[1][:600]
    assert ("state_dtype=state_dtype)" in patched) is takes_state_dtype
    (tmp_path / FILE).write_text(patched)
    assert ssd_custom_ops.transform(Tree(tmp_path), _ctx(ref)) == "already-applied"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("return_vals = (dx, ddt_given, dA,", "return_vals = (dx, ddt_given, dA, None,"),
        ("out_dtype=C.dtype)", "out_dtype=torch.float32)"),
        ("dz=None, recompute_output=False", "dz=None, recompute_output=False, extra=None"),
        ("def _mamba_chunk_scan_combined_fwd(x,", "def _mamba_chunk_scan_combined_fwd(x y,"),
    ],
)
def test_a_drifted_ssd_combined_is_refused_untouched(tmp_path: Path, old: str, new: str) -> None:
    tree = _tree(tmp_path, "v2.3.2.post1")
    text = tree.read(FILE)
    assert old in text
    tree.write(FILE, text.replace(old, new))
    before = tree.render(FILE)
    with pytest.raises(PatchError, match="ssd-custom-ops") as raised:
        ssd_custom_ops.transform(tree, _ctx("v2.3.2.post1"))
    assert raised.value.exit_code == 4
    assert tree.render(FILE) == before


def test_only_stable_builds_take_it() -> None:
    patch = registry.get(ssd_custom_ops.ID, MAMBA)
    assert patch is not None and patch.skip_reason is not None
    assert patch.skip_reason(PatchOptions(abi="torch")) is not None
    assert patch.skip_reason(PatchOptions(abi="stable")) is None
    assert patch.applies_to(Version("2.2.3")) and not patch.applies_to(Version("2.2.2"))
