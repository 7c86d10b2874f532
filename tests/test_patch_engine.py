"""The patch engine: all-or-nothing writes, the deterministic record, gating, diffs and export."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from typer.testing import CliRunner

from mambawin import proc
from mambawin.cli import app
from mambawin.errors import PatchError, UsageError
from mambawin.patch import engine
from mambawin.patch.base import Outcome, Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.engine import RECORD, apply_patches, export_patches, unified_diff

runner = CliRunner()


def make_tree(root: Path, version: str = "2.2.6") -> Path:
    """A tiny mamba-shaped tree: setup.py, __init__ with version, two kernel files."""
    (root / "mamba_ssm").mkdir(parents=True)
    (root / "csrc").mkdir()
    (root / "mamba_ssm" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (root / "setup.py").write_text("import os\n\nTHREADS = 4\n")
    (root / "csrc" / "a.cu").write_bytes(b"// a\nint a = 1;")  # no final newline, like upstream
    (root / "csrc" / "b.h").write_text("#pragma once\nint b = 2;\n")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def replacer(rel: str, old: str, new: str) -> object:
    def transform(tree: Tree, ctx: PatchContext) -> Outcome:
        text = tree.read(rel)
        if new in text:
            return "already-applied"
        if old not in text:
            raise ctx.drift(rel, old)
        tree.write(rel, text.replace(old, new))
        return "applied"
    return transform


def fake_patch(pid: str, rel: str, old: str, new: str, versions: str = ">=1.0") -> Patch:
    return Patch(pid, f"summary {pid}", "an error", SpecifierSet(versions), "issue #1", (rel,),
                 replacer(rel, old, new))  # type: ignore[arg-type]


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> list[Patch]:
    patches = [
        fake_patch("one", "csrc/a.cu", "int a = 1;", "int a = 10;"),
        fake_patch("two", "csrc/b.h", "int b = 2;", "int b = 20;"),
        fake_patch("three", "setup.py", "THREADS = 4", "THREADS = 8"),
        fake_patch("old-only", "setup.py", "import os", "import sys", versions="<2.0"),
    ]
    monkeypatch.setattr(engine, "PATCHES", tuple(patches))
    return patches


def statuses(report: engine.PatchReport) -> dict[str, str]:
    return {r.id: r.status for r in report.results}


def test_later_patch_failing_leaves_earlier_patches_files_untouched(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    (root / "setup.py").write_text("import os\n\nJOBS = 4\n")  # 'three' drifts
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"patch 'three' cannot apply to setup\.py"):
        apply_patches(root, PatchOptions())
    assert snapshot(root) == before  # 'one' and 'two' succeeded in memory only


def test_write_failing_midway_restores_every_original(
        tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path)
    before = snapshot(root)
    calls = {"n": 0}
    real = engine._replace

    def flaky(src: Path, dst: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 5:  # after a.cu and b.h were swapped in
            raise PermissionError(13, "The process cannot access the file (WinError 32)")
        real(src, dst)

    monkeypatch.setattr(engine, "_replace", flaky)
    with pytest.raises(PatchError, match="nothing was changed"):
        apply_patches(root, PatchOptions())
    assert calls["n"] == 5
    assert snapshot(root) == before  # no temp or backup file left either


def test_applies_gates_and_records(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    report = apply_patches(root, PatchOptions())
    assert statuses(report) == {"one": "applied", "two": "applied", "three": "applied",
                                "old-only": "not-applicable"}
    assert (root / "csrc" / "a.cu").read_bytes() == b"// a\nint a = 10;"
    record = json.loads((root / RECORD).read_text())
    assert record["patches"] == ["one", "two", "three"]
    assert record["upstream"] == {"version": "2.2.6", "commit": None}
    digest = hashlib.sha256((root / "setup.py").read_bytes()).hexdigest()
    assert record["files"]["setup.py"] == digest


def test_second_run_changes_no_byte_including_the_record(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    before = snapshot(root)
    report = apply_patches(root, PatchOptions())
    assert set(statuses(report).values()) == {"already-applied", "not-applicable"}
    assert snapshot(root) == before


def test_only_and_skip_mark_patches_skipped(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    report = apply_patches(root, PatchOptions(), only=("one", "two"), skip=("two",))
    assert statuses(report) == {"one": "applied", "two": "skipped", "three": "skipped",
                                "old-only": "skipped"}
    assert (root / "csrc" / "b.h").read_text() == "#pragma once\nint b = 2;\n"


def test_record_keeps_patches_a_later_only_run_did_not_touch(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    apply_patches(root, PatchOptions(), only=("one",))
    assert json.loads((root / RECORD).read_text())["patches"] == ["one", "two", "three"]


def test_skip_reason_from_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path)
    base = fake_patch("cx", "csrc/a.cu", "int a = 1;", "int a = 3;")
    gated = Patch(base.id, base.summary, base.prevents, base.versions, base.why, base.files,
                  base.transform,
                  skip_reason=lambda o: "--keep-complex" if o.keep_complex else None)
    monkeypatch.setattr(engine, "PATCHES", (gated,))
    report = apply_patches(root, PatchOptions(keep_complex=True), dry_run=True)
    assert (report.results[0].status, report.results[0].reason) == ("skipped", "--keep-complex")


def test_unknown_ids_are_a_usage_error(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    with pytest.raises(UsageError, match="unknown patch id nope"):
        apply_patches(root, PatchOptions(), skip=("nope",))


def test_dry_run_writes_nothing_and_returns_the_diff(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    before = snapshot(root)
    report = apply_patches(root, PatchOptions(), dry_run=True)
    assert snapshot(root) == before
    assert "-int a = 1;\n\\ No newline at end of file\n+int a = 10;\n\\ No newline" in report.diff
    assert "+THREADS = 8\n" in report.diff


def test_unified_diff_handles_new_and_deleted_files() -> None:
    assert unified_diff("x", None, b"1\n").startswith("diff --git a/x b/x\nnew file mode")
    assert "+++ /dev/null" in unified_diff("x", b"1\n", None)
    assert unified_diff("x", b"same", b"same") == ""


def git_apply_in_order(patches: list[Path], tree: Path) -> None:
    for path in patches:
        proc.run(["git", "apply", "--verbose", str(path)], cwd=tree)


def test_exported_patches_apply_with_git_apply_in_order(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path / "patched")
    clean = tmp_path / "clean"
    shutil.copytree(root, clean)
    (root / "csrc" / "b.h").write_bytes(b"#pragma once\r\nint b = 2;\r\n")  # CRLF file
    (clean / "csrc" / "b.h").write_bytes(b"#pragma once\r\nint b = 2;\r\n")
    report = apply_patches(root, PatchOptions(), dry_run=False)
    written = export_patches(report, tmp_path / "out")
    assert [p.name for p in written] == ["0001-one.patch", "0002-two.patch", "0003-three.patch"]
    git_apply_in_order(written, clean)
    for rel in ("csrc/a.cu", "csrc/b.h", "setup.py"):
        assert (clean / rel).read_bytes() == (root / rel).read_bytes()


def test_export_from_an_already_patched_tree_is_refused(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    with pytest.raises(UsageError, match="already applied"):
        export_patches(root, tmp_path / "out")


def test_cli_patch_json_shape_and_exit_codes(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    result = runner.invoke(app, ["patch", str(root), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data) == {"package", "upstream", "patches"}
    assert data["package"] == "mamba-ssm"
    assert set(data["upstream"]) == {"version", "commit"}
    assert data["patches"][0] == {"id": "one", "status": "applied", "files": ["csrc/a.cu"]}
    assert all(set(p) == {"id", "status", "files"} for p in data["patches"])
    assert runner.invoke(app, ["patch", str(root), "--only", "bogus"]).exit_code == 2
    assert runner.invoke(app, ["patch", str(tmp_path / "nothing")]).exit_code == 3


def test_cli_drift_exits_4_and_writes_nothing(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    (root / "setup.py").write_text("JOBS = 4\n")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root)])
    assert result.exit_code == 4
    assert "three" in result.output
    assert snapshot(root) == before


def test_cli_dry_run_prints_diff_on_stdout_and_writes_nothing(
        tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path / "src")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root), "--dry-run", "--export", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("diff --git a/csrc/a.cu b/csrc/a.cu\n")
    assert snapshot(root) == before
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == [
        "0001-one.patch", "0002-two.patch", "0003-three.patch"]


def test_cli_patches_lists_the_real_catalogue() -> None:
    result = runner.invoke(app, ["patches", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    ids = [row["id"] for row in rows]
    for required in ("arch-list", "cached-wheels", "nvcc-threads", "compiler-flags",
                     "keep-cuda-build"):
        assert required in ids
    assert all(row["why"] and row["prevents"] and row["versions"] for row in rows)
    assert all(re.match(r"^[<>=!~]", row["versions"]) for row in rows)
