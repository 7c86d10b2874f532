"""Which strings in a binary are paths of the machine that built it (wheel.buildpaths)."""

from __future__ import annotations

import pytest

from mambawin.wheel.buildpaths import paths_in, scan


@pytest.mark.parametrize(
    "path",
    [
        "/tmp/mw/builds/abc/src/csrc/causal_conv1d.cpp",
        "/root/ci-tree/csrc/x.cu",
        "/home/runner/work/w/w/csrc/x.cpp",
        "/Users/me/src/x.cpp",
        "/__w/repo/repo/csrc/x.cpp",
        "C:\\Users\\runneradmin\\AppData\\Local\\mambawin\\src\\csrc\\x.cpp",
        "D:\\a\\repo\\repo\\csrc\\x.cpp",
        "Z:\\tmp\\tree\\csrc\\x.cpp",
    ],
)
def test_paths_under_homes_temp_and_ci_folders_are_found(path: str) -> None:
    data = b"\x00" + path.encode() + b"\x00" + b'"' + path.encode() + b'"'
    assert paths_in(data) == (path,)


@pytest.mark.parametrize(
    "text",
    [
        "./csrc/selective_scan/selective_scan.cpp",  # mapped by -ffile-prefix-map
        "csrc\\selective_scan\\selective_scan.cpp",  # trimmed by /d1trimfile:
        "torch/include/ATen/core/TensorBase.h",
        "/usr/local/cuda/include/cuda_runtime.h",
        "/proc/self/maps",
        "/var/tmp/x",  # /tmp/ inside a longer path is not a string's start
        "C:\\Windows\\System32\\nvcuda.dll",
        "no /tmp/ here",  # a prefix followed by no path
    ],
)
def test_mapped_paths_and_system_folders_are_not(text: str) -> None:
    assert paths_in(b"\x00" + text.encode() + b"\x00") == ()


def test_each_member_names_its_paths_once_in_order() -> None:
    found = scan(
        [
            ("a.so", b"\x00/tmp/b/x.cpp\x00/tmp/b/y.h\x00/tmp/b/x.cpp\x00"),
            ("clean.so", b"\x00./x.cpp\x00"),
        ]
    )
    assert found.found == (("a.so", ("/tmp/b/x.cpp", "/tmp/b/y.h")),)
    assert not found.ok and "a.so: /tmp/b/x.cpp, /tmp/b/y.h" in found.message(2)
    assert scan([("clean.so", b"./x.cpp")]).message(1).startswith("1 extension(s) hold no path")
