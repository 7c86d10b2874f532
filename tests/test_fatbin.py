"""wheel.gpucode.list_gpu_code: real nvcc output read by cuobjdump and by the pure-Python parser."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from mambawin import proc
from mambawin.errors import ToolchainError, WheelError
from mambawin.wheel import gpucode as fatbin
from mambawin.wheel.gpucode import GpuCode, gpu_code_in_wheel, list_gpu_code, parse_cuobjdump

KERNEL = """
__global__ void add(float* x, float v) { x[threadIdx.x] += v; }
extern "C" void launch(float* x) { add<<<1, 32>>>(x, 1.0f); }
"""
# Each build takes about 5 s with nvcc 13.0 on two cores, so they stay in the normal suite.
BUILDS = {
    "sm90": (["arch=compute_90,code=sm_90"], ("sm_90",), ()),
    "sm80ptx": (
        [
            "arch=compute_80,code=sm_80",
            "arch=compute_80,code=compute_80",
            "arch=compute_90a,code=sm_90a",
        ],
        ("sm_80", "sm_90a"),
        ("compute_80",),
    ),
}
unix_only = pytest.mark.skipif(os.name == "nt", reason="fake tools here are POSIX shell scripts")


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny CUDA extension modules compiled by the real nvcc; skipped when nvcc is absent."""
    if proc.which("nvcc") is None:
        pytest.skip("nvcc is not on PATH")
    folder = tmp_path_factory.mktemp("cuda")
    (folder / "k.cu").write_text(KERNEL)
    result = {}
    for name, (gencodes, _, _) in BUILDS.items():
        flags = [arg for code in gencodes for arg in ("-gencode", code)]
        proc.run(
            ["nvcc", "-shared", "-Xcompiler", "-fPIC", "-o", f"{name}.so", "k.cu", *flags],
            cwd=folder,
            timeout=300,
        )
        result[name] = folder / f"{name}.so"
    return result


def nv_fatbin_section(binary: Path, tmp_path: Path) -> bytes:
    """The `.nv_fatbin` section as binutils sees it (independent of the parser under test)."""
    if proc.which("objcopy") is None:
        pytest.skip("objcopy is not on PATH")
    blob = tmp_path / f"{binary.stem}.fatbin"
    proc.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", str(binary), str(blob)])
    return blob.read_bytes()


