"""Open a wheel safely: check its zip, names, tags and RECORD before anyone reads a byte of it.

Every check raises WheelError with one line; nothing here writes. The file name's own rules
(its parts, its characters) are naming.py's. `metadata.py` rewrites wheels and
`gpucode.py` lists their GPU code, both through `open_wheel`.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import zipfile
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email.message import Message
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from mambawin.errors import WheelError, os_error
from mambawin.wheel.naming import WheelFileName, parse_file_name

EXTENSION_SUFFIXES = (".so", ".pyd")
_CHUNK = 1 << 20
# Bounds for a hostile wheel: mamba-ssm's METADATA is ~10 KB, its RECORD ~20 KB and it has ~100
# members; a 300 KB zip can inflate a 300 MB METADATA (3.4 GB of RAM to parse) and 30,000 members
# took a minute to check. Refused from the zip's directory, before a byte is inflated.
MAX_TEXT_MEMBER = 10 * 1024 * 1024
MAX_MEMBERS = 20_000
# A zip bomb: 3 MB that inflate to 3 GiB took 32 s of RECORD hashing before anything said no. A
# mamba-ssm wheel for every arch inflates to about 1.5 GB, at about 3:1 (CUDA fatbins); the sizes
# come from the central directory, and zipfile never inflates a member past its declared size.
MAX_INFLATED = 4 * 1024**3
MAX_RATIO = 50  # inflated : archive bytes, counted once the archive inflates past RATIO_FROM
RATIO_FROM = 64 * 1024**2
# PEP 427: md5/sha1 are too weak for RECORD; shake has no fixed digest size.
_RECORD_HASHES = hashlib.algorithms_guaranteed - {"md5", "sha1", "shake_128", "shake_256"}
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class WheelInfo:
    """What a checked wheel is: its names, version, tags and members."""

    path: Path
    file: WheelFileName
    name: str
    version: str
    dist_info: str
    members: tuple[str, ...]

    @property
    def metadata_path(self) -> str:
        return f"{self.dist_info}/METADATA"

    @property
    def record_path(self) -> str:
        return f"{self.dist_info}/RECORD"

    @property
    def extensions(self) -> tuple[str, ...]:
        """Compiled extension modules (`*.so`, `*.pyd`) in the wheel, in archive order."""
        return tuple(m for m in self.members if m.lower().endswith(EXTENSION_SUFFIXES))


def read_message(data: bytes) -> Message:
    """Parse METADATA/WHEEL bytes the way pip does (RFC 822 headers, compat32 policy)."""
    return BytesParser(policy=compat32).parsebytes(data)


@contextmanager
def open_wheel(path: Path) -> Iterator[tuple[zipfile.ZipFile, WheelInfo]]:
    """Open a wheel for reading after checking its zip, names, tags and every RECORD hash."""
    file = parse_file_name(path.name)
    if not path.is_file():
        msg = f"{path} does not exist or is not a file: pass the path of a .whl file"
        raise WheelError(msg)
    with _open_zip(path) as archive:
        members = _safe_members(path, archive)
        _check_inflated(path, archive)
        dist_info = _find_dist_info(path, members)
        info = _describe(path, archive, file, dist_info, members)
        _check_record(info, archive)
        yield archive, info


def read_wheel(path: Path) -> WheelInfo:
    """Check a wheel and describe it (names, version, tags, members)."""
    with open_wheel(path) as (_, info):
        return info


def read_member(
    path: Path, archive: zipfile.ZipFile, member: str, limit: int | None = None
) -> bytes:
    """One member's bytes (refused when over limit); a CRC or inflate failure is a WheelError."""
    size = archive.getinfo(member).file_size
    if limit is not None and size > limit:
        msg = (
            f"{path.name}: member {member} claims {size:,} bytes, over the {limit:,} a wheel's "
            "metadata may have: refusing it; the wheel is corrupt or hostile"
        )
        raise WheelError(msg)
    try:
        with archive.open(member) as stream:
            # zipfile stops at the declared size and checks the CRC, so this is bounded too.
            return stream.read()
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        msg = f"{path.name}: member {member} is corrupt ({exc}): build or download the wheel again"
        raise WheelError(msg) from None


