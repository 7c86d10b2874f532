"""The patch engine: stage every edit on a Tree, write only when all succeeded, record the result.

A failing patch leaves every file byte-identical (nothing is written before all transforms ran;
the write itself renames files into place and renames the originals back if one rename fails).
The record `.mambawin/patches.json` holds no timestamp and no per-run status, so re-running the
same patch set on a patched tree changes no byte.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.version import Version

from mambawin import __version__
from mambawin.archs import format_archs, parse_archs
from mambawin.errors import PatchError, UsageError
from mambawin.fetch.upstream import describe
from mambawin.patch.base import Outcome, Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.registry import PATCHES, patch_ids

RECORD = ".mambawin/patches.json"
# What a transform returns (base.Outcome), or "skipped" when the engine never ran it.
PatchStatus = Literal[Outcome, "skipped"]
IN_EFFECT: tuple[PatchStatus, ...] = ("applied", "already-applied")  # the tree holds their edits


@dataclass(frozen=True)
class PatchResult:
    """What one patch did: its status, the files it changed (or owns, if already applied)."""

    id: str
    status: PatchStatus
    files: tuple[str, ...] = ()
    reason: str = ""  # why skipped / not-applicable
    diff: str = ""  # this patch's own git-style diff, relative to the tree before it ran


@dataclass(frozen=True)
class PatchReport:
    """The outcome of apply_patches over one source tree."""

    root: Path
    version: str
    commit: str | None
    options: PatchOptions
    results: tuple[PatchResult, ...]
    diff: str  # every change against the files on disk before the run
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """The stable --json shape of `mambawin patch`."""
        return {
            "upstream": {"version": self.version, "commit": self.commit},
            "patches": [{"id": r.id, "status": r.status, "files": list(r.files)}
                        for r in self.results],
        }


def apply_patches(root: Path, options: PatchOptions, *, only: Sequence[str] = (),
                  skip: Sequence[str] = (), dry_run: bool = False) -> PatchReport:
    """Apply the registry's patches to root, all or nothing; dry_run computes the diff only."""
    check_ids(only, skip)
    root = Path(root)
    upstream = describe(root)
    version = Version(upstream.version)
    tree = Tree(root)
    results = tuple(_run_one(p, tree, version, options, only, skip) for p in PATCHES)
    changes = tree.changed()
    diff = "".join(unified_diff(rel, tree.original(rel), new) for rel, new in changes.items())
    record = _record_bytes(tree, upstream.version, upstream.commit, options, results)
    if tree.original(RECORD) != record:
        changes[RECORD] = record
    if not dry_run:
        write_atomically(root, changes)
    return PatchReport(root, upstream.version, upstream.commit, options, results, diff, dry_run)


def check_ids(only: Iterable[str], skip: Iterable[str]) -> None:
    """UsageError naming every id in --only/--skip that is not in the catalogue."""
    unknown = sorted((set(only) | set(skip)) - set(patch_ids()))
    if unknown:
        msg = (f"unknown patch id {', '.join(unknown)} in --only/--skip: use one of "
               f"{', '.join(patch_ids())} (see `mambawin patches`)")
        raise UsageError(msg)


def _run_one(patch: Patch, tree: Tree, version: Version, options: PatchOptions,
             only: Sequence[str], skip: Sequence[str]) -> PatchResult:
    gate = _gate(patch, version, options, only, skip)
    if gate is not None:
        return PatchResult(patch.id, gate[0], reason=gate[1])
    before = {rel: tree.render(rel) for rel in tree.loaded()}
    ctx = PatchContext(version, options, patch.id)
    try:
        outcome = patch.transform(tree, ctx)
    except FileNotFoundError as exc:
        msg = (f"patch {patch.id!r} cannot apply to upstream {version}: {exc.args[0]} is missing; "
               "pass the root of a complete mamba checkout or pin --ref to a known release")
        raise PatchError(msg) from None
    changed = [rel for rel in tree.loaded()
               if tree.render(rel) != before.get(rel, tree.original(rel))]
    if not changed:
        status: PatchStatus = "not-applicable" if outcome == "not-applicable" else "already-applied"
        owned = tuple(f for f in patch.files if status != "not-applicable" and tree.exists(f))
        return PatchResult(patch.id, status, owned)
    diff = "".join(unified_diff(rel, before.get(rel, tree.original(rel)), tree.render(rel))
                   for rel in changed)
    return PatchResult(patch.id, "applied", tuple(changed), diff=diff)


def _gate(patch: Patch, version: Version, options: PatchOptions, only: Sequence[str],
          skip: Sequence[str]) -> tuple[PatchStatus, str] | None:
    """Why this patch does not run at all, or None when it should."""
    if only and patch.id not in only:
        return "skipped", "not named by --only"
    if patch.id in skip:
        return "skipped", "named by --skip"
    if not patch.applies_to(version):
        return "not-applicable", f"upstream {version} is outside {patch.versions}"
    reason = patch.skip_reason(options) if patch.skip_reason else None
    return ("skipped", reason) if reason else None


def _record_bytes(tree: Tree, version: str, commit: str | None, options: PatchOptions,
                  results: tuple[PatchResult, ...]) -> bytes:
    """The deterministic record: upstream, options, patches in effect, sha256 of their files."""
    in_effect = _in_effect(tree.root, results)
    files = sorted({f for p in PATCHES if p.id in in_effect for f in p.files})
    record = {
        "tool": f"mambawin {__version__}",
        "upstream": {"version": version, "commit": commit},
        "options": {"archs": format_archs(options.archs), "nvcc_threads": options.nvcc_threads,
                    "keep_complex": options.keep_complex},
        "patches": [p.id for p in PATCHES if p.id in in_effect],
        "files": {rel: _sha256(tree.render(rel) if tree.exists(rel) else None) for rel in files},
    }
    return (json.dumps(record, indent=2) + "\n").encode("utf-8")


