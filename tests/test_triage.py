"""The first real compiler error, found in REAL recorded Windows build logs (fixtures/windows)."""

from __future__ import annotations

import pytest
from conftest import recorded

from mambawin.builder.triage import first_error, wrap_width

C2975 = "build-error-bool-switch-c2975-mamba-issue12.txt"


@pytest.mark.parametrize(
    ("fixture", "file_end", "line", "code", "message_start"),
    [
        (
            C2975,
            "selective_scan_bwd_kernel.cuh",
            493,
            "C2975",
            "'kIsEvenLen_': invalid template argument",
        ),
        (
            "build-error-bool-switch-c2975-zh-vmamba-issue52.txt",
            "selective_scan_bwd_kernel.cuh",
            285,
            "C2975",
            "“kIsEvenLen_”",
        ),
        (
            "build-error-m-log2e-undefined-nvcc-flashattn-softmax-mistralrs-issue941.txt",
            "softmax.h",
            75,
            None,
            'identifier "M_LOG2E" is undefined',
        ),
        (
            "build-error-unsupported-msvc-version-cuda11.8-brushedit-issue17.txt",
            "crt/host_config.h",
            153,
            "C1189",
            "#error:  -- unsupported Microsoft Visual Studio",
        ),
        (
            "build-error-unsupported-msvc-version-cuda12.1-vs17.10-torchvision-pr8492.txt",
            "crt/host_config.h",
            153,
            "C1189",
            "#error:  -- unsupported Microsoft Visual Studio",
        ),
        (
            "build-error-unsupported-msvc-version-cuda11.2-bytes-repr-gprmax-issue312.txt",
            "crt/host_config.h",
            160,
            "C1189",
            "#error:  -- unsupported Microsoft Visual Studio",
        ),
    ],
)
def test_compiler_errors_with_file_and_line(
    fixture: str, file_end: str, line: int, code: str | None, message_start: str
) -> None:
    found = first_error(recorded(fixture).splitlines())
    assert found is not None and not found.summary
    assert found.file is not None and found.file.endswith(file_end)
    assert (found.line, found.code) == (line, code)
    assert found.message.startswith(message_start)


def test_the_first_error_wins_over_its_notes() -> None:
    found = first_error(recorded(C2975).splitlines())
    assert found is not None
    assert found.log_line == 1
    assert found.context[0].endswith("note: see declaration of 'kIsEvenLen_'")
    assert found.one_line().startswith(
        "Y:\\prog\\python\\thirdparty\\mamba\\csrc\\selective_scan\\"
        "selective_scan_bwd_kernel.cuh(493): error C2975: "
    )


def test_host_config_error_keeps_spaces_and_parentheses_in_the_path() -> None:
    found = first_error(
        recorded(
            "build-error-unsupported-msvc-version-cuda12.1-vs17.10-torchvision-pr8492.txt"
        ).splitlines()
    )
    assert found is not None and found.fatal
    assert found.file == (
        "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.1\\include\\crt/host_config.h"
    )


def test_bytes_repr_is_split_and_unescaped() -> None:
    body = recorded("build-error-unsupported-msvc-version-cuda11.2-bytes-repr-gprmax-issue312.txt")
    found = first_error(body.splitlines())
    assert found is not None
    assert found.file is not None and found.file.startswith("C:\\Program Files\\NVIDIA")
    assert "\\\\" not in found.file
    assert "\\r\\n" not in found.message


def test_long_path_c1081_from_the_compiler_driver() -> None:
    found = first_error(
        recorded(
            "build-error-long-path-c1081-file-name-too-long-pytorch-test-infra-pr6648.txt"
        ).splitlines()
    )
    assert found is not None
    assert (found.file, found.code, found.fatal) == ("c1xx", "C1081", True)
    assert found.message.endswith("file name too long")


def test_quoted_stl1002_without_a_file() -> None:
    found = first_error(
        recorded("build-error-stl1002-cuda12.4-quoted-zluda-issue108.txt").splitlines()
    )
    assert found is not None
    assert found.code == "STL1002"
    assert found.message == "Unexpected compiler version, expected CUDA 12.4 or newer."