def synthetic_pe(sections: dict[bytes, bytes]) -> bytes:
    """Minimal PE32+ DLL: DOS header, PE signature, COFF header, stub optional header, sections."""
    pe_at, optional_size, align = 0x80, 240, 0x200
    dos = b"MZ" + bytes(0x3A) + struct.pack("<I", pe_at) + bytes(pe_at - 0x40)
    coff = b"PE\0\0" + struct.pack(
        "<HHIIIHH", 0x8664, len(sections), 0, 0, 0, optional_size, 0x2022
    )
    optional = struct.pack("<H", 0x20B) + bytes(optional_size - 2)
    headers_end = pe_at + len(coff) + optional_size + 40 * len(sections)
    raw_at = -(-headers_end // align) * align
    table, body = b"", b""
    for index, (name, data) in enumerate(sections.items()):
        size = -(-len(data) // align) * align
        table += struct.pack(
            "<8sIIIIIIHHI",
            name,
            len(data),
            0x1000 * (index + 1),
            size,
            raw_at + len(body),
            0,
            0,
            0,
            0,
            0x40000040,
        )
        body += data + bytes(size - len(data))
    head = dos + coff + optional + table
    return head + bytes(raw_at - len(head)) + body


def hand_made_fatbin(*entries: tuple[int, int, int]) -> bytes:
    """One fatbin container holding (kind, arch, flags) entries with 8-byte payloads."""
    payload = b"".join(
        struct.pack("<HHIQIIII", kind, 0x101, 64, 8, 0, 0, 0x10008, arch)
        + bytes(8)
        + struct.pack("<Q", flags)
        + bytes(16)
        + b"payload!"
        for kind, arch, flags in entries
    )
    return struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, len(payload)) + payload


# ---- the pure-Python parser on real nvcc output ----------------------------------------------


@pytest.mark.parametrize("name", list(BUILDS))
def test_fatbin_parser_reads_what_nvcc_built(built: dict[str, Path], name: str) -> None:
    _, sass, ptx = BUILDS[name]
    assert list_gpu_code(built[name], method="fatbin") == GpuCode(sass, ptx, "fatbin")


@pytest.mark.parametrize("name", list(BUILDS))
def test_fatbin_parser_agrees_with_cuobjdump(built: dict[str, Path], name: str) -> None:
    if fatbin.find_cuobjdump() is None:
        pytest.skip("no cuobjdump (pip install nvidia-cuda-cuobjdump)")
    by_tool = list_gpu_code(built[name], method="cuobjdump")
    by_parser = list_gpu_code(built[name], method="fatbin")
    assert by_tool.method == "cuobjdump"
    assert (by_tool.sass, by_tool.ptx) == (by_parser.sass, by_parser.ptx) == BUILDS[name][1:]


def test_pe_section_is_read_like_the_elf_one(built: dict[str, Path], tmp_path: Path) -> None:
    blob = nv_fatbin_section(built["sm80ptx"], tmp_path)
    pyd = tmp_path / "selective_scan_cuda.cp311-win_amd64.pyd"
    pyd.write_bytes(synthetic_pe({b".text": b"\xc3" * 16, b".nv_fatb": blob}))
    assert list_gpu_code(pyd, method="fatbin") == GpuCode(
        ("sm_80", "sm_90a"), ("compute_80",), "fatbin"
    )


# ---- the parser on hand-made input (no nvcc needed) -------------------------------------------


def test_hand_made_pe_with_three_digit_and_arch_specific_targets(tmp_path: Path) -> None:
    blob = hand_made_fatbin((2, 120, 0x11), (2, 100, 0x100011), (1, 86, 0x8011), (2, 86, 0x11))
    pyd = tmp_path / "x.pyd"
    pyd.write_bytes(synthetic_pe({b".nv_fatb": b"\0" * 8 + blob + b"\0" * 8}))
    assert list_gpu_code(pyd, method="fatbin") == GpuCode(
        ("sm_86", "sm_100a", "sm_120"), ("compute_86",), "fatbin"
    )


def test_a_magic_number_by_chance_is_not_a_container(tmp_path: Path) -> None:
    fake = struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 7, 16, 64) + bytes(64)  # version 7
    huge = struct.pack("<IHHQ", fatbin.FATBIN_MAGIC, 1, 16, 1 << 40)  # runs past the end
    real = hand_made_fatbin((2, 89, 0x11))
    pyd = tmp_path / "x.pyd"
    pyd.write_bytes(synthetic_pe({b".nv_fatb": fake + huge + real}))
    assert list_gpu_code(pyd, method="fatbin").sass == ("sm_89",)


