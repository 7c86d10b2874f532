"""The metadata rewrite copies unchanged members raw (issue 27): their compressed bytes as they
are, RECORD still right, the wheel still byte-reproducible and accepted by wheel and pip."""

from __future__ import annotations

import csv
import io
import random
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
from test_metadata import SO, TAG, metadata_bytes, sha256
from wheel.wheelfile import WheelFile

from mambawin.errors import WheelError
from mambawin.wheel.repack import rewrite_wheel

DIST = "mamba_ssm-2.2.6.dist-info"
EPOCH = 1_700_000_000
WHEEL_FILE = f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: {TAG}\n\n"
LEVEL = "compress_level" if hasattr(zipfile.ZipInfo, "compress_level") else "_compresslevel"


def library_bytes() -> bytes:
    """Compressible but not trivial: deflate's level 1 and its default give different bytes."""
    words = [b"selective", b"scan", b"fwd", b"bwd", b"kernel", b"\x00\x01", b"sm_90"]
    pick = random.Random(27)
    return b"\x7fELF" + b"".join(pick.choice(words) for _ in range(60_000))


def fast_wheel(folder: Path, umask: int = 0o022) -> Path:
    """A wheel whose library is deflated at level 1 and whose data file is stored: a rewrite
    that deflated them again would give other bytes. Its members' modes are those a build under
    umask would give (the library executable)."""
    path = folder / f"mamba_ssm-2.2.6-{TAG}.whl"
    with WheelFile(path, "w") as out:
        members = [
            ("mamba_ssm/__init__.py", b'__version__ = "2.2.6"\n', zipfile.ZIP_DEFLATED, None),
            (SO, library_bytes(), zipfile.ZIP_DEFLATED, 1),
            ("mamba_ssm/table.bin", bytes(range(256)) * 64, zipfile.ZIP_STORED, None),
            (f"{DIST}/METADATA", metadata_bytes(["torch"]), zipfile.ZIP_DEFLATED, None),
            (
                f"{DIST}/WHEEL",
                WHEEL_FILE.encode(),
                zipfile.ZIP_DEFLATED,
                None,
            ),
        ]
        for name, data, method, level in members:
            entry = zipfile.ZipInfo(name, date_time=(2024, 1, 2, 3, 4, 6))
            entry.compress_type = method
            mode = (0o777 if name == SO else 0o666) & ~umask
            entry.external_attr = mode << 16
            if level is not None:  # ZipInfo.compress_level since Python 3.13
                setattr(entry, LEVEL, level)
            out.writestr(entry, data)
    return path


def stored_bytes(wheel: Path, name: str) -> tuple[int, bytes]:
    """(method, the member's bytes as stored), read from its local header by hand."""
    with zipfile.ZipFile(wheel) as archive:
        entry = archive.getinfo(name)
    raw = wheel.read_bytes()
    start = entry.header_offset
    assert raw[start : start + 4] == b"PK\x03\x04"
    name_length, extra_length = struct.unpack("<HH", raw[start + 26 : start + 30])
    data = start + 30 + name_length + extra_length
    return entry.compress_type, raw[data : data + entry.compress_size]


def test_unchanged_members_keep_their_stored_bytes(tmp_path: Path) -> None:
    wheel = fast_wheel(tmp_path)
    fixed = rewrite_wheel(wheel, tmp_path / "out", local_version="cu130", date_epoch=EPOCH)

    for name in (SO, "mamba_ssm/__init__.py"):
        assert stored_bytes(fixed, name) == stored_bytes(wheel, name), name
    with zipfile.ZipFile(wheel) as archive:
        before = archive.getinfo(SO)
    with zipfile.ZipFile(fixed) as archive:
        after = archive.getinfo(SO)
        assert archive.testzip() is None  # every CRC holds
    assert (after.CRC, after.file_size, after.date_time) == (
        before.CRC,
        before.file_size,
        zipfile.ZipInfo("x", date_time=after.date_time).date_time,
    )
    assert after.date_time != before.date_time  # dated like every member of the rewrite


