"""`patch --export DIR`: one NNNN-<id>.patch per patch, in apply order, for `git apply`.

mambawin deletes only export files it wrote itself and that nobody changed since: each one carries
a checksum line over its own body. A folder holding any other NNNN-*.patch is refused before
anything is patched (a stale or foreign patch would be applied along with ours by `git apply
DIR/*.patch`). A tree patched by an earlier run has no diffs left in this run's report; its
recorded patches are replayed on the files as committed at HEAD instead, and checked to give
exactly the files on disk.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from packaging.version import Version

from mambawin.archs import format_archs
from mambawin.errors import UsageError, os_error
from mambawin.fetch.upstream import describe
from mambawin.packages import MAMBA, get_package
from mambawin.patch import engine
from mambawin.patch.base import PatchOptions
from mambawin.patch.engine import apply_patches, pristine_sources, recorded_options, stage
from mambawin.patch.record import PatchReport, PatchResult, read_record
from mambawin.store.atomic import write_files

_NAME = "[0-9][0-9][0-9][0-9]-*.patch"
_CHECKSUM = re.compile(rb"^mambawin-checksum: sha256=([0-9a-f]{64})\n", re.MULTILINE)


def check_export_dest(dest: Path) -> None:
    """UsageError unless dest is (or can become) a folder with no NNNN-*.patch mambawin did not
    write; called before anything is patched."""
    existing = next((p for p in (dest, *dest.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        msg = f"--export {dest}: {existing} is a file, not a folder: pass a folder for the patches"
        raise UsageError(msg)
    foreign = sorted(p.name for p in dest.glob(_NAME) if not _ours(p)) if dest.is_dir() else []
    if foreign:
        msg = (
            f"--export {dest} holds {foreign[0]}, which mambawin did not write (or which was "
            "edited since): export into an empty folder, or move those files away"
        )
        raise UsageError(msg)


def export_patches(report_or_root: PatchReport | Path, dest: Path) -> list[Path]:
    """Write one NNNN-<id>.patch per patch in effect; `git apply` takes them in order."""
    dest = Path(dest)
    check_export_dest(dest)
    report = (
        report_or_root
        if isinstance(report_or_root, PatchReport)
        else _report_for(Path(report_or_root))
    )
    results, options = (
        (report.results, report.options) if report.from_upstream else _replayed(report.root)
    )
    if not any(r.diff for r in results):
        msg = f"nothing to export from {report.root}: no patch changes its files"
        raise UsageError(msg)
    changes: dict[str, bytes | None] = {p.name: None for p in dest.glob(_NAME)}  # all ours
    written: list[Path] = []
    for result in (r for r in results if r.diff):
        path = dest / f"{len(written) + 1:04d}-{result.id}.patch"
        header = _patch_header(result.id, report.version, options, report.package)
        changes[path.name] = _with_checksum(header, result.diff)
        written.append(path)
    try:  # the whole set or none: `git apply DIR/*.patch` must never see half of one
        write_files(dest, changes)
    except OSError as exc:
        raise os_error(exc, "export the patches (none was written):") from None
    return written


def _report_for(root: Path) -> PatchReport:
    """What patching root with its recorded options (if any) would do; nothing is written."""
    return apply_patches(root, recorded_options(read_record(root)), dry_run=True)


def _replayed(root: Path) -> tuple[tuple[PatchResult, ...], PatchOptions]:
    """The recorded patches, with the recorded options, replayed on HEAD's files."""
    record = read_record(root)
    package = engine.resolve_package(root, None)
    upstream = describe(root, package)
    not_git = (
        f"cannot export the patches of {root}: it was patched before and is not a git "
        "checkout, so its unpatched files are gone; export from a clean copy "
        "(`mambawin patch CLEAN --dry-run --export DIR`)"
    )
    base = pristine_sources(
        root, upstream.commit, record, not_git, package=package, error=UsageError
    )
    options = recorded_options(record)
    tree, results = stage(
        root,
        base,
        Version(upstream.version),
        options,
        tuple(record.get("patches", ())),
        (),
        package,
    )
    differs = sorted(tree.changed())
    if differs:
        msg = (
            f"cannot export the patches of {root}: {differs[0]} is not what its recorded "
            "patches make of upstream's file; patch a fresh checkout and export from it"
        )
        raise UsageError(msg)
    return results, options


def _ours(path: Path) -> bool:
    """Whether path is an export file mambawin wrote and nobody changed since."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    found = _CHECKSUM.search(data)
    return found is not None and hashlib.sha256(data[found.end() :]).hexdigest() == found[1].decode(
        "ascii"
    )


def _with_checksum(header: str, diff: str) -> bytes:
    body = (header + diff).encode("utf-8")
    line = f"mambawin-checksum: sha256={hashlib.sha256(body).hexdigest()}\n".encode("ascii")
    return line + body


def _patch_header(patch_id: str, version: str, options: PatchOptions, package: str) -> str:
    """Free text before the first `diff --git` line; git apply skips it like a mail header."""
    patch = next(p for p in engine.patch_set(get_package(package)) if p.id == patch_id)
    name = "mamba" if package == MAMBA.name else package
    lines = [
        f"mambawin patch {patch.id} for {name} {version}: {patch.summary}",
        f"Prevents: {patch.prevents}",
        f"Why: {patch.why}",
        f"Options: archs={format_archs(options.archs) or 'upstream'}, "
        f"nvcc_threads={options.nvcc_threads}, keep_complex={options.keep_complex}",
        "",
        "",
    ]
    return "\n".join(lines)
