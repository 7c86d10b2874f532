"""Write a wheel: every entry dated, RECORD regenerated, unchanged members copied raw.

The new wheel is written through `wheel.wheelfile.WheelFile`, so RECORD is regenerated. Members a
rewrite does not change (the extension above all: 20-85 MB) are copied raw, their compressed bytes
as they are, instead of inflated and deflated again: deflating the extension was most of the
metadata step (4.7 s of mamba-ssm's on the GPU machine). Their RECORD rows are the input's sha256
rows, which open_wheel has just checked against their bytes; a member with another hash is read
through once for its sha256. The rewrite (repack.py) and the cross backend's packing step both
write through here.

Every member of a wheel written here is deflated. One larger than DEFLATE_CHUNK is deflated on
all usable CPUs (`deflate`): a native build's bdist_wheel stores its members (compile.py's
build.cfg), and this writer deflates them, because bdist_wheel deflating mamba-ssm's 84 MB
extension on one core was 4.2 s at the very end of the pair's four-arch build on the GPU machine
(docs/benchmarks.md §28), with the other cores idle.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zipfile
import zlib
from base64 import urlsafe_b64encode
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from wheel.wheelfile import WheelFile, get_zipinfo_datetime

from mambawin.errors import WheelError
from mambawin.proc import usable_cpus
from mambawin.store.atomic import write_through
from mambawin.wheel.info import record_digest
from mambawin.wheel.provenance import (
    ensure_replaceable,
)


@dataclass(frozen=True)
class RawMember:
    """A member's bytes as the new wheel stores them (deflated), with what RECORD and the ZIP
    entry say of them."""

    stored: bytes
    sha256: str  # of the uncompressed bytes, as RECORD spells it (urlsafe base64, no padding)
    size: int  # uncompressed
    crc: int  # of the uncompressed bytes


# New name, its bytes (or a member copied raw), the entry it came from.
Entry = tuple[str, "bytes | RawMember", zipfile.ZipInfo | None]


_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, ..., name length, extra length


_RAW_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


_ENCRYPTED = 0x1


_CHUNK = 1 << 20
# Deflated in chunks of this size at once (one chunk: one stream, zipfile's own bytes). The size
# is fixed, so the bytes never depend on the CPUs: each chunk is primed with the 32 KiB before it
# (deflate's window) and ends on a byte boundary (a sync flush), as pigz does, so the chunks
# joined are one valid deflate stream, within 0.1 % of one stream's size.
DEFLATE_CHUNK = 1 << 20
_WINDOW = 1 << 15


def deflate(data: bytes) -> bytes:
    """data as one raw deflate stream at zlib's default level, as zipfile deflates a member;
    larger than DEFLATE_CHUNK, its chunks are compressed on all usable CPUs (zlib lets go of the
    GIL while it compresses)."""
    if len(data) <= DEFLATE_CHUNK:
        return _chunk(memoryview(data), 0, last=True)
    view = memoryview(data)
    starts = range(0, len(data), DEFLATE_CHUNK)
    with ThreadPoolExecutor(max_workers=min(usable_cpus(), len(starts))) as pool:
        chunks = pool.map(lambda at: _chunk(view, at, last=at + DEFLATE_CHUNK >= len(data)), starts)
        return b"".join(chunks)


def _chunk(view: memoryview, at: int, *, last: bool) -> bytes:
    """The chunk at `at` deflated, primed with the window before it; the last one finishes."""
    level, method, raw = zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS
    if at:
        compressor = zlib.compressobj(level, method, raw, zdict=view[max(0, at - _WINDOW) : at])
    else:
        compressor = zlib.compressobj(level, method, raw)
    body = compressor.compress(view[at : at + DEFLATE_CHUNK])
    return body + compressor.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)


def packed(data: bytes) -> RawMember:
    """data deflated for a new wheel, with its sha256, size and CRC."""
    digest = record_digest(data).removeprefix("sha256=")
    return RawMember(deflate(data), digest, len(data), zlib.crc32(data))


def raw_member(
    path: Path,
    archive: zipfile.ZipFile,
    entry: zipfile.ZipInfo,
    recorded: tuple[str, str] | None = None,
) -> RawMember | None:
    """entry's stored bytes and sha256 (the checked RECORD row's, else read through once, its
    CRC checked), a stored (uncompressed) member deflated; None for a member that is encrypted
    or compressed in a way this copy does not keep (it is then written anew)."""
    if entry.flag_bits & _ENCRYPTED or entry.compress_type not in _RAW_METHODS:
        return None
    try:
        digest = _recorded_sha256(recorded, entry) or _sha256_of(archive, entry)
        with path.open("rb") as handle:
            handle.seek(entry.header_offset)
            signature, name_length, extra_length = _LOCAL_HEADER.unpack(
                handle.read(_LOCAL_HEADER.size)
            )
            handle.seek(name_length + extra_length, os.SEEK_CUR)
            stored = handle.read(entry.compress_size)
    except (zipfile.BadZipFile, zlib.error, EOFError, struct.error) as exc:
        msg = (
            f"{path.name}: member {entry.filename} is corrupt ({exc}): build or download the "
            "wheel again"
        )
        raise WheelError(msg) from None
    if signature != b"PK\x03\x04" or len(stored) != entry.compress_size:
        msg = (
            f"{path.name}: member {entry.filename} has no local header where its entry says: "
            "build or download the wheel again"
        )
        raise WheelError(msg)
    if entry.compress_type == zipfile.ZIP_STORED:  # its CRC was checked with its sha256
        stored = deflate(stored)
    return RawMember(stored, digest, entry.file_size, entry.CRC)


def _recorded_sha256(recorded: tuple[str, str] | None, entry: zipfile.ZipInfo) -> str | None:
    """The RECORD row's sha256 when it has one for exactly this member's size."""
    if recorded is None:
        return None
    algorithm, _, value = recorded[0].partition("=")
    if algorithm.lower() != "sha256" or recorded[1] != str(entry.file_size):
        return None
    return value.rstrip("=")


def _sha256_of(archive: zipfile.ZipFile, entry: zipfile.ZipInfo) -> str:
    digest = hashlib.sha256()
    with archive.open(entry) as stream:  # zipfile checks the CRC at the end
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")


DateTime = tuple[int, int, int, int, int, int]


def zip_date_time(epoch: int | None) -> DateTime | None:
    """A ZIP entry's date for epoch (None: no fixed date)."""
    return None if epoch is None else tuple(get_zipinfo_datetime(epoch))