def test_a_stored_member_is_deflated_as_zipfile_deflates(tmp_path: Path) -> None:
    """bdist_wheel stores a native build's members (build.cfg); the rewrite deflates them, a
    member of one chunk or less into zipfile's own bytes."""
    wheel = fast_wheel(tmp_path)
    fixed = rewrite_wheel(wheel, tmp_path / "out", local_version="cu130", date_epoch=EPOCH)

    table = bytes(range(256)) * 64
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert stored_bytes(fixed, "mamba_ssm/table.bin") == (
        zipfile.ZIP_DEFLATED,
        compressor.compress(table) + compressor.flush(),
    )
    with zipfile.ZipFile(fixed) as archive:
        assert archive.read("mamba_ssm/table.bin") == table


def test_a_stored_member_that_fails_its_crc_is_refused(tmp_path: Path) -> None:
    wheel = fast_wheel(tmp_path)
    _, stored = stored_bytes(wheel, "mamba_ssm/table.bin")
    data = bytearray(wheel.read_bytes())
    data[data.find(stored) + 100] ^= 0xFF
    wheel.write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(WheelError, match=r"member mamba_ssm/table\.bin is corrupt"):
        rewrite_wheel(wheel, out, local_version="cu130")
    assert not out.exists() or not list(out.iterdir())


def test_record_is_right_for_raw_members_and_wheel_checks_it(tmp_path: Path) -> None:
    fixed = rewrite_wheel(fast_wheel(tmp_path), tmp_path / "out", local_version="cu130")
    with WheelFile(fixed) as archive:  # reading to the end checks each RECORD hash
        contents = {name: archive.read(name) for name in archive.namelist()}
    record_name = next(n for n in contents if n.endswith(".dist-info/RECORD"))
    rows = {row[0]: row[1:] for row in csv.reader(io.StringIO(contents[record_name].decode()))}
    assert contents[SO] == library_bytes()
    assert rows[SO] == [f"sha256={sha256(library_bytes())}", str(len(library_bytes()))]
    assert set(rows) == set(contents)


def test_the_raw_copy_is_byte_reproducible(tmp_path: Path) -> None:
    wheel = fast_wheel(tmp_path)
    first = rewrite_wheel(wheel, tmp_path / "a", local_version="cu130", date_epoch=EPOCH)
    second = rewrite_wheel(wheel, tmp_path / "b", local_version="cu130", date_epoch=EPOCH)
    assert first.read_bytes() == second.read_bytes()


def test_pip_installs_the_rewritten_wheel(tmp_path: Path) -> None:
    fixed = rewrite_wheel(fast_wheel(tmp_path), tmp_path / "out", local_version="cu130")
    target = tmp_path / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(fixed),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (target / SO).read_bytes() == library_bytes()


def test_a_corrupt_member_is_refused_and_nothing_written(tmp_path: Path) -> None:
    wheel = fast_wheel(tmp_path)
    _, stored = stored_bytes(wheel, SO)
    data = bytearray(wheel.read_bytes())
    at = data.find(stored) + len(stored) // 2
    data[at] ^= 0xFF
    wheel.write_bytes(bytes(data))
    out = tmp_path / "out"
    with pytest.raises(WheelError, match=f"member {SO} is corrupt"):
        rewrite_wheel(wheel, out, local_version="cu130")
    assert not out.exists() or not list(out.iterdir())


def test_the_build_users_umask_does_not_reach_the_wheel(tmp_path: Path) -> None:
    """bdist_wheel copies each file's mode: a build under umask 002 gave 0o664/0o775 members and
    so other bytes than the same build under 022 (two users on the GPU machine). The rewrite
    gives every member 0o644, or 0o755 where any execute bit was set."""
    wheels = []
    for umask in (0o022, 0o002):
        (tmp_path / f"umask{umask:o}").mkdir()
        built = fast_wheel(tmp_path / f"umask{umask:o}", umask)
        out = tmp_path / f"out{umask:o}"
        wheels.append(rewrite_wheel(built, out, local_version="cu130", date_epoch=EPOCH))
    assert wheels[0].read_bytes() == wheels[1].read_bytes()
    with zipfile.ZipFile(wheels[1]) as archive:
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
    assert modes[SO] == 0o755
    assert {mode for name, mode in modes.items() if name != SO} == {0o644}
