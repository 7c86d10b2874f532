"""The patch engine: stage every edit on a Tree, write only when all succeeded, record the result.

A failing patch leaves every file byte-identical (nothing is written before all transforms ran;
the write itself renames files into place and renames the originals back if one rename fails).
The record `.mambawin/patches.json` holds no timestamp and no per-run status, so re-running the
same patch set on a patched tree changes no byte. A run holds `.mambawin/patch.lock` (a second run
on the same tree fails at once), keeps each file's permission bits, and cleans its temp files up on
Ctrl-C too. A run that must undo a patch (--keep-complex on a tree patched without it) starts again
from the files as committed at the checkout's HEAD, or refuses when the tree is not a git checkout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from packaging.version import Version

from mambawin.abi import Abi
from mambawin.archs import parse_archs
from mambawin.errors import MambawinError, PatchError, UsageError
from mambawin.fetch.upstream import Checkout, committed_files, describe
from mambawin.fetch.version_rules import detect_package
from mambawin.packages import MAMBA, Package
from mambawin.patch import registry
from mambawin.patch.base import Patch, PatchContext, PatchOptions, Tree
from mambawin.patch.diff import unified_diff
from mambawin.patch.record import (
    RECORD,
    SKIPPED_BY_USER,
    PatchReport,
    PatchResult,
    PatchStatus,
    in_effect_ids,
    read_record,
    record_bytes,
    sha256,
)
from mambawin.patch.registry import patches_for
from mambawin.store import atomic
from mambawin.store.lock import hold

LOCK = ".mambawin/patch.lock"


def apply_patches(
    root: Path,
    options: PatchOptions,
    *,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    dry_run: bool = False,
    package: Package | None = None,
) -> PatchReport:
    """Apply package's patch set to root, all or nothing; dry_run computes the diff only.

    Without package, the tree's own version file says which package it is (mamba-ssm if none).
    """
    root = Path(root)
    package = resolve_package(root, package)
    check_ids(only, skip, package)
    upstream = describe(root, package)
    if options.abi == "stable":
        registry.check_stable(package, Version(upstream.version))
    lock = nullcontext() if dry_run else hold(root / LOCK, f"source tree {root}", PatchError)
    with lock:
        report, changes = _plan(root, upstream, options, only, skip, dry_run, package)
        if not dry_run:
            write_atomically(root, changes)
    return report


def _plan(
    root: Path,
    upstream: Checkout,
    options: PatchOptions,
    only: Sequence[str],
    skip: Sequence[str],
    dry_run: bool,
    package: Package,
) -> tuple[PatchReport, dict[str, bytes | None]]:
    """The report of this run and every file it changes (the record included)."""
    record = read_record(root)
    rebase = _undoes_a_patch(options, record)
    base: dict[str, bytes | None] = {}
    if rebase:
        options = _with_recorded_options(options, record)
        base = pristine_sources(
            root, upstream.commit, record, _NO_RESTORE.format(root=root), package=package
        )
    tree, results = stage(root, base, Version(upstream.version), options, only, skip, package)
    in_effect = in_effect_ids(results, {} if rebase else record)
    changes = tree.changed()
    diff = "".join(unified_diff(rel, tree.original(rel), new) for rel, new in changes.items())
    written = record_bytes(
        tree, upstream, options, results, in_effect, record, package, patch_set(package)
    )
    if tree.original(RECORD) != written:
        changes[RECORD] = written
    fresh = rebase or in_effect == {r.id for r in results if r.status == "applied"}
    return PatchReport(
        root,
        upstream.version,
        upstream.commit,
        options,
        results,
        diff,
        dry_run,
        from_upstream=fresh,
        package=package.name,
    ), changes


def stage(
    root: Path,
    base: Mapping[str, bytes | None],
    version: Version,
    options: PatchOptions,
    only: Sequence[str],
    skip: Sequence[str],
    package: Package,
) -> tuple[Tree, tuple[PatchResult, ...]]:
    """Run every patch on a staged Tree (nothing written); base's files start from base."""
    tree = Tree(root, base=base)
    for rel in base:  # a rebase resets these even when no patch of this run touches them
        tree.start(rel)
    return tree, tuple(
        _run_one(p, tree, version, options, only, skip, package) for p in patch_set(package)
    )


def patch_set(package: Package) -> tuple[Patch, ...]:
    """The ordered patches of package (registry.PATCH_SETS)."""
    return patches_for(package)


def resolve_package(root: Path, package: Package | None) -> Package:
    """package, checked against the tree; the tree's own package when None (mamba-ssm if unknown).

    A causal-conv1d tree patched with mamba's set would fail on the first anchor with a drift
    message that hides the real mistake, so a mismatch is a usage error naming --package.
    """
    found = detect_package(root)
    if package is None:
        return found or MAMBA
    if found is not None and found != package:
        msg = (
            f"{root} is a {found.name} source tree, not {package.name}: pass "
            f"--package {found.name} (or leave --package out to detect it)"
        )
        raise UsageError(msg)
    return package