def _in_effect(root: Path, results: tuple[PatchResult, ...]) -> set[str]:
    """Patches applied now, plus recorded ones this run skipped (their edits are still there)."""
    ids = {r.id for r in results if r.status in IN_EFFECT}
    skipped = {r.id for r in results if r.status == "skipped"}
    return ids | (set(read_record(root).get("patches", ())) & skipped)


def read_record(root: Path) -> dict[str, Any]:
    """The tree's .mambawin/patches.json, or {} when it was never patched."""
    path = Path(root) / RECORD
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _sha256(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


def unified_diff(rel: str, old: bytes | None, new: bytes | None) -> str:
    """A git-style diff of one file that `git apply` accepts (keeps 'No newline at end of file')."""
    if old == new:
        return ""
    head = [f"diff --git a/{rel} b/{rel}\n"]
    if old is None:
        head.append("new file mode 100644\n")
    elif new is None:
        head.append("deleted file mode 100644\n")
    before = "/dev/null" if old is None else f"a/{rel}"
    after = "/dev/null" if new is None else f"b/{rel}"
    out = head
    body = difflib.unified_diff(_lines(old), _lines(new), before, after)
    for line in body:
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


def _lines(data: bytes | None) -> list[str]:
    return data.decode("utf-8").splitlines(keepends=True) if data else []


def write_atomically(root: Path, changes: Mapping[str, bytes | None]) -> None:
    """Write (or delete, for None) every file, or none: a failing rename undoes the earlier ones."""
    staged = _stage(root, changes)
    moved: list[tuple[Path, Path | None]] = []  # (target, its backup or None if it is new)
    try:
        for rel, tmp in staged:
            target = root / rel
            backup = target.with_name(f".{target.name}.mambawin-old") if target.exists() else None
            if backup is not None:
                _replace(target, backup)
            moved.append((target, backup))
            if tmp is not None:
                _replace(tmp, target)
    except OSError as exc:
        _undo(moved)
        _discard(tmp for _, tmp in staged)
        msg = f"could not write the patched files under {root} ({exc}); nothing was changed"
        raise PatchError(msg) from None
    _discard(backup for _, backup in moved)


def _stage(root: Path, changes: Mapping[str, bytes | None]) -> list[tuple[str, Path | None]]:
    """Phase 1: every new content in a temp file next to its target (same volume for renames)."""
    staged: list[tuple[str, Path | None]] = []
    try:
        for rel, data in changes.items():
            if data is None:
                staged.append((rel, None))
                continue
            target = root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.mambawin-new")
            tmp.write_bytes(data)
            staged.append((rel, tmp))
    except OSError as exc:
        _discard(tmp for _, tmp in staged)
        raise PatchError(f"could not write under {root} ({exc}); nothing was changed") from None
    return staged


def _undo(moved: list[tuple[Path, Path | None]]) -> None:
    for target, backup in reversed(moved):
        target.unlink(missing_ok=True)
        if backup is not None:
            os.replace(backup, target)


def _discard(paths: Iterable[Path | None]) -> None:
    for path in paths:
        if path is not None:
            path.unlink(missing_ok=True)


def _replace(src: Path, dst: Path) -> None:
    """os.replace, kept in one place so a test can make the n-th rename fail."""
    os.replace(src, dst)


def export_patches(report_or_root: PatchReport | Path, dest: Path) -> list[Path]:
    """Write one NNNN-<id>.patch per patch that changed files; `git apply` takes them in order."""
    report = (report_or_root if isinstance(report_or_root, PatchReport)
              else _dry_run_for_export(Path(report_or_root)))
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for stale in dest.glob("[0-9][0-9][0-9][0-9]-*.patch"):
        stale.unlink()
    written: list[Path] = []
    for result in (r for r in report.results if r.diff):
        path = dest / f"{len(written) + 1:04d}-{result.id}.patch"
        path.write_bytes((_patch_header(result.id, report) + result.diff).encode("utf-8"))
        written.append(path)
    return written


def _dry_run_for_export(root: Path) -> PatchReport:
    """The diffs a clean tree would get, with the options its record names (if any)."""
    record = read_record(root)
    saved = record.get("options", {})
    archs = parse_archs(saved["archs"]) if saved.get("archs") else ()
    options = PatchOptions(archs, saved.get("nvcc_threads"), bool(saved.get("keep_complex")))
    report = apply_patches(root, options, dry_run=True)
    if not any(r.diff for r in report.results):
        msg = (f"nothing to export from {root}: every patch is already applied; export from a "
               "clean checkout (`mambawin patch SRC --dry-run --export DIR`)")
        raise UsageError(msg)
    return report


def _patch_header(patch_id: str, report: PatchReport) -> str:
    """Free text before the first `diff --git` line; git apply skips it like a mail header."""
    patch = next(p for p in PATCHES if p.id == patch_id)
    lines = [f"mambawin patch {patch.id} for mamba {report.version}: {patch.summary}",
             f"Prevents: {patch.prevents}", f"Why: {patch.why}",
             f"Options: archs={format_archs(report.options.archs) or 'upstream'}, "
             f"nvcc_threads={report.options.nvcc_threads}, "
             f"keep_complex={report.options.keep_complex}", "", ""]
    return "\n".join(lines)
