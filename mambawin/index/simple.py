"""A static package index of a wheelhouse: PEP 503 pages (and PEP 691 JSON) any web server serves.

Layout of the output folder (every page relative-linked, so file://, a plain `python -m
http.server`, GitHub Pages or S3 all serve it as is):

    files/<wheel>                        each wheel once (hard-linked, else copied)
    simple/<project>/index.html          every wheel (pip picks by Python, ABI and platform tags)
    <variant>/simple/<project>/...       one index per CUDA variant (cu130, cu128, ...), as torch's
                                         own download.pytorch.org/whl/cu130 does
    index.html                           a page for people: every wheel with its provenance

Running it again adds new wheels in place: wheels are immutable (one name, one content, like
PyPI), pages are rewritten through a temp file and os.replace, so a reader never sees half a page.
A folder that holds anything but a mambawin index is refused: mambawin only changes its own files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

from mambawin.cache import write_atomic, write_atomic_bytes
from mambawin.errors import UsageError, WheelError
from mambawin.wheel.info import open_wheel, read_member, read_message, read_wheel
from mambawin.wheel.metadata import read_provenance

FILES = "files"
SIMPLE = "simple"
MARKER = ".mambawin-index.json"
VERIFY_SUFFIX = ".verify.json"
# PEP 658: the wheel's METADATA beside it, so pip's resolver reads requirements without
# downloading a wheel of hundreds of megabytes.
METADATA_SUFFIX = ".metadata"  # `mambawin verify WHEEL --json > WHEEL.verify.json`
_VARIANT = re.compile(r"^(cu\d{2,3}|rocm[\d.]+|cpu)")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class IndexedWheel:
    """One wheel of the index and what its pages say about it."""

    file: str
    project: str  # canonical (PEP 503)
    version: str
    tags: tuple[str, ...]
    sha256: str
    size: int
    requires_python: str | None
    variant: str | None  # cu130, ... from the local version label or provenance
    metadata_sha256: str = ""  # of files/<wheel>.metadata (PEP 658), "" when not written
    provenance: Mapping[str, Any] | None = None
    verify: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "project": self.project, "version": self.version,
                "tags": list(self.tags), "sha256": self.sha256, "size": self.size,
                "requires_python": self.requires_python, "variant": self.variant,
                "metadata_sha256": self.metadata_sha256,
                "provenance": dict(self.provenance) if self.provenance else None,
                "verify": dict(self.verify) if self.verify else None}


@dataclass(frozen=True)
class IndexResult:
    """What `mambawin index` wrote."""

    out: Path
    wheels: tuple[IndexedWheel, ...]
    added: tuple[str, ...]  # wheel files new in this run
    variants: tuple[str, ...]
    pages: tuple[Path, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The stable `index --json` form."""
        return {"out": str(self.out), "added": list(self.added), "variants": list(self.variants),
                "simple": [str(self.out / SIMPLE), *(str(self.out / v / SIMPLE)
                                                     for v in self.variants)],
                "wheels": [w.to_json() for w in self.wheels]}


def build_index(wheelhouse: Path, out: Path, *, title: str = "mambawin wheels") -> IndexResult:
    """Add every wheel of wheelhouse to the index in out (created if absent); rewrite its pages."""
    from mambawin.index.page import render_page

    sources = _wheel_files(Path(wheelhouse))
    for path in sources:  # a broken wheel stops the run before the index changes at all
        read_wheel(path)
    out = Path(out)
    _claim(out)
    added = tuple(name for name in (_place(path, out / FILES) for path in sources) if name)
    for path in sources:
        _copy_verify_record(path, out / FILES)
    wheels = _entries(out / FILES, _cached(out))
    variants = tuple(sorted({w.variant for w in wheels if w.variant}))
    pages = [*_write_simple(out / SIMPLE, wheels, depth=2)]
    for variant in variants:
        chosen = [w for w in wheels if w.variant == variant]
        pages += _write_simple(out / variant / SIMPLE, chosen, depth=3)
    pages.append(write_atomic(out / "index.html", render_page(title, wheels, variants)))
    _record(out, wheels)
    return IndexResult(out, wheels, added, variants, tuple(pages))


# ---- wheels ------------------------------------------------------------------------------------


def _wheel_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        msg = f"{folder} is not a folder of wheels: pass the wheelhouse that holds your .whl files"
        raise UsageError(msg)
    return sorted(p for p in folder.glob("*.whl") if p.is_file())


def _entries(files: Path, cached: Mapping[str, Any]) -> tuple[IndexedWheel, ...]:
    """Every wheel in files/; one unchanged since the last run (same size and mtime) is taken
    from the marker instead of being read again (a wheel is hundreds of megabytes)."""
    entries = []
    for path in _wheel_files(files):
        old = cached.get(path.name)
        info = path.stat()
        if (isinstance(old, dict) and old.get("size") == info.st_size
                and old.get("mtime_ns") == info.st_mtime_ns
                and path.with_name(path.name + METADATA_SUFFIX).is_file()):
            try:
                entries.append(_from_json(old, _verify_record(path)))
                continue
            except (KeyError, TypeError):
                pass  # an entry in another shape: read the wheel itself
        entries.append(_entry(path))
    return tuple(entries)


def _from_json(data: Mapping[str, Any], verify: Mapping[str, Any] | None) -> IndexedWheel:
    """The marker's entry as read back; KeyError/TypeError when it was edited into another shape."""
    return IndexedWheel(
        file=data["file"], project=data["project"], version=data["version"],
        tags=tuple(data["tags"]), sha256=data["sha256"], size=data["size"],
        requires_python=data["requires_python"], variant=data["variant"],
        metadata_sha256=data["metadata_sha256"], provenance=data["provenance"], verify=verify)


