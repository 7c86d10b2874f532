"""The patch engine: all-or-nothing writes, the deterministic record, gating, diffs and export."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from typer.testing import CliRunner

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.cli import app
from mambawin.errors import FileSystemError, PatchError, UsageError
from mambawin.patch import engine, registry
from mambawin.patch.base import Outcome, Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.diff import unified_diff
from mambawin.patch.engine import apply_patches
from mambawin.patch.export import export_patches
from mambawin.patch.record import RECORD, PatchReport
from mambawin.store import atomic

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
    return Patch(
        pid,
        f"summary {pid}",
        "an error",
        SpecifierSet(versions),
        "issue #1",
        (rel,),
        replacer(rel, old, new),
    )  # type: ignore[arg-type]


@pytest.fixture
def fake_registry(monkeypatch: pytest.MonkeyPatch) -> list[Patch]:
    patches = [
        fake_patch("one", "csrc/a.cu", "int a = 1;", "int a = 10;"),
        fake_patch("two", "csrc/b.h", "int b = 2;", "int b = 20;"),
        fake_patch("three", "setup.py", "THREADS = 4", "THREADS = 8"),
        fake_patch("old-only", "setup.py", "import os", "import sys", versions="<2.0"),
    ]
    monkeypatch.setitem(registry.PATCH_SETS, "mamba-ssm", tuple(patches))
    return patches


def statuses(report: PatchReport) -> dict[str, str]:
    return {r.id: r.status for r in report.results}


def test_later_patch_failing_leaves_earlier_patches_files_untouched(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path)
    (root / "setup.py").write_text("import os\n\nJOBS = 4\n")  # 'three' drifts
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"patch 'three' cannot apply to setup\.py"):
        apply_patches(root, PatchOptions())
    assert snapshot(root) == before  # 'one' and 'two' succeeded in memory only


def test_write_failing_midway_restores_every_original(
    tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path)
    before = snapshot(root)
    calls = {"n": 0}
    real = atomic.replace_file

    def flaky(src: Path, dst: Path) -> None:
        calls["n"] += 1
        if calls["n"] == 5:  # after a.cu and b.h were swapped in
            raise PermissionError(13, "The process cannot access the file (WinError 32)")
        real(src, dst)

    monkeypatch.setattr(atomic, "replace_file", flaky)
    with pytest.raises(PatchError, match="nothing was changed"):
        apply_patches(root, PatchOptions())
    assert calls["n"] == 5
    assert snapshot(root) == before  # no temp or backup file left either


def test_applies_gates_and_records(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    report = apply_patches(root, PatchOptions())
    assert statuses(report) == {
        "one": "applied",
        "two": "applied",
        "three": "applied",
        "old-only": "not-applicable",
    }
    assert (root / "csrc" / "a.cu").read_bytes() == b"// a\nint a = 10;"
    record = json.loads((root / RECORD).read_text())
    assert record["patches"] == ["one", "two", "three"]
    assert record["upstream"] == {"version": "2.2.6", "commit": None}
    digest = hashlib.sha256((root / "setup.py").read_bytes()).hexdigest()
    assert record["files"]["setup.py"] == digest


def test_second_run_changes_no_byte_including_the_record(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    before = snapshot(root)
    report = apply_patches(root, PatchOptions())
    assert set(statuses(report).values()) == {"already-applied", "not-applicable"}
    assert snapshot(root) == before


def test_only_and_skip_mark_patches_skipped(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    report = apply_patches(root, PatchOptions(), only=("one", "two"), skip=("two",))
    assert statuses(report) == {
        "one": "applied",
        "two": "skipped",
        "three": "skipped",
        "old-only": "skipped",
    }
    assert (root / "csrc" / "b.h").read_text() == "#pragma once\nint b = 2;\n"


def test_record_keeps_patches_a_later_only_run_did_not_touch(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    apply_patches(root, PatchOptions(), only=("one",))
    assert json.loads((root / RECORD).read_text())["patches"] == ["one", "two", "three"]


def test_skip_reason_from_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_tree(tmp_path)
    base = fake_patch("cx", "csrc/a.cu", "int a = 1;", "int a = 3;")
    gated = Patch(
        base.id,
        base.summary,
        base.prevents,
        base.versions,
        base.why,
        base.files,
        base.transform,
        skip_reason=lambda o: "--keep-complex" if o.keep_complex else None,
    )
    monkeypatch.setitem(registry.PATCH_SETS, "mamba-ssm", (gated,))
    report = apply_patches(root, PatchOptions(keep_complex=True), dry_run=True)
    assert (report.results[0].status, report.results[0].reason) == ("skipped", "--keep-complex")


def test_unknown_ids_are_a_usage_error(tmp_path: Path) -> None:
    root = make_tree(tmp_path)
    with pytest.raises(UsageError, match="unknown patch id 'nope' for mamba-ssm"):
        apply_patches(root, PatchOptions(), skip=("nope",))


def test_dry_run_writes_nothing_and_returns_the_diff(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
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
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
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


def test_export_from_an_already_patched_plain_copy_says_why_not(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    with pytest.raises(UsageError, match="patched before and is not a git checkout"):
        export_patches(root, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def git_checkout(root: Path) -> Path:
    """root as a git checkout with everything committed (what `mambawin fetch` gives)."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": os.environ["PATH"],
        "HOME": str(root),
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "upstream"]):
        proc.run(["git", *args], cwd=root, env=env)
    return root


