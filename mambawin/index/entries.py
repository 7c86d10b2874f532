"""What an index publishes, wheel by wheel: each wheel's entry and the marker that records them.

The marker (`.mambawin-index.json`) says the folder is a mambawin index and what each wheel said
when it was published; a later run trusts an entry only where it still describes the file (same
size and mtime, its METADATA beside it, names that cannot lead out of the folder), else it reads
the wheel itself. A new wheel's entry comes from its Source, read and checked once (inputs.py).
Beside each wheel go its companions: its METADATA (PEP 658) and the verify record naming its
bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mambawin.errors import WheelError
from mambawin.index.inputs import ATTESTATION, VERIFY_SUFFIX, Source, VerifyRecord
from mambawin.index.model import IndexedWheel
from mambawin.index.publish import MARKER, published_wheels
from mambawin.secret_urls import secret_in
from mambawin.userfile import parse_json
from mambawin.wheel.info import open_wheel, read_message, read_text_member, sha256_file
from mambawin.wheel.provenance import Provenance, provenance_in

FILES = "files"  # every wheel once, its companions beside it

# PEP 658: the wheel's METADATA beside it, so pip's resolver reads requirements without
# downloading a wheel of hundreds of megabytes.
METADATA_SUFFIX = ".metadata"


_VARIANT = re.compile(r"^(cu\d{2,3}|rocm[\d.]+|cpu)")
_TORCH = re.compile(r"\d+\.\d+")


def read_entries(files: Path, cached: Mapping[str, Any]) -> list[tuple[IndexedWheel, bytes | None]]:
    """Every wheel in files/, with its METADATA when it was read (to write its PEP 658 file).
    One unchanged since the last run (same size and mtime) is taken from the marker instead of
    being read again (a wheel is hundreds of megabytes)."""
    entries: list[tuple[IndexedWheel, bytes | None]] = []
    for path in published_wheels(files):
        old = cached.get(path.name)
        info = path.stat()
        if (
            isinstance(old, dict)
            and old.get("size") == info.st_size
            and old.get("mtime_ns") == info.st_mtime_ns
            and path.with_name(path.name + METADATA_SUFFIX).is_file()
        ):
            try:
                entries.append((_from_json(old, path), None))
                continue
            except (KeyError, TypeError, ValueError):
                pass  # an entry edited into another shape or meaning: read the wheel itself
        entries.append(_entry(path))
    return entries


def _from_json(data: Mapping[str, Any], path: Path) -> IndexedWheel:
    """The marker's entry as read back, trusted only where it agrees with the file it describes:
    its names become folder names, so an edited `project` or `variant` must not lead out of
    --out (KeyError/TypeError/ValueError: read the wheel itself)."""
    name = parse_wheel_filename(path.name)[0]
    variant = data["variant"]
    if data["file"] != path.name or data["project"] != canonicalize_name(name):
        raise ValueError(path.name)
    if variant is not None and not re.fullmatch(_VARIANT.pattern.lstrip("^") + "$", variant):
        raise ValueError(variant)
    if not isinstance(data["sha256"], str) or not re.fullmatch(r"[0-9a-f]{64}", data["sha256"]):
        raise ValueError(data["sha256"])
    return IndexedWheel(
        file=data["file"],
        project=data["project"],
        version=data["version"],
        tags=tuple(data["tags"]),
        sha256=data["sha256"],
        size=data["size"],
        requires_python=data["requires_python"],
        variant=data["variant"],
        metadata_sha256=data["metadata_sha256"],
        provenance=_provenance(data["provenance"]),
        attestation=_attestation(data.get("attestation")),
    )


def _provenance(value: object) -> Provenance | None:
    """The marker's provenance record, parsed as a wheel's is; an empty one is none."""
    if value is None or value == {}:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(value)  # an edited marker: read the wheel itself
    return Provenance.from_dict(value)


def _attestation(value: object) -> str | None:
    """The marker's attestation address, when it still is one (an edited marker's is dropped)."""
    if not isinstance(value, str) or not ATTESTATION.fullmatch(value):
        return None
    return value if secret_in(value) is None else None  # an edited marker's token: never shown


def _entry(path: Path) -> tuple[IndexedWheel, bytes]:
    """A published wheel read again (the marker did not describe it), with its METADATA."""
    try:
        parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        msg = f"{path.name} is not a valid wheel file name ({exc}): rename or remove it"
        raise WheelError(msg) from None
    with open_wheel(path) as (archive, info):
        raw = read_text_member(path, archive, info.metadata_path)
        provenance = provenance_in(archive, info)
    source = Source(path, sha256_file(path), path.stat().st_size, raw, provenance, None)
    return entry_of(source), raw


def entry_of(source: Source) -> IndexedWheel:
    """What the pages need from a wheel read and checked (name, METADATA, provenance)."""
    name, version, _, tags = parse_wheel_filename(source.path.name)
    requires = read_message(source.metadata).get("Requires-Python")
    return IndexedWheel(
        file=source.path.name,
        project=canonicalize_name(name),
        version=str(version),
        tags=tuple(sorted(str(t) for t in tags)),
        sha256=source.sha256,
        size=source.size,
        requires_python=str(requires).strip() if requires else None,
        variant=_variant(source.provenance, version.local),
        provenance=source.provenance if source.provenance and source.provenance.stored else None,
        metadata_sha256=hashlib.sha256(source.metadata).hexdigest(),
    )


def _variant(provenance: Provenance | None, local: str | None) -> str | None:
    """cu130 from the local label (+cu130torch2.11: torch's variant, which users pick an index
    by), else from the provenance's CUDA version (the nvcc that compiled it)."""
    match = _VARIANT.match(local or "")
    if match:
        return match[1]
    parts = (provenance or Provenance()).cuda_version.split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"cu{parts[0]}{parts[1]}"
    return None