def sha256_file(path: Path) -> str:
    """The hex sha256 of a file (a wheel's identity on an index, in a verify record)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def record_digest(data: bytes) -> str:
    """The RECORD spelling of a file's hash: `sha256=` + urlsafe base64 without padding."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


@contextmanager
def _open_zip(path: Path) -> Iterator[zipfile.ZipFile]:
    try:
        archive = zipfile.ZipFile(path)
    except OSError as exc:  # unreadable is the OS refusing (exit 10), not a corrupt wheel
        raise os_error(exc, "read the wheel") from None
    except (zipfile.BadZipFile, ValueError) as exc:
        msg = (
            f"{path.name} is not a readable zip archive ({exc}): the wheel is corrupt or "
            "truncated; build or download it again"
        )
        raise WheelError(msg) from None
    with archive:
        yield archive


def read_text_member(path: Path, archive: zipfile.ZipFile, member: str) -> bytes:
    """A dist-info text file (METADATA, WHEEL, RECORD, provenance), at most MAX_TEXT_MEMBER."""
    return read_member(path, archive, member, MAX_TEXT_MEMBER)


def _safe_members(path: Path, archive: zipfile.ZipFile) -> tuple[str, ...]:
    """Member names; refuse any that would land outside the install folder (zip-slip)."""
    names = [info.filename for info in archive.infolist()]
    if len(names) > MAX_MEMBERS:
        msg = (
            f"{path.name} has {len(names):,} members, over the {MAX_MEMBERS:,} mambawin "
            "accepts: refusing it; the wheel is corrupt or hostile"
        )
        raise WheelError(msg)
    for name in names:
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "\\")) or _DRIVE.match(name) or ".." in parts:
            msg = (
                f"{path.name} contains the unsafe path {name!r} (absolute or with '..'): "
                "refusing it; rebuild the wheel with a normal build backend"
            )
            raise WheelError(msg)
    duplicates = sorted(n for n, count in Counter(names).items() if count > 1)
    if duplicates:
        msg = f"{path.name} has duplicate entries ({duplicates[0]}): rebuild the wheel"
        raise WheelError(msg)
    return tuple(n for n in names if not n.endswith("/"))


def _check_inflated(path: Path, archive: zipfile.ZipFile) -> None:
    """Refuse a wheel whose members would inflate past MAX_INFLATED, or at over MAX_RATIO."""
    inflated = sum(info.file_size for info in archive.infolist())
    packed = max(path.stat().st_size, 1)
    if inflated > MAX_INFLATED or (inflated > RATIO_FROM and inflated > MAX_RATIO * packed):
        msg = (
            f"{path.name} inflates to {_size(inflated)} from {_size(packed)} "
            f"({inflated // packed:,}:1), over what mambawin accepts ({_size(MAX_INFLATED)} in "
            f"all, {MAX_RATIO}:1 past {_size(RATIO_FROM)}): refusing it unread; the wheel is "
            "corrupt or a zip bomb"
        )
        raise WheelError(msg)


def _size(count: int) -> str:
    """Bytes as people read them: 3.0 GiB, 3.1 MiB, 120 bytes."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _find_dist_info(path: Path, members: tuple[str, ...]) -> str:
    folders = sorted(
        {
            m.split("/", 1)[0]
            for m in members
            if m.count("/") == 1 and m.split("/", 1)[0].endswith(".dist-info")
        }
    )
    if len(folders) != 1:
        found = ", ".join(folders) or "none"
        msg = (
            f"{path.name} must have exactly one top-level .dist-info folder (found {found}): "
            "it is not a wheel built by a standard backend"
        )
        raise WheelError(msg)
    for required in ("METADATA", "WHEEL", "RECORD"):
        if f"{folders[0]}/{required}" not in members:
            msg = f"{path.name} has no {folders[0]}/{required}: the wheel is incomplete; rebuild it"
            raise WheelError(msg)
    return folders[0]


def _describe(
    path: Path,
    archive: zipfile.ZipFile,
    file: WheelFileName,
    dist_info: str,
    members: tuple[str, ...],
) -> WheelInfo:
    wheel = read_message(read_text_member(path, archive, f"{dist_info}/WHEEL"))
    _check_wheel_tags(path, wheel, file)
    metadata = read_message(read_text_member(path, archive, f"{dist_info}/METADATA"))
    name, version = metadata.get("Name"), metadata.get("Version")
    if not name or not version:
        msg = f"{path.name}: {dist_info}/METADATA has no Name or Version: rebuild the wheel"
        raise WheelError(msg)
    _check_name_and_version(path, file, str(name).strip(), str(version).strip())
    return WheelInfo(path, file, str(name).strip(), str(version).strip(), dist_info, members)


def _check_wheel_tags(path: Path, wheel: Message, file: WheelFileName) -> None:
    """The WHEEL file's Tag/Build lines must say what the file name says (pip trusts the name)."""
    tags = frozenset(str(tag).strip() for tag in wheel.get_all("Tag") or ())
    if tags != file.tags:
        msg = (
            f"{path.name}: the tags in WHEEL ({', '.join(sorted(tags)) or 'none'}) do not match "
            f"the file name ({', '.join(sorted(file.tags))}): fix the name with `wheel tags`"
        )
        raise WheelError(msg)
    build = str(wheel.get("Build") or "").strip()
    if build != file.build:
        msg = (
            f"{path.name}: WHEEL says build tag {build or 'none'!r} but the file name says "
            f"{file.build or 'none'!r}: fix the name with `wheel tags --build`"
        )
        raise WheelError(msg)


