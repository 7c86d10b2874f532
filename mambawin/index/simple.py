"""A static package index of a wheelhouse: PEP 503 pages (and PEP 691 JSON) any web server serves.

Layout of the output folder (every page relative-linked, so file://, a plain `python -m
http.server`, GitHub Pages or S3 all serve it as is):

    files/<wheel>                        each wheel once (a copy or reflink, never a link)
    simple/<project>/index.html          every wheel (pip picks by Python, ABI and platform tags)
    <variant>/simple/<project>/...       one index per CUDA variant (cu130, cu128, ...), as torch's
                                         own download.pytorch.org/whl/cu130 does
    <variant>/torch<X.Y>/simple/...      the wheels a torch X.Y user of that variant can load:
                                         its own torch's, and every stable (py3-none) wheel of
                                         the CUDA major whose floor is X.Y or older
    index.html                           a page for people: every wheel with its provenance

Running it again adds new wheels in place. A publication: a wheel, once published, never
changes (one name in any spelling, one content, like PyPI; other bytes are refused and the run
adds nothing); files are world-readable copies, so nothing done to the wheelhouse later reaches
them; pages are rewritten through a temp file and os.replace, so a reader never sees half a page;
runs on one folder take turns; a killed run's leftovers are removed by the next. A folder that
holds anything but a mambawin index is refused: mambawin only changes its own files.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import (
    InvalidWheelFilename,
    canonicalize_name,
    parse_wheel_filename,
)

from mambawin import userfile
from mambawin.atomic import write_file, write_text
from mambawin.errors import MambawinError, UsageError, WheelError
from mambawin.index.model import IndexedWheel, sha256_file
from mambawin.index.page import (
    project_html,
    project_json,
    render_page,
    root_html,
    root_json,
)
from mambawin.index.publish import (
    FILE_MODE,
    MARKER,
    check_out,
    claim,
    clean_leftovers,
    copy_in,
    locked,
    make_dir,
    new_wheels,
    remove_if_only_lock,
    wheel_files,
    write_page,
)
from mambawin.index.serve import serves_torch, serves_variant, torches
from mambawin.wheel.info import open_wheel, read_member, read_message, read_wheel
from mambawin.wheel.provenance import read_provenance

FILES = "files"


SIMPLE = "simple"


VERIFY_SUFFIX = ".verify.json"


# PEP 658: the wheel's METADATA beside it, so pip's resolver reads requirements without
# downloading a wheel of hundreds of megabytes.
METADATA_SUFFIX = ".metadata"  # `mambawin verify WHEEL --json > WHEEL.verify.json`


_VARIANT = re.compile(r"^(cu\d{2,3}|rocm[\d.]+|cpu)")


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
        return {
            "out": str(self.out),
            "added": list(self.added),
            "variants": list(self.variants),
            "simple": [
                str(self.out / SIMPLE),
                *(str(self.out / v / SIMPLE) for v in self.variants),
            ],
            "wheels": [w.to_json() for w in self.wheels],
        }


def build_index(
    wheelhouse: Path, out: Path, *, title: str = "mambawin wheels", lock_timeout: float = 600.0
) -> IndexResult:
    """Publish every wheel of wheelhouse in the index at out (created if absent); rewrite pages.

    All or nothing: every wheel is read and every name checked against what is published before
    the first byte is written. Runs on one out wait for each other (a lock the OS releases even
    when a run is killed); a run cleans up what a killed run left.
    """
    sources = _sources(Path(wheelhouse))
    out = Path(out)
    check_out(out)
    created = not out.exists()
    try:
        make_dir(out)
        with locked(out, lock_timeout):
            claim(out)
            clean_leftovers(out)
            result = _publish(sources, out, title)
    except BaseException:
        if created:
            remove_if_only_lock(out)
        raise
    return result


def _publish(sources: list[Path], out: Path, title: str) -> IndexResult:
    new = new_wheels(sources, out / FILES)
    make_dir(out / FILES)
    added = copy_in(new, out / FILES)
    for path in sources:
        _copy_verify_record(path, out / FILES)
    wheels = _entries(out / FILES, _cached(out))
    variants = tuple(sorted({w.variant for w in wheels if w.variant}))
    pages = [*_write_simple(out / SIMPLE, wheels, depth=2)]
    for variant in variants:
        chosen = [w for w in wheels if serves_variant(w, variant)]
        pages += _write_simple(out / variant / SIMPLE, chosen, depth=3)
        for torch in torches(chosen):
            picked = [w for w in chosen if serves_torch(w, torch)]
            pages += _write_simple(out / variant / f"torch{torch}" / SIMPLE, picked, depth=4)
    pages.append(write_page(out / "index.html", render_page(title, wheels, variants)))
    _record(out, wheels)
    return IndexResult(out, wheels, added, variants, tuple(pages))


def _sources(wheelhouse: Path) -> list[Path]:
    """The wheelhouse's wheels, each read and checked; nothing is written when one is broken."""
    sources = wheel_files(wheelhouse)
    if not sources:
        msg = (
            f"{wheelhouse} holds no .whl files: build wheels into it first "
            "(`mambawin build --out WHEELHOUSE`), or pass the folder that has them"
        )
        raise UsageError(msg)
    for path in sources:
        read_wheel(path)
    return sources


