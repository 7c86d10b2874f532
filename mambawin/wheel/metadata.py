"""Rewrite a built wheel so its platform can install and trust it; the input is never modified.

Rewrites requirements for the wheel's platform tag (`wheel.requirements`: on Windows triton becomes
triton-windows and Mamba3-only requirements move to an extra), sets a local version that says what
the wheel was built for, records provenance (with every requirement change) in the .dist-info and
adds a torch/CUDA import guard to the package.
The new wheel is written through `wheel.wheelfile.WheelFile`, so RECORD is regenerated.
"""

from __future__ import annotations

import ast
import json
import os
import re
import stat
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from wheel.wheelfile import WheelFile, get_zipinfo_datetime

from mambawin import __version__
from mambawin.atomic import staging_dir
from mambawin.errors import UsageError, WheelError
from mambawin.versions import release
from mambawin.wheel.info import (
    WheelInfo,
    open_wheel,
    read_member,
    read_message,
    read_text_member,
)
from mambawin.wheel.requirements import Plan, plan

PROVENANCE_NAME = "mambawin-provenance.json"
NO_LABEL = "none"  # --local-version none: the public version, no +label
SKIP_GUARD_ENV = "MAMBAWIN_SKIP_TORCH_CHECK"
GUARD_BEGIN = "# >>> mambawin torch guard"
GUARD_END = "# <<< mambawin torch guard"

_HEADER_END = re.compile(rb"\r?\n(\r?\n)")
_NAME_TOKEN = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SIGNATURES = ("RECORD", "RECORD.jws", "RECORD.p7s")

Entry = tuple[str, bytes, zipfile.ZipInfo | None]  # new name, bytes, the entry it came from


@dataclass(frozen=True)
class Provenance:
    """Where a wheel came from; stored as `<dist-info>/mambawin-provenance.json`."""

    upstream_repo: str = ""
    ref: str = ""
    commit: str = ""
    version: str = ""
    patches: tuple[Mapping[str, str], ...] = ()  # {"id": ..., "status": ...} per patch applied
    left_out: tuple[str, ...] = ()  # patch ids the user left out (build --skip-patch)
    # {"from", "to", "reason"} per Requires-Dist the rewrite changed (filled in by rewrite_wheel)
    requirements: tuple[Mapping[str, str | None], ...] = ()
    archs: tuple[str, ...] = ()
    torch_version: str = ""
    cuda_version: str = ""
    compiler: str = ""
    mambawin_version: str = __version__
    build_date: str = ""  # empty: taken from SOURCE_DATE_EPOCH (or now) when written
    compiler_cache: Mapping[str, object] = field(default_factory=dict)  # tool, hits, misses

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready form, with the build date filled in."""
        data = asdict(self)
        data["patches"] = [dict(patch) for patch in self.patches]
        data["requirements"] = [dict(change) for change in self.requirements]
        data["archs"] = list(self.archs)
        data["left_out"] = list(self.left_out)
        data["build_date"] = self.build_date or build_date()
        return {"schema": 1, **data}


@dataclass(frozen=True)
class _Plan:
    """Names in the new wheel: version, .dist-info/.data folders and the target path."""

    info: WheelInfo
    version: str | None  # new METADATA Version, None to keep it
    dist_info: str
    target: Path

    def rename(self, member: str) -> str:
        top, sep, rest = member.partition("/")
        old_data = self.info.dist_info[: -len(".dist-info")] + ".data"
        if top == self.info.dist_info:
            return f"{self.dist_info}{sep}{rest}"
        if top == old_data:
            return f"{self.dist_info[: -len('.dist-info')]}.data{sep}{rest}"
        return member


def build_date() -> str:
    """ISO-8601 UTC build time: SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = source_date_epoch()
    moment = (
        datetime.fromtimestamp(epoch, timezone.utc)
        if epoch is not None
        else datetime.now(timezone.utc)
    )
    return moment.replace(microsecond=0).isoformat()


# A ZIP entry's date is 1980-01-01 to 2107-12-31 (DOS date fields): a wheel cannot say another.
ZIP_EPOCHS = (315532800, 4354819199)


