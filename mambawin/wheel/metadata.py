"""METADATA editing: the wheel's requirements read, planned for its platform
(`wheel.requirements`) and rewritten byte for byte, every other header left as it was."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from mambawin.wheel.headers import with_platform_headers
from mambawin.wheel.info import (
    WheelInfo,
    open_wheel,
    read_member,
    read_message,
    read_text_member,
)
from mambawin.wheel.requirements import Change, Plan, plan

_HEADER_END = re.compile(rb"\r?\n(\r?\n)")


_NAME_TOKEN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist values, in METADATA order."""
    with open_wheel(Path(wheel)) as (archive, info):
        return requirements_in(archive, info)


def requirements_in(archive: zipfile.ZipFile, info: WheelInfo) -> list[str]:
    """Requires-Dist of a wheel already opened (and checked) once."""
    metadata = read_message(read_text_member(info.path, archive, info.metadata_path))
    return [str(value).strip() for value in metadata.get_all("Requires-Dist") or ()]


def requirement_plan(wheel: Path, *, drop: Iterable[str] = (), keep: Iterable[str] = ()) -> Plan:
    """What `rewrite_wheel` would change in the wheel's Requires-Dist, for its platform tag."""
    with open_wheel(Path(wheel)) as (archive, info):
        return requirement_plan_in(archive, info, drop, keep)


def requirement_plan_in(
    archive: zipfile.ZipFile, info: WheelInfo, drop: Iterable[str] = (), keep: Iterable[str] = ()
) -> Plan:
    """What `rewrite_wheel` would change in a wheel already opened (and checked) once."""
    raw = read_member(info.path, archive, info.metadata_path)
    return plan(
        info.name,
        info.file.platform,
        requires_dist(raw),
        version=info.version,
        drop=drop,
        keep=keep,
    )


def rewrite_requirements(
    raw: bytes,
    project: str,
    platform_tag: str,
    *,
    drop: Iterable[str] = (),
    keep: Iterable[str] = (),
) -> tuple[bytes, Plan]:
    """METADATA bytes with requirements for `platform_tag` (what rewrite_wheel writes), and why."""
    version = read_message(raw).get("Version")
    changes = plan(
        project,
        platform_tag,
        requires_dist(raw),
        version=version and str(version),
        drop=drop,
        keep=keep,
    )
    return edit_metadata(raw, changes, None), changes


def requires_dist(raw: bytes) -> list[str]:
    """The Requires-Dist values of raw METADATA bytes, unfolded, in order."""
    return header_values(raw, "Requires-Dist")


def header_values(raw: bytes, wanted: str) -> list[str]:
    """The values of one header of raw METADATA bytes, unfolded, in order (as edit_metadata
    matches them)."""
    values = []
    for header in _logical_headers(raw[: _header_cut(raw)]):
        name, _, value = header.partition(b":")
        if name.strip().lower() == wanted.lower().encode():
            values.append(_unfold(value))
    return values


def with_platform_headers_in(
    changes: Plan, archive: zipfile.ZipFile, info: WheelInfo, python_floor: Version | None
) -> Plan:
    """changes, with the Classifier and Requires-Python rewrites the wheel's platform needs."""
    raw = read_member(info.path, archive, info.metadata_path)
    python = header_values(raw, "Requires-Python")
    return with_platform_headers(
        changes,
        info.file.platform,
        header_values(raw, "Classifier"),
        python[0] if python else None,
        python_floor,
    )


def edit_metadata(raw: bytes, changes: Plan, version: str | None) -> bytes:
    """METADATA with the plan's Requires-Dist changes and extras, and a new Version.

    Every other byte stays as it was; a new `Provides-Extra` goes before the first Requires-Dist.
    """
    cut = _header_cut(raw)
    replacements = changes.replacements()
    extras = _missing_extras(raw[:cut], changes.extras)
    kept: list[bytes] = []
    headers = _logical_headers(raw[:cut])
    last_requirement = max(
        (
            i
            for i, h in enumerate(headers)
            if h.partition(b":")[0].strip().lower() == b"requires-dist"
        ),
        default=len(headers) - 1,
    )
    classifiers = {c.before: c.after for c in changes.classifiers if c.before}
    python = changes.python
    for index, header in enumerate(headers):
        name, _, value = header.partition(b":")
        key, end = name.strip().lower(), _line_end(header)
        if key == b"classifier" and _unfold(value) in classifiers:
            new_value = classifiers[_unfold(value)]
            header = b"" if new_value is None else _header("Classifier", new_value, end)
        elif key == b"requires-python" and python is not None and python.after is not None:
            header = _header("Requires-Python", python.after, end)
            python = None
        if key == b"requires-dist" and extras:
            kept += [_header("Provides-Extra", extra, end or b"\n") for extra in extras]
            extras = []
        if key == b"requires-dist" and _unfold(value) in replacements:
            new = replacements[_unfold(value)]
            header = b"" if new is None else _header("Requires-Dist", new, end)
        elif key == b"version" and version is not None:
            header = _header("Version", version, end)
        kept.append(header)
        if index == last_requirement:
            kept += [_header("Requires-Dist", new, end or b"\n") for new in changes.additions()]
    return b"".join(kept + _added_headers(changes, python, headers)) + raw[cut:]


def _added_headers(changes: Plan, python: Change | None, headers: list[bytes]) -> list[bytes]:
    """The Classifier and Requires-Python lines the wheel lacked, after its last header."""
    end = (_line_end(headers[-1]) if headers else b"") or b"\n"
    values = [("Classifier", c.after) for c in changes.classifiers if not c.before and c.after]
    if python is not None and python.after is not None and not python.before:
        values.append(("Requires-Python", python.after))
    if not values:
        return []
    # the last header may lack its line end (no body follows): the new lines start on their own
    first = end if headers and not _line_end(headers[-1]) else b""
    return [first + _header(name, value, end) for name, value in values]


def _header_cut(raw: bytes) -> int:
    match = _HEADER_END.search(raw)
    return match.start(1) if match else len(raw)


def _header(name: str, value: str, end: bytes) -> bytes:
    return f"{name}: {value}".encode() + end


def _missing_extras(head: bytes, extras: Iterable[str]) -> list[str]:
    """The extras the METADATA does not provide yet (a second rewrite adds none)."""
    provided = {
        canonicalize_name(_unfold(header.partition(b":")[2]))
        for header in _logical_headers(head)
        if header.partition(b":")[0].strip().lower() == b"provides-extra"
    }
    return [extra for extra in extras if canonicalize_name(extra) not in provided]


def requirement_name(text: str) -> str:
    """The canonical project name of a requirement (`Triton (>=2.0)` → 'triton'), '' if none."""
    try:
        return canonicalize_name(Requirement(text).name)
    except InvalidRequirement:
        # Legacy Metadata 1.x spellings that PEP 508 rejects still start with the project name.
        match = _NAME_TOKEN.match(text)
        return canonicalize_name(match.group(1)) if match else ""


def _logical_headers(head: bytes) -> list[bytes]:
    """RFC 822 headers with their continuation lines (which start with a space or tab)."""
    headers: list[bytes] = []
    for line in head.splitlines(keepends=True):
        if line[:1] in (b" ", b"\t") and headers:
            headers[-1] += line
        else:
            headers.append(line)
    return headers


def _unfold(value: bytes) -> str:
    return re.sub(r"\r?\n[ \t]+", " ", value.decode("utf-8", errors="replace")).strip()


def _line_end(header: bytes) -> bytes:
    if header.endswith(b"\r\n"):
        return b"\r\n"
    return b"\n" if header.endswith(b"\n") else b""