def test_export_from_an_already_patched_checkout_replays_the_record(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = git_checkout(make_tree(tmp_path / "src"))
    clean = tmp_path / "clean"
    shutil.copytree(root, clean, ignore=shutil.ignore_patterns(".git"))
    assert runner.invoke(app, ["patch", str(root), "--only", "one,three"]).exit_code == 0
    result = runner.invoke(app, ["patch", str(root), "--export", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    written = sorted((tmp_path / "out").iterdir())
    assert [p.name for p in written] == ["0001-one.patch", "0002-two.patch", "0003-three.patch"]
    git_apply_in_order(written, clean)
    assert snapshot(clean) == {
        k: v for k, v in snapshot(root).items() if not k.startswith((".git", ".mambawin"))
    }


def test_export_never_deletes_patch_files_it_did_not_write(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    out.mkdir()
    (out / "0001-mine.patch").write_text("my own patch\n")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root), "--export", str(out)])
    assert result.exit_code == UsageError.exit_code
    assert "holds 0001-mine.patch, which mambawin did not write" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert snapshot(root) == before  # refused before anything was patched
    assert [p.name for p in out.iterdir()] == ["0001-mine.patch"]


def test_export_replaces_only_its_own_earlier_files(
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    export_patches(apply_patches(root, PatchOptions(), dry_run=True), out)
    (out / "notes.txt").write_text("keep")
    written = export_patches(apply_patches(root, PatchOptions(), only=("two",), dry_run=True), out)
    assert sorted(p.name for p in out.iterdir()) == ["0001-two.patch", "notes.txt"]
    (written[0]).write_text(written[0].read_text() + "edited by hand\n")
    with pytest.raises(UsageError, match=r"0001-two\.patch, which mambawin did not write"):
        export_patches(apply_patches(root, PatchOptions(), dry_run=True), out)


def fail_nth_write_under(folder: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Path.write_bytes fails (disk full) at its n-th call for a file inside folder."""
    real = Path.write_bytes
    calls = {"n": 0}

    def flaky(self: Path, data: bytes) -> int:
        if folder in self.parents:
            calls["n"] += 1
            if calls["n"] == n:
                raise OSError(28, "No space left on device", str(self))
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", flaky)
    return calls


def test_a_failed_export_leaves_the_earlier_set_whole(
    tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path / "src")
    out = tmp_path / "out"
    first = ["patch", str(root), "--dry-run", "--only", "two", "--export", str(out)]
    assert runner.invoke(app, first).exit_code == 0
    before = snapshot(out)
    calls = fail_nth_write_under(out, 2, monkeypatch)
    result = runner.invoke(app, ["patch", str(root), "--dry-run", "--export", str(out)])
    assert calls["n"] == 2
    assert result.exit_code == FileSystemError.exit_code, result.output
    assert "none was written" in result.stderr and len(result.stderr.splitlines()) == 1
    assert snapshot(out) == before  # 0001-two.patch alone, no temp, not 0001-one beside it


def test_a_failed_export_into_a_new_folder_leaves_no_folder(
    tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path / "src")
    report = apply_patches(root, PatchOptions(), dry_run=True)
    fail_nth_write_under(tmp_path / "new", 3, monkeypatch)
    with pytest.raises(FileSystemError, match="No space left on device"):
        export_patches(report, tmp_path / "new" / "out")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("name", ["notes.txt", "notes.txt/sub"])
def test_export_to_a_file_fails_before_anything_is_patched(
    tmp_path: Path, fake_registry: list[Patch], name: str
) -> None:
    root = make_tree(tmp_path / "src")
    (tmp_path / "notes.txt").write_text("mine")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root), "--export", str(tmp_path / name)])
    assert result.exit_code == UsageError.exit_code
    assert "is a file, not a folder" in result.stderr and len(result.stderr.splitlines()) == 1
    assert snapshot(root) == before and not (root / ".mambawin").exists()


# ---- file modes, encodings, concurrent runs, Ctrl-C ----------------------------------------


@pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")
def test_patching_keeps_each_files_mode(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    (root / "csrc" / "a.cu").chmod(0o755)
    (root / "csrc" / "b.h").chmod(0o444)
    apply_patches(root, PatchOptions())
    assert (root / "csrc" / "a.cu").read_bytes() == b"// a\nint a = 10;"
    assert stat.S_IMODE((root / "csrc" / "a.cu").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "csrc" / "b.h").stat().st_mode) == 0o444


def test_a_source_that_is_not_utf8_is_named(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    (root / "csrc" / "b.h").write_bytes(b"#pragma once\n// caf\xe9\nint b = 2;\n")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root)])
    assert result.exit_code == PatchError.exit_code
    assert "csrc/b.h is not UTF-8 text (byte 0xe9 at offset 19)" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert snapshot(root) == before and not (root / ".mambawin").exists()


def test_a_second_run_on_the_same_tree_fails_while_the_first_holds_it(
    tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_tree(tmp_path)
    seen: list[str] = []
    first = fake_registry[0]

    def nested(tree: Tree, ctx: PatchContext) -> Outcome:
        with pytest.raises(PatchError) as caught:  # a second `mambawin patch` on the same tree
            apply_patches(root, PatchOptions())
        seen.append(str(caught.value))
        return first.transform(tree, ctx)

    monkeypatch.setitem(
        registry.PATCH_SETS, "mamba-ssm", (replace(first, transform=nested), *fake_registry[1:])
    )
    apply_patches(root, PatchOptions())
    assert len(seen) == 1 and "is in use by another mambawin run (pid " in seen[0]
    assert not (root / engine.LOCK).exists()  # the first run removed its lock
    assert json.loads((root / RECORD).read_text())["patches"] == ["one", "two", "three"]


def test_a_stale_lock_is_named_with_the_fix(tmp_path: Path, fake_registry: list[Patch]) -> None:
    root = make_tree(tmp_path)
    (root / ".mambawin").mkdir()
    (root / engine.LOCK).write_text("pid 1 on elsewhere\n")
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"\(pid 1 on elsewhere\).*delete .*patch\.lock"):
        apply_patches(root, PatchOptions())
    assert snapshot(root) == before


@pytest.mark.parametrize("where", ["write_staged", "replace_file"])
def test_ctrl_c_while_writing_leaves_every_file_and_no_temp_file(
    tmp_path: Path, fake_registry: list[Patch], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    root = make_tree(tmp_path)
    before = snapshot(root)
    real = getattr(atomic, where)
    calls = {"n": 0}

    def interrupted(*args: Path | bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(atomic, where, interrupted)
    with pytest.raises(KeyboardInterrupt):
        apply_patches(root, PatchOptions())
    assert snapshot(root) == before  # no .mambawin-new/-old file, no lock, no record
    assert not (root / ".mambawin").exists()


# ---- --keep-complex on a tree patched without it ------------------------------------------


@pytest.fixture
def gated_registry(monkeypatch: pytest.MonkeyPatch) -> tuple[Patch, ...]:
    """complex-removal (off with --keep-complex) and arch-list (off without --arch) stand-ins."""
    arch = replace(
        fake_patch("arch-list", "setup.py", "THREADS = 4", "THREADS = 86"),
        skip_reason=lambda o: None if o.archs else "no --arch",
    )
    complex_ = replace(
        fake_patch("complex-removal", "csrc/a.cu", "int a = 1;", "int a = 0;"),
        skip_reason=lambda o: "--keep-complex" if o.keep_complex else None,
    )
    patches = (arch, complex_)
    monkeypatch.setitem(registry.PATCH_SETS, "mamba-ssm", patches)
    return patches


def test_keep_complex_restores_what_an_earlier_run_removed(
    tmp_path: Path, gated_registry: tuple[Patch, ...]
) -> None:
    root = git_checkout(make_tree(tmp_path))
    apply_patches(root, PatchOptions(archs=parse_archs("86")))
    assert (root / "csrc" / "a.cu").read_bytes() == b"// a\nint a = 0;"
    report = apply_patches(root, PatchOptions(keep_complex=True))
    assert (root / "csrc" / "a.cu").read_bytes() == b"// a\nint a = 1;"  # upstream's again
    assert "THREADS = 86" in (root / "setup.py").read_text()  # the recorded --arch stays
    record = json.loads((root / RECORD).read_text())
    assert record["patches"] == ["arch-list"]
    assert record["options"] == {"archs": "86", "nvcc_threads": None, "keep_complex": True}
    assert {r.id: r.status for r in report.results}["complex-removal"] == "skipped"


def test_keep_complex_on_a_patched_plain_copy_is_refused(
    tmp_path: Path, gated_registry: tuple[Patch, ...]
) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions())
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root), "--keep-complex"])
    assert result.exit_code == PatchError.exit_code
    assert "was patched without --keep-complex" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and snapshot(root) == before


def test_keep_complex_refuses_to_drop_a_hand_edit(
    tmp_path: Path, gated_registry: tuple[Patch, ...]
) -> None:
    root = git_checkout(make_tree(tmp_path))
    apply_patches(root, PatchOptions())
    (root / "csrc" / "a.cu").write_bytes(b"// a\nint a = 0; // mine")
    before = snapshot(root)
    with pytest.raises(PatchError, match=r"csrc/a\.cu changed since mambawin patched it"):
        apply_patches(root, PatchOptions(keep_complex=True))
    assert snapshot(root) == before


def test_the_record_keeps_the_arch_a_skipped_arch_list_left_in_the_tree(
    tmp_path: Path, gated_registry: tuple[Patch, ...]
) -> None:
    root = make_tree(tmp_path)
    apply_patches(root, PatchOptions(archs=parse_archs("86")))
    apply_patches(root, PatchOptions())  # no --arch: arch-list is skipped, its edit stays
    assert "THREADS = 86" in (root / "setup.py").read_text()
    assert json.loads((root / RECORD).read_text())["options"]["archs"] == "86"


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
    tmp_path: Path, fake_registry: list[Patch]
) -> None:
    root = make_tree(tmp_path / "src")
    before = snapshot(root)
    result = runner.invoke(app, ["patch", str(root), "--dry-run", "--export", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("diff --git a/csrc/a.cu b/csrc/a.cu\n")
    assert snapshot(root) == before
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == [
        "0001-one.patch",
        "0002-two.patch",
        "0003-three.patch",
    ]


def test_cli_patches_lists_the_real_catalogue() -> None:
    result = runner.invoke(app, ["patches", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    ids = [row["id"] for row in rows]
    for required in (
        "arch-list",
        "cached-wheels",
        "nvcc-threads",
        "compiler-flags",
        "keep-cuda-build",
    ):
        assert required in ids
    assert all(row["why"] and row["prevents"] and row["versions"] for row in rows)
    assert all(re.match(r"^[<>=!~]", row["versions"]) for row in rows)