def test_a_binary_without_device_code_lists_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain.pyd"
    plain.write_bytes(synthetic_pe({b".text": b"\xc3" * 64}))
    assert list_gpu_code(plain, method="fatbin") == GpuCode((), (), "fatbin")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"just text, not a binary", "neither an ELF"),
        (b"MZ" + bytes(0x3A) + struct.pack("<I", 0x40) + b"NOPE", "no PE header"),
        (
            b"\x7fELF\x02\x01"
            + bytes(0x22)
            + struct.pack("<Q", 1 << 30)
            + bytes(10)
            + struct.pack("<HHH", 64, 3, 1),
            "truncated",
        ),  # section table far past the end
        (b"\x7fELF", "truncated"),
    ],
)
def test_unreadable_binaries_are_one_line_wheel_errors(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.so"
    path.write_bytes(content)
    with pytest.raises(WheelError, match=message) as caught:
        list_gpu_code(path, method="fatbin")
    assert "\n" not in str(caught.value)


def test_a_missing_binary_is_a_wheel_error(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match="does not exist"):
        list_gpu_code(tmp_path / "gone.so")


# ---- cuobjdump: finding it, reading its output ------------------------------------------------


def test_cuobjdump_lines_are_parsed_including_three_digit_archs() -> None:
    # What cuobjdump 13.5 printed here for a module built with sm_80, compute_80, sm_90a, sm_100f.
    text = (
        "ELF file    1: k80.1.sm_80.cubin\nELF file    2: k80.2.sm_90a.cubin\n"
        "ELF file    3: k80.3.sm_100.cubin\nPTX file    1: k80.1.sm_80.ptx\n"
        "ELF file    4: k80.4.sm_80.cubin\n"
    )
    assert parse_cuobjdump(text) == (("sm_80", "sm_90a", "sm_100"), ("compute_80",))


def fake_tool(folder: Path, script: str) -> Path:
    (folder / "bin").mkdir(parents=True)
    tool = folder / "bin" / "cuobjdump"
    tool.write_text("#!/bin/sh\n" + script)
    tool.chmod(0o755)
    return tool


@unix_only
def test_cuobjdump_is_found_in_cuda_home_and_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = fake_tool(
        tmp_path / "cuda",
        "echo 'ELF file    1: m.1.sm_86.cubin'\necho 'PTX file    1: m.1.sm_86.ptx'\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert fatbin.find_cuobjdump() == str(tool)
    binary = tmp_path / "m.so"
    binary.write_bytes(b"\x7fELF")
    assert list_gpu_code(binary) == GpuCode(("sm_86",), ("compute_86",), "cuobjdump")


@unix_only
def test_cuobjdump_without_device_code_is_empty_and_its_failure_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(
        tmp_path / "cuda",
        'case "$3" in *plain*) echo "cuobjdump info    : File \'$3\' '
        'does not contain device code" >&2; exit 255;; esac\n'
        'echo "cuobjdump fatal   : Could not open input file" >&2; exit 1\n',
    )
    monkeypatch.setenv("PATH", str(tmp_path / "cuda" / "bin"))
    (tmp_path / "plain.so").write_bytes(b"\x7fELF")
    (tmp_path / "broken.so").write_bytes(b"\x7fELF")
    assert list_gpu_code(tmp_path / "plain.so") == GpuCode((), (), "cuobjdump")
    with pytest.raises(WheelError, match="Could not open input file"):
        list_gpu_code(tmp_path / "broken.so")


@unix_only
def test_a_pe_image_linux_cuobjdump_cannot_read_is_read_by_the_parser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linux's cuobjdump says a cross-built .pyd "does not contain device code" (it reads ELF
    only), and verify's static step then failed a good Windows wheel for holding none."""
    fake_tool(
        tmp_path / "cuda",
        "echo \"cuobjdump info    : File '$3' does not contain device code\" >&2; exit 255\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "cuda" / "bin"))
    pyd = tmp_path / "causal_conv1d_cuda_stable.pyd"
    pyd.write_bytes(synthetic_pe({b".nv_fatb": hand_made_fatbin((2, 90, 0x11))}))
    assert list_gpu_code(pyd) == GpuCode(("sm_90",), (), "fatbin")
    assert list_gpu_code(pyd, method="cuobjdump") == GpuCode((), (), "cuobjdump")  # as asked
    plain = tmp_path / "plain.pyd"
    plain.write_bytes(synthetic_pe({b".text": b"\xc3" * 64}))
    assert list_gpu_code(plain) == GpuCode((), (), "fatbin")  # neither finds any


def test_asking_for_cuobjdump_when_there_is_none_is_a_toolchain_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(fatbin, "_cuobjdump_from_pip", lambda names: None)
    (tmp_path / "m.pyd").write_bytes(synthetic_pe({b".nv_fatb": hand_made_fatbin((2, 86, 0))}))
    with pytest.raises(ToolchainError, match="nvidia-cuda-cuobjdump"):
        list_gpu_code(tmp_path / "m.pyd", method="cuobjdump")
    assert list_gpu_code(tmp_path / "m.pyd") == GpuCode(("sm_86",), (), "fatbin")


# ---- wheels -----------------------------------------------------------------------------------


def test_every_extension_module_in_a_wheel_is_listed(tmp_path: Path) -> None:
    src = tmp_path / "src"
    dist = src / "mamba_ssm-2.2.6.dist-info"
    dist.mkdir(parents=True)
    (src / "mamba_ssm").mkdir()
    (src / "mamba_ssm" / "__init__.py").write_text("")
    (src / "selective_scan_cuda.cp311-win_amd64.pyd").write_bytes(
        synthetic_pe({b".nv_fatb": hand_made_fatbin((2, 86, 0x11), (1, 86, 0x8011))})
    )
    (src / "mamba_ssm" / "other_cuda.pyd").write_bytes(
        synthetic_pe({b".nv_fatb": hand_made_fatbin((2, 120, 0x11))})
    )
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mamba_ssm\nVersion: 2.2.6\n\n")
    (dist / "WHEEL").write_text("Wheel-Version: 1.0\nTag: cp311-cp311-win_amd64\n\n")
    wheel = tmp_path / "mamba_ssm-2.2.6-cp311-cp311-win_amd64.whl"
    with WheelFile(wheel, "w") as out:
        out.write_files(str(src))
    assert gpu_code_in_wheel(wheel, method="fatbin") == {
        "mamba_ssm/other_cuda.pyd": GpuCode(("sm_120",), (), "fatbin"),
        "selective_scan_cuda.cp311-win_amd64.pyd": GpuCode(("sm_86",), ("compute_86",), "fatbin"),
    }
