"""Where a wheel came from: the provenance record in its .dist-info, the build date
(SOURCE_DATE_EPOCH) and the local version label that says what it was built for."""

from __future__ import annotations

import filecmp
import os
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from packaging.version import InvalidVersion, Version

from mambawin import __version__
from mambawin.abi import DEFAULT_ABI, STABLE_FLOOR
from mambawin.errors import MambawinError, UsageError, WheelError
from mambawin.secret_urls import public_repo
from mambawin.userfile import env_int, parse_json
from mambawin.versions import release
from mambawin.wheel.info import (
    WheelInfo,
    open_wheel,
    read_text_member,
)

PROVENANCE_NAME = "mambawin-provenance.json"


NO_LABEL = "none"  # --local-version none: the public version, no +label


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
    compiler: str = ""  # each tool labelled with its own version: "cl.exe 19.44.35207 (MSVC ..."
    # The torch whose headers the binary was compiled against ("2.11.0"); a stable build's may be
    # newer than its floor (the audit then proves the floor from the binary's imports). Empty in
    # a record written before it was kept.
    torch_headers: str = ""
    abi: str = DEFAULT_ABI  # mambawin.abi: "torch", or "stable" (fits every torch >= torch_floor)
    torch_floor: str = ""  # stable builds: the oldest torch the binary loads in ("2.10")
    mambawin_version: str = __version__
    # A build passes SOURCE_DATE_EPOCH or the upstream commit's time; empty: SOURCE_DATE_EPOCH
    # (or now) when written. Nothing that changes between two builds of one key is recorded here
    # (compile times, compiler-cache hits: those are in the build folder's build.json).
    build_date: str = ""
    # What the tree was made from: {"kind": "sdist", "file", "sha256", "index"} for a release's
    # sdist from the package index, {"kind": "git", "commit"} for a git checkout; {}: a folder.
    source: Mapping[str, str] = field(default_factory=dict)
    # "<unit>: <gencode>, ..." per unit whose archs shared nvcc front-end passes (a SASS proof),
    # sorted; () when every unit had a pass per arch (then not written, as before grouping).
    shared_passes: tuple[str, ...] = ()
    # The record as the wheel stores it, unknown keys kept ({} for one made here): what a rewrite
    # carries over and `metadata --json` and the index show verbatim.
    stored: Mapping[str, object] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready form, with the build date filled in."""
        data = asdict(self)
        del data["stored"]
        data["patches"] = [dict(patch) for patch in self.patches]
        data["requirements"] = [dict(change) for change in self.requirements]
        data["archs"] = list(self.archs)
        data["left_out"] = list(self.left_out)
        data["source"] = dict(self.source)
        data["shared_passes"] = list(self.shared_passes)
        if not self.shared_passes:
            del data["shared_passes"]  # a record without grouping keeps its bytes of before
        data["build_date"] = self.build_date or build_date()
        return {"schema": 1, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, object] | None) -> Provenance:
        """The record as a wheel stores it (`to_dict`'s form); unknown keys are ignored and a
        missing one keeps its default, so an older mambawin's record reads too."""
        data = data or {}
        text = {f: str(data[f]) for f in _TEXT_FIELDS if data.get(f) is not None}
        return cls(
            **text,
            patches=tuple(_mappings(data.get("patches"))),
            left_out=tuple(str(x) for x in _items(data.get("left_out"))),
            requirements=tuple(_mappings(data.get("requirements"))),
            archs=tuple(str(x) for x in _items(data.get("archs"))),
            source=next(iter(_mappings([data.get("source")])), {}),
            shared_passes=tuple(str(x) for x in _items(data.get("shared_passes"))),
            stored=dict(data),
        )

    @property
    def is_stable(self) -> bool:
        """A torch stable-ABI build (mambawin.abi): it loads in every torch from its floor on."""
        return (self.abi or DEFAULT_ABI) == "stable"

    @property
    def floor(self) -> Version:
        """The oldest torch a stable build loads in: torch_floor, else STABLE_FLOOR (a record
        written before the floor was); WheelError when the record's is no version."""
        text = self.torch_floor or str(STABLE_FLOOR)
        try:
            return Version(text)
        except InvalidVersion:
            msg = f"the provenance's torch_floor {text!r} is not a version: rebuild the wheel"
            raise WheelError(msg) from None

    @property
    def label(self) -> str | None:
        """The local version label, one rule for every backend: `cu130.stable.torch2.10` (stable:
        CUDA and floor), `cu129torch2.8` (CUDA and torch); None when the record lacks them."""
        if not self.cuda_version:
            return None
        if self.is_stable:
            return stable_label(self.cuda_version, str(self.floor))
        return (
            local_version_label(self.cuda_version, self.torch_version)
            if self.torch_version
            else None
        )

    @property
    def torch_target(self) -> str:
        """What torch the binary was built for, as a user reads it: `>= 2.10` for a stable
        build, `2.8.0` for one torch, `?` when unrecorded."""
        if self.is_stable:
            return f">= {self.floor}"
        return self.torch_version or "?"


# The fields a record stores as text (every `str` field), read as text by from_dict.
_TEXT_FIELDS = tuple(f.name for f in fields(Provenance) if f.type == "str")


def _items(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _mappings(value: object) -> list[Mapping[str, str]]:
    return [
        {str(k): str(v) for k, v in item.items()}
        for item in _items(value)
        if isinstance(item, Mapping)
    ]


def record(
    checkout: Source,
    *,
    patches: tuple[Mapping[str, str], ...],
    left_out: tuple[str, ...] = (),
    archs: tuple[str, ...],
    torch_version: str = "",
    cuda_version: str,
    compiler: str,
    torch_headers: str = "",
    abi: str,
    epoch: int | None,
    source: Mapping[str, str] | None = None,
    shared_passes: tuple[str, ...] = (),
) -> Provenance:
    """The provenance of a build, written here for every backend (native, cross).

    build_date is the epoch the wheel is dated by (SOURCE_DATE_EPOCH, else the upstream commit's
    time, as reproducible builds do), so two builds of one commit write the same bytes; only a
    tree with no commit (`--source` outside git) falls back to the time of writing. The
    repository is recorded as secret_urls.public_repo says (never a local folder, never a
    credential)."""
    return Provenance(
        upstream_repo=public_repo(checkout.repo),
        ref=checkout.ref or "",
        commit=checkout.commit or "",
        version=checkout.version,
        patches=patches,
        left_out=left_out,
        archs=archs,
        torch_version=torch_version,
        cuda_version=cuda_version,
        compiler=compiler,
        torch_headers=torch_headers or torch_version,
        abi=abi,
        torch_floor=str(STABLE_FLOOR) if abi == "stable" else "",
        mambawin_version=__version__,
        build_date=iso_date(epoch) if epoch is not None else "",
        source=dict(source or {}),
        shared_passes=shared_passes,
    )


class Source(Protocol):
    """Where a build's tree came from (fetch.upstream.Checkout has these)."""

    @property
    def repo(self) -> str: ...
    @property
    def ref(self) -> str | None: ...
    @property
    def commit(self) -> str | None: ...
    @property
    def version(self) -> str: ...


def build_date() -> str:
    """ISO-8601 UTC build time: SOURCE_DATE_EPOCH when set (reproducible builds), else now."""
    epoch = source_date_epoch()
    moment = (
        datetime.fromtimestamp(epoch, timezone.utc)
        if epoch is not None
        else datetime.now(timezone.utc)
    )
    return moment.replace(microsecond=0).isoformat()


def iso_date(epoch: int) -> str:
    """An epoch as build_date writes it."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat()


# A ZIP entry's date is 1980-01-01 to 2107-12-31 (DOS date fields): a wheel cannot say another.


ZIP_EPOCHS = (315532800, 4354819199)


def source_date_epoch() -> int | None:
    """SOURCE_DATE_EPOCH as seconds, None when unset; UsageError when it is not a number, or a
    time a wheel (a ZIP file) cannot hold."""
    return env_int(
        "SOURCE_DATE_EPOCH",
        minimum=ZIP_EPOCHS[0],
        maximum=ZIP_EPOCHS[1],
        unit="seconds",
        example=1700000000,
        note=" (1980-01-01 to 2107-12-31: what a wheel's ZIP dates can hold; `git log -1 "
        "--format=%ct` gives one)",
    )


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
    cuda = major_minor(cuda_version, "CUDA")
    torch = major_minor(torch_version, "torch")
    return normalize_local_label(f"cu{cuda[0]}{cuda[1]}torch{torch[0]}.{torch[1]}{extra}")


def stable_label(cuda_version: str, floor: str) -> str:
    """The label of a stable-ABI wheel: ('13.0', '2.10') → 'cu130.stable.torch2.10'.

    "stable" says the binary is torch's stable ABI; torch2.10 is the oldest torch it loads in
    (every newer one does too), unlike a torch-ABI label's cu130torch2.10, which is the only one.
    """
    cuda = major_minor(cuda_version, "CUDA")
    torch = major_minor(floor, "torch")
    return normalize_local_label(f"cu{cuda[0]}{cuda[1]}.stable.torch{torch[0]}.{torch[1]}")


def read_provenance(wheel: Path) -> Provenance | None:
    """The provenance recorded in a wheel by `rewrite_wheel`, None when it has none."""
    with open_wheel(Path(wheel)) as (archive, info):
        return provenance_in(archive, info)


def provenance_in(archive: zipfile.ZipFile, info: WheelInfo) -> Provenance | None:
    """The provenance of a wheel already opened (and checked) once, parsed here, where the wheel
    is read, and carried typed from then on; None when it has none."""
    member = f"{info.dist_info}/{PROVENANCE_NAME}"
    if member not in info.members:
        return None
    try:
        data = parse_json(read_text_member(info.path, archive, member))
    except ValueError:
        data = None
    if not isinstance(data, dict):
        msg = f"{info.path.name}: {member} is not a JSON object: rebuild the wheel with mambawin"
        raise WheelError(msg)
    return Provenance.from_dict(data)


def major_minor(text: str, what: str) -> tuple[int, int]:
    """(major, minor) of a version the user gave; anything but PEP 440 is a UsageError."""
    try:
        numbers = release(Version(text), 2)
    except InvalidVersion:
        numbers = ()
    if not numbers:
        msg = f"invalid {what} version {text!r}: give it like 12.9 or 2.8.0"
        raise UsageError(msg)
    return numbers[0], (numbers[1] if len(numbers) > 1 else 0)


def ensure_replaceable(target: Path, candidate: Path | None = None) -> None:
    """target may be written over: nothing is there, a wheel whose provenance says mambawin wrote
    it (an earlier build of the same name), or the very bytes of candidate (a rerun of `metadata`,
    whose wheels need carry no provenance). Anything else is someone else's file and is refused,
    so a build or a rewrite never replaces a wheel it did not make."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return
    except OSError:
        mode = 0  # unreadable: treated as not ours
    if stat.S_ISREG(mode):
        if candidate is not None and _same_bytes(target, candidate):
            return
        try:
            if read_provenance(target) is not None:
                return
        except (MambawinError, OSError):
            pass  # not a wheel, or not one mambawin wrote
    msg = (
        f"{target} is already there and is not a wheel mambawin wrote: move it away, or "
        "choose another --out"
    )
    raise UsageError(msg)


def _same_bytes(one: Path, other: Path) -> bool:
    try:
        return filecmp.cmp(one, other, shallow=False)
    except OSError:
        return False
