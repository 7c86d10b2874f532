"""Where a wheel came from: the provenance record in its .dist-info, the build date
(SOURCE_DATE_EPOCH) and the local version label that says what it was built for."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from packaging.version import InvalidVersion, Version

from mambawin import __version__
from mambawin.abi import DEFAULT_ABI
from mambawin.envvars import env_int
from mambawin.errors import UsageError, WheelError
from mambawin.userfile import parse_json
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
    compiler: str = ""
    abi: str = DEFAULT_ABI  # mambawin.abi: "torch", or "stable" (fits every torch >= torch_floor)
    torch_floor: str = ""  # stable builds: the oldest torch the binary loads in ("2.10")
    mambawin_version: str = __version__
    # A build passes SOURCE_DATE_EPOCH or the upstream commit's time; empty: SOURCE_DATE_EPOCH
    # (or now) when written. Nothing that changes between two builds of one key is recorded here
    # (compile times, compiler-cache hits: those are in the build folder's build.json).
    build_date: str = ""

    def to_dict(self) -> dict[str, object]:
        """The JSON-ready form, with the build date filled in."""
        data = asdict(self)
        data["patches"] = [dict(patch) for patch in self.patches]
        data["requirements"] = [dict(change) for change in self.requirements]
        data["archs"] = list(self.archs)
        data["left_out"] = list(self.left_out)
        data["build_date"] = self.build_date or build_date()
        return {"schema": 1, **data}


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


def read_provenance(wheel: Path) -> dict[str, object] | None:
    """The provenance recorded in a wheel by `rewrite_wheel`, None when it has none."""
    with open_wheel(Path(wheel)) as (archive, info):
        return provenance_in(archive, info)


def provenance_in(archive: zipfile.ZipFile, info: WheelInfo) -> dict[str, object] | None:
    """The provenance of a wheel already opened (and checked) once; None when it has none."""
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
    return data


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