def _entry(path: Path) -> IndexedWheel:
    """What the pages need from one wheel in files/ (name, METADATA, provenance, verify record);
    writes its PEP 658 `.metadata` file beside it when missing."""
    try:
        name, version, _, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename as exc:
        msg = f"{path.name} is not a valid wheel file name ({exc}): rename or remove it"
        raise WheelError(msg) from None
    with open_wheel(path) as (archive, info):
        raw = read_member(path, archive, info.metadata_path)
    metadata = read_message(raw)
    provenance = read_provenance(path)
    sidecar = path.with_name(path.name + METADATA_SUFFIX)
    if not sidecar.is_file() or sidecar.read_bytes() != raw:
        write_atomic_bytes(sidecar, raw)
    requires = metadata.get("Requires-Python")
    return IndexedWheel(
        file=path.name, project=canonicalize_name(name), version=str(version),
        tags=tuple(sorted(str(t) for t in tags)), sha256=sha256_file(path),
        size=path.stat().st_size, requires_python=str(requires).strip() if requires else None,
        variant=_variant(provenance, version.local), provenance=provenance,
        verify=_verify_record(path), metadata_sha256=hashlib.sha256(raw).hexdigest())


def _variant(provenance: Mapping[str, Any] | None, local: str | None) -> str | None:
    """cu130 from the local label (+cu130torch2.11: torch's variant, which users pick an index
    by), else from the provenance's CUDA version (the nvcc that compiled it)."""
    match = _VARIANT.match(local or "")
    if match:
        return match[1]
    parts = str((provenance or {}).get("cuda_version") or "").split(".")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"cu{parts[0]}{parts[1]}"
    return None


def _verify_record(path: Path) -> Mapping[str, Any] | None:
    """`<wheel>.verify.json` beside the wheel (`mambawin verify --json` output): passed, summary."""
    record = path.with_name(path.name + VERIFY_SUFFIX)
    try:
        data = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else None
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and "passed" in data:
        return {"passed": bool(data["passed"]), "summary": str(data.get("summary", ""))}
    return None


def _copy_verify_record(wheel: Path, files: Path) -> None:
    """The wheelhouse's newest verify record goes with the wheel (a later verify replaces it)."""
    record = wheel.with_name(wheel.name + VERIFY_SUFFIX)
    if record.is_file():
        write_atomic(files / record.name, record.read_text(encoding="utf-8"))


def _place(source: Path, files: Path) -> str | None:
    """Put one wheel in files/ (hard link, else copy); its name when new, None when already in."""
    target = files / source.name
    if target.exists():
        if sha256_file(target) != sha256_file(source):
            msg = (f"{source.name} is already in the index with other content: a wheel file "
                   "never changes once published; rebuild it with another version label")
            raise UsageError(msg)
        return None
    files.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".add-", dir=files))
    try:
        staged = scratch / source.name
        try:
            os.link(source, staged)
        except OSError:  # another drive, FAT, or a file system without hard links
            shutil.copy2(source, staged)
        os.replace(staged, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return source.name


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---- pages -------------------------------------------------------------------------------------


def _write_simple(root: Path, wheels: Iterable[IndexedWheel], *, depth: int) -> list[Path]:
    """PEP 503 root and project pages (plus PEP 691 JSON twins) for wheels under root."""
    from mambawin.index.page import project_html, project_json, root_html, root_json

    by_project: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.project, []).append(wheel)
    files_url = "../" * depth + FILES + "/"
    pages = []
    for project, chosen in sorted(by_project.items()):
        folder = root / project
        pages.append(write_atomic(folder / "index.html", project_html(project, chosen, files_url)))
        pages.append(write_atomic(folder / "index.json", project_json(project, chosen, files_url)))
    pages.append(write_atomic(root / "index.html", root_html(sorted(by_project))))
    pages.append(write_atomic(root / "index.json", root_json(sorted(by_project))))
    return pages


# ---- ownership ---------------------------------------------------------------------------------


def _claim(out: Path) -> None:
    """Refuse a non-empty folder that is not a mambawin index: its files are not ours to change."""
    if out.exists() and not out.is_dir():
        msg = f"{out} is a file, not a folder: pass a folder for the index as --out"
        raise UsageError(msg)
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        msg = (f"{out} is not empty and holds no mambawin index ({MARKER} missing): pass a new or "
               "empty --out folder, or the folder of an earlier `mambawin index` run")
        raise UsageError(msg)
    out.mkdir(parents=True, exist_ok=True)


def _record(out: Path, wheels: Iterable[IndexedWheel]) -> None:
    """The marker: this folder is a mambawin index, and what each wheel said (see _entries)."""
    entries = {}
    for wheel in wheels:
        data = wheel.to_json()
        del data["verify"]  # read again each run: a later `verify` may replace it
        data["mtime_ns"] = (out / FILES / wheel.file).stat().st_mtime_ns
        entries[wheel.file] = data
    text = json.dumps({"schema": 1, "wheels": entries}, indent=2, sort_keys=True) + "\n"
    write_atomic(out / MARKER, text)


def _cached(out: Path) -> Mapping[str, Any]:
    """The wheels the marker describes; empty when it is missing or unreadable (all re-read)."""
    try:
        data = json.loads((out / MARKER).read_text(encoding="utf-8"))
        wheels = data.get("wheels") if isinstance(data, dict) else None
    except (OSError, ValueError):
        wheels = None
    return wheels if isinstance(wheels, dict) else {}