def source_date_epoch() -> int | None:
    """SOURCE_DATE_EPOCH as seconds, None when unset; UsageError when it is not a number, or a
    time a wheel (a ZIP file) cannot hold."""
    value = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if not value:
        return None
    if not value.isdigit():
        msg = f"SOURCE_DATE_EPOCH={value!r} is not a whole number of seconds: fix or unset it"
        raise UsageError(msg)
    if not ZIP_EPOCHS[0] <= int(value) <= ZIP_EPOCHS[1]:
        msg = (
            f"SOURCE_DATE_EPOCH={value} is outside what a wheel's ZIP dates can hold "
            f"(1980-01-01 to 2107-12-31, {ZIP_EPOCHS[0]}..{ZIP_EPOCHS[1]}): set a time in that "
            "range, e.g. `git log -1 --format=%ct`, or unset it"
        )
        raise UsageError(msg)
    return int(value)


def normalize_local_label(text: str) -> str:
    """A PEP 440 local version label in its normal form ('+' optional); UsageError if invalid."""
    label = text.strip().removeprefix("+")
    try:
        local = Version(f"0+{label}").local if label else None
    except InvalidVersion:
        local = None
    if not local:
        msg = (
            f"invalid local version label {text!r}: use ASCII letters, digits and '.' only "
            "(PEP 440), e.g. cu129torch2.8"
        )
        raise UsageError(msg)
    return local


def local_version_label(cuda_version: str, torch_version: str, extra: str = "") -> str:
    """The label saying what a wheel was built for: ('12.9', '2.8.0') → 'cu129torch2.8'."""
    cuda = _major_minor(cuda_version, "CUDA")
    torch = _major_minor(torch_version, "torch")
    return normalize_local_label(f"cu{cuda[0]}{cuda[1]}torch{torch[0]}.{torch[1]}{extra}")


