"""Undoing and exporting patches on an already-patched real checkout (needs MAMBAWIN_TEST_UPSTREAM).

`--keep-complex` on a tree patched without it restores upstream's complex kernels from HEAD, and
`--export` on an already-patched tree replays the recorded patches; both must give exactly what a
clean checkout gives.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin import proc
from mambawin.cli import app
from mambawin.patch.record import RECORD
from tests.upstream_trees import tree_hashes

pytestmark = pytest.mark.upstream
runner = CliRunner()
REFS = ["v2.2.6", "main"]


@pytest.fixture(scope="module")
def mirror() -> Path:
    source = os.environ.get("MAMBAWIN_TEST_UPSTREAM")
    if not source:
        pytest.skip("MAMBAWIN_TEST_UPSTREAM is not set (path to a state-spaces/mamba git repo)")
    return Path(source)


def checkout(mirror: Path, ref: str, dest: Path) -> Path:
    target = ref if ref != "main" else "origin/main"
    proc.run(["git", "clone", "--quiet", "--no-checkout", str(mirror), str(dest)])
    proc.run(["git", "-C", str(dest), "checkout", "--quiet", "--detach", target])
    return dest


@pytest.mark.parametrize("ref", REFS)
def test_keep_complex_after_a_plain_patch_equals_a_fresh_keep_complex_patch(
    mirror: Path, ref: str, tmp_path: Path
) -> None:
    fresh = checkout(mirror, ref, tmp_path / "fresh")
    kept = runner.invoke(app, ["patch", str(fresh), "--arch", "86", "--keep-complex"])
    assert kept.exit_code == 0, kept.output
    root = checkout(mirror, ref, tmp_path / "root")
    assert runner.invoke(app, ["patch", str(root), "--arch", "86"]).exit_code == 0
    again = runner.invoke(app, ["patch", str(root), "--keep-complex", "--json"])
    assert again.exit_code == 0, again.output
    assert tree_hashes(root) == tree_hashes(fresh)
    record = json.loads((root / RECORD).read_text())
    assert "complex-removal" not in record["patches"] and record["options"]["keep_complex"]


@pytest.mark.parametrize("ref", REFS)
def test_export_from_an_already_patched_checkout_applies_to_a_clean_one(
    mirror: Path, ref: str, tmp_path: Path
) -> None:
    root = checkout(mirror, ref, tmp_path / "root")
    assert runner.invoke(app, ["patch", str(root), "--arch", "86;89"]).exit_code == 0
    out = tmp_path / "patches"
    result = runner.invoke(app, ["patch", str(root), "--export", str(out)])
    assert result.exit_code == 0, result.output
    clean = checkout(mirror, ref, tmp_path / "clean")
    for patch_file in sorted(out.glob("*.patch")):
        proc.run(["git", "apply", str(patch_file)], cwd=clean)
    expected = {k: v for k, v in tree_hashes(root).items() if k != RECORD}
    assert tree_hashes(clean) == expected