def _check_name_and_version(path: Path, file: WheelFileName, name: str, version: str) -> None:
    try:
        same_version = Version(version) == Version(file.version)
    except InvalidVersion:
        same_version = False
    if canonicalize_name(name) != canonicalize_name(file.name) or not same_version:
        msg = (
            f"{path.name}: METADATA says {name} {version}, the file name says {file.name} "
            f"{file.version}: rename the file to match METADATA"
        )
        raise WheelError(msg)


def _check_record(info: WheelInfo, archive: zipfile.ZipFile) -> None:
    """Every member must be in RECORD with the hash and size it really has (PEP 376/427)."""
    record = _read_record(info, archive)
    unsigned = {info.record_path, f"{info.record_path}.jws", f"{info.record_path}.p7s"}
    for member in info.members:
        if member in unsigned:
            continue
        if member not in record or not record[member][0]:
            msg = (
                f"{info.path.name}: {member} is not listed in RECORD: the wheel was altered; "
                "rebuild it"
            )
            raise WheelError(msg)
        _check_hash(info, archive, member, *record[member])
    missing = sorted(set(record) - set(info.members) - unsigned)
    if missing:
        msg = (
            f"{info.path.name}: RECORD lists {missing[0]} but the archive lacks it: "
            "rebuild the wheel"
        )
        raise WheelError(msg)


def checked_record(info: WheelInfo, archive: zipfile.ZipFile) -> dict[str, tuple[str, str]]:
    """RECORD's (hash, size) by member, of a wheel open_wheel opened: checked against every
    member's bytes there, so a rewrite may reuse them (repack's raw copy)."""
    return _read_record(info, archive)


def _read_record(info: WheelInfo, archive: zipfile.ZipFile) -> dict[str, tuple[str, str]]:
    text = read_text_member(info.path, archive, info.record_path).decode("utf-8", errors="replace")
    record: dict[str, tuple[str, str]] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row:
            continue
        if len(row) != 3:
            msg = f"{info.path.name}: RECORD line {number} is malformed: rebuild the wheel"
            raise WheelError(msg)
        record[row[0]] = (row[1], row[2])
    return record


def _check_hash(
    info: WheelInfo, archive: zipfile.ZipFile, member: str, hash_text: str, size: str
) -> None:
    algorithm, _, expected = hash_text.partition("=")
    algorithm = algorithm.lower()
    if algorithm not in _RECORD_HASHES:
        msg = f"{info.path.name}: RECORD uses hash {algorithm!r} for {member}: rebuild the wheel"
        raise WheelError(msg)
    digest, length = hashlib.new(algorithm), 0
    try:
        with archive.open(member) as stream:
            for chunk in iter(lambda: stream.read(_CHUNK), b""):
                digest.update(chunk)
                length += len(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        msg = f"{info.path.name}: member {member} is corrupt ({exc}): build or download it again"
        raise WheelError(msg) from None
    actual = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
    if actual != expected.rstrip("=") or (size and size != str(length)):
        msg = (
            f"{info.path.name}: {member} does not match its RECORD hash/size: the wheel was "
            "altered or damaged after it was built; rebuild it"
        )
        raise WheelError(msg)