def test_nvcc_summary_names_the_unit_when_the_diagnostic_scrolled_away() -> None:
    found = first_error(
        recorded("build-log-ninja-build-stopped-torch-jit-zluda-issue108.txt").splitlines()
    )
    assert found is not None and found.summary
    assert found.file is not None and found.file.endswith("rasterizer2d_cuda.cu")
    assert found.one_line().startswith("1 error detected in the compilation of")


def test_ninja_stopped_is_the_last_resort() -> None:
    body = recorded(
        "build-error-ninja-stopped-and-cachedwheels-traceback-causalconv1d-mamba-issue55.txt"
    )
    found = first_error(body.splitlines())
    assert found is not None and found.summary
    assert found.message == "ninja: build stopped: subcommand failed."


@pytest.mark.parametrize(
    "fixture",
    [
        "build-log-cachedwheels-guess-win-amd64-and-cl-missing-causalconv1d-issue4.txt",
        "build-log-link-step-hostx86-mamba-win-ssumamba-issue1.txt",
        "ninja-progress-win-cl-line-flashattn-issue1017.txt",
        "ninja-progress-win-nvcc-line-torch-jit-comfyui3dpack-issue282.txt",
    ],
)
def test_logs_without_an_error_give_none(fixture: str) -> None:
    # Warnings ("UserWarning: Error checking compiler version for cl"), compile command lines
    # and "[WinError 2]" are not errors.
    assert first_error(recorded(fixture).splitlines()) is None


def test_crlf_log_gives_the_same_answer() -> None:
    body = recorded(C2975)
    crlf = body.replace("\n", "\r\n")
    assert first_error(crlf.splitlines(keepends=True)) == first_error(body.splitlines())


def test_hard_wrapped_error_line_is_joined_back() -> None:
    # A console window 100 columns wide cuts the C2975 line in the middle of tokens.
    line = recorded(C2975).splitlines()[0]
    wrapped = [line[i : i + 100] for i in range(0, len(line), 100)]
    assert wrap_width(wrapped) == 100
    found = first_error([*wrapped, "ninja: build stopped: subcommand failed."])
    assert found is not None and found.line == 493
    assert found.message.endswith("expected compile-time constant expression")


def test_hard_wrapped_fixture_width_is_detected() -> None:
    body = recorded("ninja-progress-win-nvcc-line-hardwrapped-sparseinst-issue129.txt")
    assert wrap_width(body.splitlines()) == 308


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "/usr/local/cuda/include/crt/host_config.h:143:2: "
            "error: #error -- unsupported GNU version!",
            ("/usr/local/cuda/include/crt/host_config.h", 143, None),
        ),
        (
            'csrc/selective_scan/reverse_scan.cuh(132): error: namespace "cub" has no member '
            '"LaneId"',
            ("csrc/selective_scan/reverse_scan.cuh", 132, None),
        ),
        (
            "LINK : fatal error LNK1181: cannot open input file 'cudart.lib'",
            ("LINK", None, "LNK1181"),
        ),
        (
            'selective_scan.obj : error LNK2001: unresolved external symbol "void __cdecl '
            'selective_scan_bwd_cuda"',
            ("selective_scan.obj", None, "LNK2001"),
        ),
        ("nvcc fatal   : Unsupported gpu architecture 'compute_53'", ("nvcc", None, None)),
        (
            "C:\\x\\selective_scan.cpp(9): fatal error C1083: "
            "Cannot open include file: 'cub/cub.cuh': No such file or directory",
            ("C:\\x\\selective_scan.cpp", 9, "C1083"),
        ),
    ],
)
def test_error_shapes_of_each_tool(line: str, expected: tuple[str, int | None, str | None]) -> None:
    log = [
        "running build_ext",
        "[1/2] c++ -c a.cpp -o a.o -Werror=return-type",
        line,
        "ninja: build stopped: subcommand failed.",
    ]
    found = first_error(log)
    assert found is not None and not found.summary
    assert (found.file, found.line, found.code) == expected
    assert found.log_line == 3
