"""The patch record `.mambawin/patches.json` and the result types it is built from.

The record holds no timestamp and no per-run status, so re-running the same patch set on a
patched tree changes no byte; it says which patches are in effect, with the options they baked in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mambawin import __version__
from mambawin.abi import DEFAULT_ABI
from mambawin.archs import format_archs
from mambawin.fetch.upstream import Checkout
from mambawin.packages import MAMBA, Package
from mambawin.patch.arch_groups import FRONT_TABLE
from mambawin.patch.base import Outcome, Patch, PatchOptions, Tree
from mambawin.userfile import parse_json

RECORD = ".mambawin/patches.json"
# What a transform returns (base.Outcome), or "skipped" when the engine never ran it.
PatchStatus = Literal[Outcome, "skipped"]
IN_EFFECT: tuple[PatchStatus, ...] = ("applied", "already-applied")  # the tree holds their edits
# The reason of a patch the user left out (patch --skip, build --skip-patch).
SKIPPED_BY_USER = "named by --skip"


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
    # Each result's diff starts from upstream's files (no patch was in effect before this run, or
    # the run started again from HEAD), so --export can write them as they are.
    from_upstream: bool = True
    package: str = MAMBA.name

    def to_json(self) -> dict[str, Any]:
        """The stable --json shape of `mambawin patch`."""
        return {
            "package": self.package,
            "upstream": {"version": self.version, "commit": self.commit},
            "patches": [
                {"id": r.id, "status": r.status, "files": list(r.files)} for r in self.results
            ],
        }


def record_bytes(
    tree: Tree,
    upstream: Checkout,
    options: PatchOptions,
    results: tuple[PatchResult, ...],
    in_effect: set[str],
    old: Mapping[str, Any],
    package: Package,
    patches: Sequence[Patch] = (),
) -> bytes:
    """The deterministic record: upstream, options, patches in effect, sha256 of their files."""
    files = sorted({f for p in patches if p.id in in_effect for f in p.files})
    record = {
        "tool": f"mambawin {__version__}",
        **({} if package == MAMBA else {"package": package.name}),
        "upstream": {"version": upstream.version, "commit": upstream.commit},
        "options": _record_options(options, results, in_effect, old)
        | _record_front_end(tree, results, in_effect, old),
        "patches": [p.id for p in patches if p.id in in_effect],
        "files": {rel: sha256(tree.render(rel) if tree.exists(rel) else None) for rel in files},
    }
    return (json.dumps(record, indent=2) + "\n").encode("utf-8")


# The option each patch bakes into the tree: a patch kept from an earlier run (this run skipped
# it) keeps the value it was applied with, so the record says what the files hold.
ARCH_LIST = "arch-list"
_OPTION_OF = {ARCH_LIST: "archs", "nvcc-threads": "nvcc_threads"}
FRONT_END = "front_end"  # the proven units' -gencode values (FRONT_TABLE), where any unit is


def _record_options(
    options: PatchOptions,
    results: tuple[PatchResult, ...],
    in_effect: set[str],
    old: Mapping[str, Any],
) -> dict[str, Any]:
    saved = old.get("options", {})
    kept = in_effect - {r.id for r in results if r.status in IN_EFFECT}
    chosen = {
        "archs": format_archs(options.archs),
        "nvcc_threads": options.nvcc_threads,
        "keep_complex": options.keep_complex and "complex-removal" not in in_effect,
    }
    for patch_id in kept & set(_OPTION_OF):
        chosen[_OPTION_OF[patch_id]] = saved.get(_OPTION_OF[patch_id])
    if options.abi != DEFAULT_ABI:  # only then: a torch-ABI record keeps its bytes
        chosen["abi"] = options.abi
    return chosen


def _record_front_end(
    tree: Tree,
    results: tuple[PatchResult, ...],
    in_effect: set[str],
    old: Mapping[str, Any],
) -> dict[str, Any]:
    """The proven units' front-end passes the arch-list patch wrote (FRONT_TABLE), only where a
    unit is proven (a record of one pass per arch keeps its bytes); a block kept from an earlier
    run keeps its."""
    if ARCH_LIST not in in_effect:
        return {}
    if not any(r.id == ARCH_LIST and r.status in IN_EFFECT for r in results):
        saved = old.get("options", {}).get(FRONT_END)
        return {} if saved is None else {FRONT_END: saved}
    data = tree.render(FRONT_TABLE) if tree.exists(FRONT_TABLE) else None
    return {} if data is None else {FRONT_END: json.loads(data)}


def in_effect_ids(results: tuple[PatchResult, ...], old: Mapping[str, Any]) -> set[str]:
    """Patches applied now, plus recorded ones this run skipped (their edits are still there)."""
    ids = {r.id for r in results if r.status in IN_EFFECT}
    skipped = {r.id for r in results if r.status == "skipped"}
    return ids | (set(old.get("patches", ())) & skipped)


def read_record(root: Path) -> dict[str, Any]:
    """The tree's .mambawin/patches.json, or {} when it was never patched."""
    path = Path(root) / RECORD
    if not path.is_file():
        return {}
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sha256(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None
