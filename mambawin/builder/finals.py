"""A key's finished wheels: each rewritten wheel is kept beside the wheel setup.py built, under the
digest of everything the rewrite reads, so an identical rebuild copies it instead of rewriting.

Why: once the objects and setup.py's wheel are reused (kept.py, pipeline._finished), what is left
of an identical rebuild is fixed cost, and the metadata rewrite (inflating and deflating a 20 MB
extension) was the largest part of it: 2.6 s of 8 s on the H100 (docs/benchmarks.md §12). The
rewrite is deterministic in its inputs (the wheel's bytes, the options, the provenance with its
build date, SOURCE_DATE_EPOCH), so the same digest means the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from mambawin.store.atomic import write_file

FINAL_DIR = "final"  # under the slot's dist/: moved to kept/<key>/ and back with it


def rewrite_digest(inputs: Mapping[str, object]) -> str:
    """sha256 of the rewrite's inputs (JSON, keys sorted): the name its output is kept under."""
    payload = json.dumps(inputs, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha256(payload).hexdigest()


def reuse(dist: Path, digest: str, out_dir: Path) -> Path | None:
    """Copy the wheel kept for digest into out_dir and return it; None when none is kept."""
    kept = sorted((dist / FINAL_DIR / digest).glob("*.whl"))
    if len(kept) != 1:
        return None
    target = out_dir / kept[0].name
    shutil.copyfile(kept[0], target)
    return target


def remember(dist: Path, digest: str, wheel: Path) -> None:
    """Keep a copy of the rewritten wheel under digest (written whole, or not at all)."""
    write_file(dist / FINAL_DIR / digest / wheel.name, wheel.read_bytes())
