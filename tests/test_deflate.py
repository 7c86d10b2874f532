"""A large member is deflated in chunks on every usable CPU (wheel/writer.py): one valid deflate
stream, the same bytes whatever the CPUs, zipfile's own bytes for one chunk or less."""

from __future__ import annotations

import random
import zipfile
import zlib
from pathlib import Path

import pytest

from mambawin.wheel import writer


def data(size: int) -> bytes:
    """Compressible, with matches across chunk boundaries (a repeated block longer than one)."""
    pick = random.Random(28)
    block = bytes(pick.getrandbits(8) for _ in range(40_000))
    words = [b"selective_scan", b"\x00\x00\x01", b"sm_90", block[:300]]
    out = bytearray(block)
    while len(out) < size:
        out += pick.choice(words)
    return bytes(out[:size])


def one_stream(payload: bytes) -> bytes:
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(payload) + compressor.flush()


@pytest.mark.parametrize("size", [0, 1, writer.DEFLATE_CHUNK])
def test_one_chunk_or_less_is_zipfiles_own_stream(size: int) -> None:
    payload = data(size)
    assert writer.deflate(payload) == one_stream(payload)


@pytest.mark.parametrize("size", [writer.DEFLATE_CHUNK + 1, 3 * writer.DEFLATE_CHUNK + 12_345])
def test_chunks_make_one_stream_of_the_same_bytes(size: int) -> None:
    payload = data(size)
    packed = writer.deflate(payload)
    assert zlib.decompress(packed, -zlib.MAX_WBITS) == payload
    assert len(packed) <= len(one_stream(payload)) * 1.001 + 64


def test_the_bytes_do_not_depend_on_the_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    payload = data(3 * writer.DEFLATE_CHUNK)
    monkeypatch.setattr(writer, "usable_cpus", lambda: 1)
    one = writer.deflate(payload)
    monkeypatch.setattr(writer, "usable_cpus", lambda: 8)
    assert writer.deflate(payload) == one


def test_a_large_member_is_written_deflated_with_its_crc(tmp_path: Path) -> None:
    payload = data(2 * writer.DEFLATE_CHUNK + 7)
    target = tmp_path / "demo-1.0-py3-none-any.whl"
    writer.write_wheel([("demo/big.bin", payload, None)], target, (2024, 1, 2, 3, 4, 6))
    with zipfile.ZipFile(target) as archive:
        entry = archive.getinfo("demo/big.bin")
        assert entry.compress_type == zipfile.ZIP_DEFLATED
        assert archive.testzip() is None
        assert archive.read("demo/big.bin") == payload