# ---- publishing: a name is published once, with one content --------------------------------


def _entries(files: Path, cached: Mapping[str, Any]) -> tuple[IndexedWheel, ...]:
    """Every wheel in files/; one unchanged since the last run (same size and mtime) is taken
    from the marker instead of being read again (a wheel is hundreds of megabytes)."""
    entries = []
    for path in wheel_files(files):
        old = cached.get(path.name)
        info = path.stat()
        if (
            isinstance(old, dict)
            and old.get("size") == info.st_size
            and old.get("mtime_ns") == info.st_mtime_ns
            and path.with_name(path.name + METADATA_SUFFIX).is_file()
        ):
            try:
                entries.append(_from_json(old, path, _verify_record(path)))
                continue
            except (KeyError, TypeError, ValueError):
                pass  # an entry edited into another shape or meaning: read the wheel itself
        entries.append(_entry(path))
    return tuple(entries)


def _from_json(
    data: Mapping[str, Any], path: Path, verify: Mapping[str, Any] | None
) -> IndexedWheel:
    """The marker's entry as read back, trusted only where it agrees with the file it describes:
    its names become folder names, so an edited `project` or `variant` must not lead out of
    --out (KeyError/TypeError/ValueError: read the wheel itself)."""
    name = parse_wheel_filename(path.name)[0]
    variant = data["variant"]
    if data["file"] != path.name or data["project"] != canonicalize_name(name):
        raise ValueError(path.name)
    if variant is not None and not re.fullmatch(_VARIANT.pattern.lstrip("^") + "$", variant):
        raise ValueError(variant)
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
        provenance=data["provenance"],
        verify=verify,
    )


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
        make_dir(sidecar.parent)
        write_file(sidecar, raw, mode=FILE_MODE)
    requires = metadata.get("Requires-Python")
    return IndexedWheel(
        file=path.name,
        project=canonicalize_name(name),
        version=str(version),
        tags=tuple(sorted(str(t) for t in tags)),
        sha256=sha256_file(path),
        size=path.stat().st_size,
        requires_python=str(requires).strip() if requires else None,
        variant=_variant(provenance, version.local),
        provenance=provenance,
        verify=_verify_record(path),
        metadata_sha256=hashlib.sha256(raw).hexdigest(),
    )


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
        text = userfile.read_text(record, what="verify record") if record.exists() else "null"
        data = json.loads(text)
    except (MambawinError, ValueError):
        data = None  # the page shows "not verified"; the record is the user's to fix
    if isinstance(data, dict) and "passed" in data:
        return {"passed": bool(data["passed"]), "summary": str(data.get("summary", ""))}
    return None


def _copy_verify_record(wheel: Path, files: Path) -> None:
    """The wheelhouse's newest verify record goes with the wheel (a later verify replaces it)."""
    record = wheel.with_name(wheel.name + VERIFY_SUFFIX)
    if record.exists():
        text = userfile.read_text(record, what="verify record")
        write_text(files / record.name, text, mode=FILE_MODE)


# ---- pages -------------------------------------------------------------------------------------


def _write_simple(root: Path, wheels: Iterable[IndexedWheel], *, depth: int) -> list[Path]:
    """PEP 503 root and project pages (plus PEP 691 JSON twins) for wheels under root."""
    by_project: dict[str, list[IndexedWheel]] = {}
    for wheel in wheels:
        by_project.setdefault(wheel.project, []).append(wheel)
    files_url = "../" * depth + FILES + "/"
    pages = []
    for project, chosen in sorted(by_project.items()):
        folder = root / project
        pages.append(write_page(folder / "index.html", project_html(project, chosen, files_url)))
        pages.append(write_page(folder / "index.json", project_json(project, chosen, files_url)))
    pages.append(write_page(root / "index.html", root_html(sorted(by_project))))
    pages.append(write_page(root / "index.json", root_json(sorted(by_project))))
    return pages


# ---- ownership ---------------------------------------------------------------------------------


def _record(out: Path, wheels: Iterable[IndexedWheel]) -> None:
    """The marker: this folder is a mambawin index, and what each wheel said (see _entries)."""
    entries = {}
    for wheel in wheels:
        data = wheel.to_json()
        del data["verify"]  # read again each run: a later `verify` may replace it
        data["mtime_ns"] = (out / FILES / wheel.file).stat().st_mtime_ns
        entries[wheel.file] = data
    text = json.dumps({"schema": 1, "wheels": entries}, indent=2, sort_keys=True) + "\n"
    write_text(out / MARKER, text, mode=FILE_MODE)


def _cached(out: Path) -> Mapping[str, Any]:
    """The wheels the marker describes; empty when it is missing or unreadable (all re-read)."""
    try:
        data = json.loads((out / MARKER).read_text(encoding="utf-8"))
        wheels = data.get("wheels") if isinstance(data, dict) else None
    except (OSError, ValueError):
        wheels = None
    return wheels if isinstance(wheels, dict) else {}
