"""Rewrite a built wheel so its platform can install and trust it; the input is never modified.

Rewrites requirements for the wheel's platform tag (`wheel.requirements`: on Windows triton becomes
triton-windows and Mamba3-only requirements move to an extra), sets a local version that says what
the wheel was built for, records provenance (with every requirement change) in the .dist-info and
adds a torch/CUDA import guard to the package. The new wheel is written by writer.py (RECORD
regenerated, unchanged members copied raw).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from mambawin.abi import (
    DEFAULT_ABI,
    STABLE_ABI_TAG,
    STABLE_FLOOR_PYTHON,
    STABLE_PYTHON_TAG,
    Abi,
    torch_requirement,
)
from mambawin.errors import UsageError, WheelError
from mambawin.secret_urls import public_repo
from mambawin.wheel.guard import Built, guard_target, guard_versions, set_guard
from mambawin.wheel.info import (
    WheelInfo,
    checked_record,
    open_wheel,
    read_member,
)
from mambawin.wheel.metadata import (
    edit_metadata,
    requirement_plan_in,
    requirements_in,
    with_platform_headers_in,
)
from mambawin.wheel.provenance import (
    NO_LABEL,
    PROVENANCE_NAME,
    Provenance,
    normalize_local_label,
    provenance_in,
    source_date_epoch,
)
from mambawin.wheel.requirements import Plan, with_minimum
from mambawin.wheel.writer import Entry, raw_member, write_wheel, zip_date_time

# Why a stable wheel requires torch >= the floor (recorded in the provenance's requirements).
STABLE_TORCH_REASON = (
    "a torch stable-ABI binary loads in every torch from its TORCH_TARGET_VERSION on, and in no "
    "older one"
)

_SIGNATURES = ("RECORD", "RECORD.jws", "RECORD.p7s")


@dataclass(frozen=True)
class _Plan:
    """Names in the new wheel: version, .dist-info/.data folders and the target path."""

    info: WheelInfo
    version: str | None  # new METADATA Version, None to keep it
    dist_info: str
    target: Path
    tags: tuple[str, str] | None = None  # new (python, abi) tags, None to keep them

    def rename(self, member: str) -> str:
        top, sep, rest = member.partition("/")
        old_data = self.info.dist_info[: -len(".dist-info")] + ".data"
        if top == self.info.dist_info:
            return f"{self.dist_info}{sep}{rest}"
        if top == old_data:
            return f"{self.dist_info[: -len('.dist-info')]}.data{sep}{rest}"
        return member


def rewrite_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    drop: Iterable[str] = (),
    keep: Iterable[str] = (),
    local_version: str | None = None,
    provenance: Provenance | Mapping[str, object] | None = None,
    guard: bool = True,
    date_epoch: int | None = None,
    abi: Abi = DEFAULT_ABI,
) -> Path:
    """Write a fixed copy of `wheel` into `out_dir` and return its path (see module docstring).

    abi="stable" (a torch stable-ABI build): the wheel is tagged py3-none-<platform> in its name
    and WHEEL file, and requires torch >= the floor; "torch" keeps the tags setup.py gave.

    Every member, RECORD included, is dated SOURCE_DATE_EPOCH, else date_epoch (a build passes
    the upstream commit's time), else keeps its old date: the same input then gives the same bytes.
    """
    epoch = source_date_epoch()  # fail before any work when it is malformed
    date_time = zip_date_time(epoch if epoch is not None else date_epoch)
    _check_out_dir(Path(out_dir))
    label = _label_of(local_version)
    with open_wheel(Path(wheel)) as (archive, info):
        plan = _plan(info, label, Path(out_dir), abi)
        changes = requirement_plan_in(archive, info, drop, keep)
        if abi == "stable":
            changes = with_minimum(
                changes, requirements_in(archive, info), torch_requirement(), STABLE_TORCH_REASON
            )
        record = _provenance_dict(archive, info, provenance)
        stable = abi == "stable" or (record is not None and record.get("abi") == "stable")
        changes = with_platform_headers_in(changes, archive, info, python_floor(info, stable))
        if record is not None and changes.every:
            record["requirements"] = [change.to_json() for change in changes.every]
        versions = guard_versions(Provenance.from_dict(record)) if guard and record else None
        entries = _entries(archive, plan, changes, record, versions)
        return write_wheel(entries, plan.target, date_time)


def python_floor(info: WheelInfo, stable: bool) -> Version | None:
    """The oldest Python the rewritten wheel installs on: the stable floor's torch's (a stable
    build, or a wheel whose provenance says it is one), else the oldest CPython its tag names
    (cp312 -> 3.12); None when the tag names none."""
    if stable:
        return STABLE_FLOOR_PYTHON
    found = [
        Version(f"{tag[2]}.{tag[3:]}")
        for tag in info.file.python.split(".")
        if tag.startswith("cp") and tag[2:].isascii() and tag[2:].isdigit() and len(tag) > 3
    ]
    return min(found) if found else None


def _check_out_dir(out_dir: Path) -> None:
    """UsageError when out_dir, or the nearest of its parents that exists, is not a folder."""
    existing = next((p for p in (out_dir, *out_dir.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        msg = f"--out {out_dir}: {existing} is a file, not a folder: pass a folder for the wheel"
        raise UsageError(msg)


def _label_of(local_version: str | None) -> str | None:
    """None keeps the wheel's version; 'none' drops its label, as `build --local-version none`."""
    if local_version is None:
        return None
    if local_version.strip().lower() == NO_LABEL:
        return ""
    return normalize_local_label(local_version)


def _plan(info: WheelInfo, label: str | None, out_dir: Path, abi: Abi) -> _Plan:
    public = Version(info.version).public
    version = None if label is None else (f"{public}+{label}" if label else public)
    file_version = version.replace("-", "_") if version else info.file.version
    # WheelFile puts RECORD under `<name>-<version>.dist-info` from the file name, so the folder
    # must be named exactly like that or RECORD would land in a second .dist-info.
    dist_info = f"{info.file.name}-{file_version}.dist-info"
    tags = (STABLE_PYTHON_TAG, STABLE_ABI_TAG) if abi == "stable" else None
    named = info.file.with_tags(*tags) if tags else info.file
    target = out_dir / named.with_version(file_version)
    if target.resolve() == info.path.resolve():
        msg = (
            f"the output {target} would overwrite the input wheel: pass another --out folder "
            "(the input is never modified)"
        )
        raise WheelError(msg)
    return _Plan(info, version, dist_info, target, tags)


def _provenance_dict(
    archive: zipfile.ZipFile,
    info: WheelInfo,
    provenance: Provenance | Mapping[str, object] | None,
) -> dict[str, object] | None:
    """The caller's provenance, else the one already in the wheel (a second rewrite keeps it);
    either way its repository as public_repo says (an older wheel's folder or credential is not
    written into the new one)."""
    if isinstance(provenance, Provenance):
        return provenance.to_dict()
    if provenance is None:  # the wheel's own record, as it stores it (unknown keys kept)
        in_wheel = provenance_in(archive, info)
        provenance = in_wheel.stored if in_wheel is not None else None
    record = dict(provenance) if provenance is not None else None
    repo = record.get("upstream_repo") if record is not None else None
    if record is not None and isinstance(repo, str):
        record["upstream_repo"] = public_repo(repo)
    return record


def _entries(
    archive: zipfile.ZipFile,
    plan: _Plan,
    changes: Plan,
    record: dict[str, object] | None,
    versions: Built | None,
) -> Iterator[Entry]:
    """(new name, bytes, original entry) for every member of the new wheel, RECORD excluded."""
    info = plan.info
    skipped = {f"{info.dist_info}/{name}" for name in (*_SIGNATURES, PROVENANCE_NAME)}
    guarded = guard_target(info, needed=versions is not None)
    retagged = f"{info.dist_info}/WHEEL" if plan.tags is not None else None
    recorded = checked_record(info, archive)
    for entry in archive.infolist():
        if entry.is_dir() or entry.filename in skipped:
            continue
        if entry.filename not in (info.metadata_path, guarded, retagged):
            raw = raw_member(info.path, archive, entry, recorded.get(entry.filename))
            if raw is not None:
                yield plan.rename(entry.filename), raw, entry
                continue
        data = read_member(info.path, archive, entry.filename)
        if entry.filename == info.metadata_path:
            data = edit_metadata(data, changes, plan.version)
        elif entry.filename == guarded:
            data = set_guard(data, versions, info.name)
        elif entry.filename == retagged and plan.tags is not None:
            data = retag(data, *plan.tags, info.file.platform)
        yield plan.rename(entry.filename), data, entry
    if record is not None:
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        yield f"{plan.dist_info}/{PROVENANCE_NAME}", text.encode("utf-8"), None


def retag(wheel_file: bytes, python: str, abi: str, platform: str) -> bytes:
    """WHEEL bytes with its Tag lines replaced by python-abi-<each platform of the name>.

    Every other line keeps its bytes; the new Tag lines go where the first one was, so the file
    name and WHEEL keep saying the same tags (open_wheel checks that on every read).
    """
    lines = wheel_file.splitlines(keepends=True)
    tagged = [i for i, line in enumerate(lines) if line.lower().startswith(b"tag:")]
    if not tagged:
        msg = "the wheel's WHEEL file has no Tag line: rebuild it with setup.py bdist_wheel"
        raise WheelError(msg)
    end = lines[tagged[0]][len(lines[tagged[0]].rstrip(b"\r\n")) :] or b"\n"
    new = [f"Tag: {python}-{abi}-{plat}".encode() + end for plat in platform.split(".")]
    kept = [line for i, line in enumerate(lines) if i not in set(tagged)]
    at = tagged[0]
    return b"".join([*kept[:at], *new, *kept[at:]])