class _DatedWheelFile(WheelFile):  # type: ignore[misc]
    """A WheelFile that dates the RECORD it writes on close like every other member: wheel itself
    dates it by SOURCE_DATE_EPOCH or the current time."""

    date_time: DateTime | None = None
    start_dir: int  # zipfile's: where the next member's local header goes

    def writestr(self, zinfo_or_arcname, data, compress_type=None):  # type: ignore[no-untyped-def]
        if isinstance(zinfo_or_arcname, str) and self.date_time is not None:
            zinfo_or_arcname = _zip_entry(zinfo_or_arcname, None, self.date_time)
        super().writestr(zinfo_or_arcname, data, compress_type)

    def write_raw(self, entry: zipfile.ZipInfo, raw: RawMember) -> None:
        """Add a member whose stored bytes are already made, as zipfile's own writestr would lay
        it out (zipfile has no public way to add compressed bytes as they are)."""
        entry.file_size, entry.compress_size = raw.size, len(raw.stored)
        entry.compress_type, entry.CRC = zipfile.ZIP_DEFLATED, raw.crc
        entry.flag_bits = 0  # what ZipFile._open_to_write sets on a seekable file
        zip64 = entry.file_size * 1.05 > zipfile.ZIP64_LIMIT  # zipfile's own rule
        self._writecheck(entry)
        self.fp.seek(self.start_dir)
        entry.header_offset = self.fp.tell()
        self._didModify = True
        self.fp.write(entry.FileHeader(zip64))
        self.fp.write(raw.stored)
        self.start_dir = self.fp.tell()
        self.filelist.append(entry)
        self.NameToInfo[entry.filename] = entry
        # RECORD: WheelFile.close writes what writestr would have noted for these bytes.
        self._file_hashes[entry.filename] = ("sha256", raw.sha256)
        self._file_sizes[entry.filename] = raw.size


def write_wheel(entries: Iterable[Entry], target: Path, date_time: DateTime | None) -> Path:
    """A wheel of entries, RECORD written by WheelFile, every member dated date_time (else its
    entry's date, else now), written through a scratch folder and moved in with one rename."""

    # WheelFile derives the .dist-info name from the file name: write_through hands it a path
    # with the final name inside a private scratch folder rather than a `.part` suffix.
    def write(partial: Path) -> None:
        with _DatedWheelFile(partial, "w") as out:
            out.date_time = date_time
            for name, data, original in entries:
                entry = _zip_entry(name, original, date_time)
                if isinstance(data, bytes) and len(data) > DEFLATE_CHUNK:
                    data = packed(data)  # on all CPUs; a smaller one as zipfile deflates it
                if isinstance(data, RawMember):
                    out.write_raw(entry, data)
                else:
                    out.writestr(entry, data)

    def checked(partial: Path) -> None:
        write(partial)
        # A file under the name that mambawin did not write (nor these very bytes) is someone's.
        ensure_replaceable(target, partial)

    write_through(target, checked)
    return target


def _zip_entry(
    name: str, original: zipfile.ZipInfo | None, date_time: DateTime | None
) -> zipfile.ZipInfo:
    """A fresh entry: the wheel's date (else the old one, else now) and the old permission bits,
    normalised to 0o755 (any execute bit) or 0o644: bdist_wheel copies each file's mode, which the
    build user's umask shaped (0o664 under umask 002), so two users gave two wheels of the same
    bytes otherwise (measured on the GPU machine, docs/benchmarks.md "Same bytes from any
    folder")."""
    when = date_time or (original.date_time if original else get_zipinfo_datetime())
    entry = zipfile.ZipInfo(name, date_time=when)
    entry.compress_type = zipfile.ZIP_DEFLATED
    mode = (original.external_attr >> 16) if original else 0
    entry.external_attr = (normal_mode(mode) | stat.S_IFREG) << 16
    return entry


def normal_mode(mode: int) -> int:
    """The permission bits a wheel member gets whatever the umask it was built under."""
    return 0o755 if mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH) else 0o644