def requirements(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist values, in METADATA order."""
    with open_wheel(Path(wheel)) as (archive, info):
        return requirements_in(archive, info)


def requirements_in(archive: zipfile.ZipFile, info: WheelInfo) -> list[str]:
    """Requires-Dist of a wheel already opened (and checked) once."""
    metadata = read_message(read_text_member(info.path, archive, info.metadata_path))
    return [str(value).strip() for value in metadata.get_all("Requires-Dist") or ()]


def read_provenance(wheel: Path) -> dict[str, object] | None:
    """The provenance recorded in a wheel by `rewrite_wheel`, None when it has none."""
    with open_wheel(Path(wheel)) as (archive, info):
        return provenance_in(archive, info)


def requirement_plan(wheel: Path, *, drop: Iterable[str] = (), keep: Iterable[str] = ()) -> Plan:
    """What `rewrite_wheel` would change in the wheel's Requires-Dist, for its platform tag."""
    with open_wheel(Path(wheel)) as (archive, info):
        return requirement_plan_in(archive, info, drop, keep)


def rewrite_wheel(
    wheel: Path,
    out_dir: Path,
    *,
    drop: Iterable[str] = (),
    keep: Iterable[str] = (),
    local_version: str | None = None,
    provenance: Provenance | Mapping[str, object] | None = None,
    guard: bool = True,
) -> Path:
    """Write a fixed copy of `wheel` into `out_dir` and return its path (see module docstring)."""
    source_date_epoch()  # fail before any work when it is malformed
    _check_out_dir(Path(out_dir))
    label = _label_of(local_version)
    with open_wheel(Path(wheel)) as (archive, info):
        plan = _plan(info, label, Path(out_dir))
        changes = requirement_plan_in(archive, info, drop, keep)
        record = _provenance_dict(archive, info, provenance)
        if record is not None and changes.every:
            record["requirements"] = [change.to_json() for change in changes.every]
        versions = _guard_versions(record) if guard and record else None
        entries = _entries(archive, plan, changes, record, versions)
        return _write_atomically(entries, plan.target)


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


def _major_minor(text: str, what: str) -> tuple[int, int]:
    """(major, minor) of a version the user gave; anything but PEP 440 is a UsageError."""
    try:
        numbers = release(Version(text), 2)
    except InvalidVersion:
        numbers = ()
    if not numbers:
        msg = f"invalid {what} version {text!r}: give it like 12.9 or 2.8.0"
        raise UsageError(msg)
    return numbers[0], (numbers[1] if len(numbers) > 1 else 0)


def _plan(info: WheelInfo, label: str | None, out_dir: Path) -> _Plan:
    public = Version(info.version).public
    version = None if label is None else (f"{public}+{label}" if label else public)
    file_version = version.replace("-", "_") if version else info.file.version
    # WheelFile puts RECORD under `<name>-<version>.dist-info` from the file name, so the folder
    # must be named exactly like that or RECORD would land in a second .dist-info.
    dist_info = f"{info.file.name}-{file_version}.dist-info"
    target = out_dir / info.file.with_version(file_version)
    if target.resolve() == info.path.resolve():
        msg = (
            f"the output {target} would overwrite the input wheel: pass another --out folder "
            "(the input is never modified)"
        )
        raise WheelError(msg)
    return _Plan(info, version, dist_info, target)


def provenance_in(archive: zipfile.ZipFile, info: WheelInfo) -> dict[str, object] | None:
    """The provenance of a wheel already opened (and checked) once; None when it has none."""
    member = f"{info.dist_info}/{PROVENANCE_NAME}"
    if member not in info.members:
        return None
    try:
        data = json.loads(read_text_member(info.path, archive, member))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        msg = f"{info.path.name}: {member} is not a JSON object: rebuild the wheel with mambawin"
        raise WheelError(msg)
    return data


def _provenance_dict(
    archive: zipfile.ZipFile,
    info: WheelInfo,
    provenance: Provenance | Mapping[str, object] | None,
) -> dict[str, object] | None:
    """The caller's provenance, else the one already in the wheel (a second rewrite keeps it)."""
    if isinstance(provenance, Provenance):
        return provenance.to_dict()
    if provenance is not None:
        return dict(provenance)
    return provenance_in(archive, info)


def _guard_versions(record: Mapping[str, object]) -> tuple[str, str] | None:
    """(torch 'major.minor', CUDA 'major') the wheel was built for; None when unrecorded."""
    torch, cuda = record.get("torch_version"), record.get("cuda_version")
    if not torch or not cuda:
        return None
    torch_release, cuda_release = _major_minor(str(torch), "torch"), _major_minor(str(cuda), "CUDA")
    return f"{torch_release[0]}.{torch_release[1]}", str(cuda_release[0])


def _entries(
    archive: zipfile.ZipFile,
    plan: _Plan,
    changes: Plan,
    record: dict[str, object] | None,
    versions: tuple[str, str] | None,
) -> Iterator[Entry]:
    """(new name, bytes, original entry) for every member of the new wheel, RECORD excluded."""
    info = plan.info
    skipped = {f"{info.dist_info}/{name}" for name in (*_SIGNATURES, PROVENANCE_NAME)}
    guard_target = _guard_target(info, needed=versions is not None)
    for entry in archive.infolist():
        if entry.is_dir() or entry.filename in skipped:
            continue
        data = read_member(info.path, archive, entry.filename)
        if entry.filename == info.metadata_path:
            data = edit_metadata(data, changes, plan.version)
        elif entry.filename == guard_target:
            data = set_guard(data, versions, info.name)
        yield plan.rename(entry.filename), data, entry
    if record is not None:
        text = json.dumps(record, indent=2, sort_keys=True) + "\n"
        yield f"{plan.dist_info}/{PROVENANCE_NAME}", text.encode("utf-8"), None


def _guard_target(info: WheelInfo, *, needed: bool) -> str | None:
    """`<package>/__init__.py` of the distribution (mamba_ssm, causal_conv1d): imported first."""
    target = canonicalize_name(info.name).replace("-", "_") + "/__init__.py"
    if target in info.members:
        return target
    if needed:
        msg = (
            f"{info.path.name} has no {target} to hold the torch/CUDA import guard: "
            "rewrite it with guard=False (--no-guard)"
        )
        raise WheelError(msg)
    return None


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
    values = []
    for header in _logical_headers(raw[: _header_cut(raw)]):
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"requires-dist":
            values.append(_unfold(value))
    return values


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
    for index, header in enumerate(headers):
        name, _, value = header.partition(b":")
        key, end = name.strip().lower(), _line_end(header)
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
    return b"".join(kept) + raw[cut:]


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


def set_guard(source: bytes, versions: tuple[str, str] | None, project: str) -> bytes:
    """`__init__.py` with any old guard removed and, when versions are given, a new one added."""
    if versions is None and GUARD_BEGIN.encode() not in source:
        return source
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError:
        msg = f"the {project} __init__.py is not UTF-8: rewrite with --no-guard"
        raise WheelError(msg) from None
    lines = _without_guard(text).splitlines(keepends=True)
    if versions is None:
        return "".join(lines).encode("utf-8")
    at = _guard_line(lines)
    block = _guard_block(*versions, project)
    if at and not lines[at - 1].endswith("\n"):
        lines[at - 1] += "\n"
    return "".join([*lines[:at], block, *lines[at:]]).encode("utf-8")


def _without_guard(text: str) -> str:
    pattern = re.compile(
        rf"^{re.escape(GUARD_BEGIN)}.*?^{re.escape(GUARD_END)}[^\n]*\n?", re.MULTILINE | re.DOTALL
    )
    return pattern.sub("", text)


def _guard_line(lines: list[str]) -> int:
    """Index after the module docstring and `from __future__` imports (they must stay first)."""
    try:
        body = ast.parse("".join(lines)).body
    except SyntaxError as exc:
        msg = f"the package __init__.py does not parse ({exc.msg}): rewrite with --no-guard"
        raise WheelError(msg) from None
    at = 0
    for index, node in enumerate(body):
        is_docstring = (
            index == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        if not (is_docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__")):
            break
        at = node.end_lineno or node.lineno
    if at == 0:
        while at < min(2, len(lines)) and lines[at].startswith("#"):
            at += 1  # a shebang or `# -*- coding` line must stay first
    return at


def _guard_block(torch: str, cuda: str, project: str) -> str:
    """Self-contained lines that name both builds when torch does not match (no DLL riddles)."""
    # A wheel built against another torch minor fails with "DLL load failed while importing
    # selective_scan_cuda: The specified procedure could not be found" on Windows and
    # "undefined symbol" on Linux; a CUDA major mismatch fails to load cudart. Say it plainly.
    return f'''{GUARD_BEGIN} (added by mambawin {__version__}; set {SKIP_GUARD_ENV}=1 to skip)
def _mambawin_torch_guard():
    import os
    if os.environ.get("{SKIP_GUARD_ENV}"):
        return
    import torch
    built_torch, built_cuda = "{torch}", "{cuda}"
    found_torch = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    found_cuda = (torch.version.cuda or "none").split(".")[0]
    if (found_torch, found_cuda) != (built_torch, built_cuda):
        raise ImportError(
            "{project} was built for torch " + built_torch + " with CUDA " + built_cuda
            + ".x, but torch " + torch.__version__ + " with CUDA "
            + str(torch.version.cuda) + " is installed: install torch " + built_torch
            + " for CUDA " + built_cuda + ".x, or rebuild it with"
            + " `mambawin build --package {canonicalize_name(project)}`"
            + " (set {SKIP_GUARD_ENV}=1 to import anyway)"
        )


_mambawin_torch_guard()
del _mambawin_torch_guard
{GUARD_END}
'''


def _write_atomically(entries: Iterable[Entry], target: Path) -> Path:
    """Write through a scratch folder beside the target and move the wheel in with os.replace."""
    # WheelFile derives the .dist-info name from the file name, so the partial file gets the final
    # name inside a private scratch folder rather than a `.part` suffix.
    with staging_dir(target.parent) as scratch:
        partial = scratch / target.name
        with WheelFile(partial, "w") as out:
            for name, data, original in entries:
                out.writestr(_zip_entry(name, original), data)
        os.replace(partial, target)
    return target


def _zip_entry(name: str, original: zipfile.ZipInfo | None) -> zipfile.ZipInfo:
    """A fresh entry: SOURCE_DATE_EPOCH (else the old time) and the old permission bits."""
    keep_time = original is not None and "SOURCE_DATE_EPOCH" not in os.environ
    date_time = original.date_time if keep_time and original else get_zipinfo_datetime()
    entry = zipfile.ZipInfo(name, date_time=date_time)
    entry.compress_type = zipfile.ZIP_DEFLATED
    mode = (original.external_attr >> 16) if original else 0
    entry.external_attr = ((stat.S_IMODE(mode) or 0o644) | stat.S_IFREG) << 16
    return entry