def marker(
    wheels: Iterable[IndexedWheel], torches: Sequence[str], mtimes: Mapping[str, int], title: str
) -> bytes:
    """The marker: this folder is a mambawin index, what each wheel said (see read_entries), and
    the torch minors asked for (--torch, --spec) and the title that later runs keep."""
    entries = {}
    for wheel in wheels:
        data = wheel.to_json()
        del data["verify"], data["verify_ignored"]  # read again each run: a later verify
        data["mtime_ns"] = mtimes[wheel.file]
        entries[wheel.file] = data
    document = {"schema": 1, "title": title, "torches": list(torches), "wheels": entries}
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")


DEFAULT_TITLE = "mambawin wheels"
# No control character (C0, DEL, C1) and no bidi control (U+202E and kin turn the page's title
# around on screen: `\u202eslehw` shows as "whels", a title that says what it is not)
TITLE = re.compile(r"[^\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]{1,200}")


def read_marker(out: Path) -> dict[str, Any]:
    """The marker's wheels and torches; empty when it is missing or unreadable (all re-read)."""
    try:
        data = parse_json((out / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    data = data if isinstance(data, dict) else {}
    wheels = data.get("wheels")
    torches = data.get("torches")
    title = data.get("title")
    return {
        # an edited marker's title is used only when it is one line of text a page can hold
        "title": title if isinstance(title, str) and TITLE.fullmatch(title) else None,
        "wheels": wheels if isinstance(wheels, dict) else {},
        "torches": [t for t in torches if isinstance(t, str) and _TORCH.fullmatch(t)]
        if isinstance(torches, list)
        else [],
    }


def companions(
    entries: Iterable[tuple[IndexedWheel, bytes | None]], records: Mapping[str, VerifyRecord]
) -> Iterator[tuple[str, bytes]]:
    """Each wheel's METADATA file (PEP 658) where it is new, and its verify record where the
    wheelhouse has one that names its bytes (a later verify replaces the one published)."""
    for wheel, raw in entries:
        if raw is not None:
            yield f"{FILES}/{wheel.file}{METADATA_SUFFIX}", raw
        record = records.get(wheel.file)
        if record is not None and record.shown is not None:
            yield f"{FILES}/{wheel.file}{VERIFY_SUFFIX}", record.data