# --keep-complex restores what complex-removal deleted: only upstream's own files can.
_NO_RESTORE = (
    "{root} was patched without --keep-complex, so its complex kernels are gone, and it "
    "is not a git checkout they could be restored from: patch a fresh checkout "
    "(`mambawin fetch --dest NEW`) with --keep-complex"
)


def _undoes_a_patch(options: PatchOptions, record: Mapping[str, Any]) -> bool:
    """Whether options turn off a patch the tree holds that cannot be taken back in place
    (complex-removal deletes kernels; the stable patches replace whole files)."""
    held = record.get("patches", ())
    if options.abi != "stable" and any(str(p).startswith("stable-") for p in held):
        return True
    return options.keep_complex and "complex-removal" in held


def pristine_sources(
    root: Path,
    commit: str | None,
    record: Mapping[str, Any],
    not_git: str,
    *,
    package: Package,
    error: type[MambawinError] = PatchError,
) -> dict[str, bytes | None]:
    """Every file a patch may touch, as committed at HEAD; error when the tree is no git
    checkout (not_git says why that matters) or a file changed since mambawin wrote it."""
    if commit is None:
        raise error(not_git)
    files = sorted({f for p in patch_set(package) for f in p.files})
    committed = committed_files(root, files)
    recorded = record.get("files", {})
    for rel in files:
        disk = (root / rel).read_bytes() if (root / rel).is_file() else None
        if disk != committed[rel] and sha256(disk) != recorded.get(rel):
            msg = (
                f"{root / rel} changed since mambawin patched it, and restoring upstream's "
                f"file would lose that: keep your edit elsewhere, run `git -C {root} checkout "
                f"-- {rel}`, then patch again"
            )
            raise error(msg)
    return committed


def _with_recorded_options(options: PatchOptions, record: Mapping[str, Any]) -> PatchOptions:
    """options, with the recorded --arch and --nvcc-threads where this run gave none."""
    saved = recorded_options(record)
    return replace(
        options,
        archs=options.archs or saved.archs,
        nvcc_threads=options.nvcc_threads or saved.nvcc_threads,
    )


def recorded_options(record: Mapping[str, Any]) -> PatchOptions:
    """The PatchOptions a record names."""
    saved = record.get("options", {})
    archs = parse_archs(saved["archs"]) if saved.get("archs") else ()
    abi: Abi = "stable" if saved.get("abi") == "stable" else "torch"
    return PatchOptions(archs, saved.get("nvcc_threads"), bool(saved.get("keep_complex")), abi)


def check_ids(only: Iterable[str], skip: Iterable[str], package: Package) -> None:
    """UsageError naming every id in --only/--skip that is not in the package's catalogue."""
    known = tuple(p.id for p in patch_set(package))
    registry.check_ids((*only, *skip), known, flag="--only/--skip", owner=package.name)


def _run_one(
    patch: Patch,
    tree: Tree,
    version: Version,
    options: PatchOptions,
    only: Sequence[str],
    skip: Sequence[str],
    package: Package,
) -> PatchResult:
    gate = _gate(patch, version, options, only, skip)
    if gate is not None:
        return PatchResult(patch.id, gate[0], reason=gate[1])
    before = {rel: tree.render(rel) for rel in tree.loaded()}
    ctx = PatchContext(version, options, patch.id, package.name)
    try:
        outcome = patch.transform(tree, ctx)
    except FileNotFoundError as exc:
        msg = (
            f"patch {patch.id!r} cannot apply to {package.name} {version}: {exc.args[0]} is "
            f"missing; pass the root of a complete {package.name} checkout or pin --ref to a "
            "known release"
        )
        raise PatchError(msg) from None
    changed = [rel for rel in tree.loaded() if tree.render(rel) != before.get(rel, tree.start(rel))]
    if not changed:
        status: PatchStatus = "not-applicable" if outcome == "not-applicable" else "already-applied"
        owned = tuple(f for f in patch.files if status != "not-applicable" and tree.exists(f))
        return PatchResult(patch.id, status, owned)
    diff = "".join(
        unified_diff(rel, before.get(rel, tree.start(rel)), tree.render(rel)) for rel in changed
    )
    return PatchResult(patch.id, "applied", tuple(changed), diff=diff)


def _gate(
    patch: Patch, version: Version, options: PatchOptions, only: Sequence[str], skip: Sequence[str]
) -> tuple[PatchStatus, str] | None:
    """Why this patch does not run at all, or None when it should."""
    if only and patch.id not in only:
        return "skipped", "not named by --only"
    if patch.id in skip:
        return "skipped", SKIPPED_BY_USER
    if not patch.applies_to(version):
        return "not-applicable", f"upstream {version} is outside {patch.versions}"
    reason = patch.skip_reason(options) if patch.skip_reason else None
    return ("skipped", reason) if reason else None


def write_atomically(root: Path, changes: Mapping[str, bytes | None]) -> None:
    """Write (or delete, for None) every file, or none (mambawin.store.atomic.write_files)."""
    try:
        atomic.write_files(root, changes)
    except OSError as exc:
        msg = f"could not write the patched files under {root} ({exc}); nothing was changed"
        raise PatchError(msg) from None
