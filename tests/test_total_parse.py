"""Every parse of outside text is total: what the loader and the DLLs it loads print, a cached
exports.json, a lock file, a compiler's error lines and pip's reports. A bad value is one line
with its exit code, never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from packaging.version import Version
from test_verify_load import FWD, completed, run_step

from mambawin import proc
from mambawin.errors import FileSystemError, PatchError, UpstreamError
from mambawin.stage import Status
from mambawin.store import lock
from mambawin.verify.resolve import report_installs
from mambawin.verify.wineload import loader, torches
from mambawin.wheel.provenance import Provenance
from mambawin.winbuild.units import all_errors

HOST = socket.gethostname()
LOADED = "mambawin-load: loaded torch_cpu.dll 0.1\nmambawin-load: loaded library 0.1\n"


# ---- the loader's stream: any DLL it loads may write to it ---------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "mambawin-load: loaded torch_cpu.dll",  # cut short
        "mambawin-load: loaded torch_cpu.dll abc",
        "mambawin-load: loaded torch_cpu.dll 1e999",  # float() reads it: Infinity in --json
        "mambawin-load: loaded torch_cpu.dll ١.٢",  # float() reads other scripts' digits
        "mambawin-load: loaded torch_cpu.dll 0.1 0.2",  # two lines run together
        "mambawin-load: error library",
        "mambawin-load: error library ١٢٦",
        "mambawin-load: error library 9" + "9" * 5000,  # int() refuses more than 4300 digits
        "mambawin-load: missing torch_cpu.dll!a b",
        "mambawin-load: op x::y begin now",
        "mambawin-load: op x::y",
        "mambawin-load: op x::y end",
        "mambawin-load: op x::y end ²",
        "mambawin-load: op x::y end 1\x00\xff",
    ],
)
def test_a_loader_line_that_cannot_be_split_is_a_failure_line(line: str) -> None:
    text = f"mambawin-load: op {FWD} begin\n{line}\nmambawin-load: op {FWD} end 1\n"
    run = loader.parse_run(completed(LOADED + text), [FWD])  # it was an IndexError/ValueError
    assert any("cannot be read" in e for e in run.errors), run.errors
    assert json.dumps(dict(run.seconds), allow_nan=False)


@pytest.mark.parametrize(
    "junk",
    [
        b"\x00\x01\x02\xfe\xff",
        "\u202emambawin-load: loaded library 0.1".encode(),
        b"mambawin-load:" + bytes(range(256)),
        b"\r\r\r",
        b"x" * 100_000,
    ],
)
def test_binary_junk_from_a_dll_is_passed_over(junk: bytes) -> None:
    text = LOADED + proc.decode(junk, "utf-8") + f"\nmambawin-load: op {FWD} begin\n"
    text += f"mambawin-load: op {FWD} end 0\n"
    run = loader.parse_run(completed(text), [FWD])
    assert run.loaded and not run.errors and run.ops[0].name == FWD


def test_the_load_step_on_unreadable_loader_output_fails_with_a_line(tmp_path: Path) -> None:
    result, _ = run_step(tmp_path, LOADED + "mambawin-load: error library ٣\n")
    assert result.status is Status.FAIL
    assert "cannot be read" in result.summary and "\n" not in result.summary


# ---- a cached exports.json -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        "null",
        "42",
        '"declared"',
        "{}",
        '{"declared": "abc"}',
        '{"declared": [1, 2]}',
        '{"declared": {"a": 1}}',
        '{"declared": [], "torch_cuda.dll": "torch_cuda.dll"}',
        '{"declared": [], "torch_cuda.dll": [null]}',
        '{"declared": [], "torch_cuda.dll": true}',
    ],
)
def test_an_exports_json_of_another_shape_is_one_line(text: str, tmp_path: Path) -> None:
    (tmp_path / torches.EXPORTS).write_text(text)
    with pytest.raises(FileSystemError, match=r"is not what mambawin writes there.*run again"):
        torches.read_dlls("2.10.0", tmp_path)  # it was an AttributeError / TypeError


@pytest.mark.parametrize("text", ["{", "[" * 100_000, "\xff", ""])
def test_an_exports_json_that_is_no_json_is_one_line(text: str, tmp_path: Path) -> None:
    (tmp_path / torches.EXPORTS).write_text(text, encoding="latin-1")
    with pytest.raises(FileSystemError, match="is unreadable"):
        torches.read_dlls("2.10.0", tmp_path)  # "[" * 100000 was a RecursionError


def test_a_good_exports_json_reads_as_before(tmp_path: Path) -> None:
    (tmp_path / torches.EXPORTS).write_text('{"torch_cuda.dll": ["a"], "declared": ["b"]}')
    dlls = torches.read_dlls("2.10.0", tmp_path)
    assert dlls.cuda_exports == frozenset({"a"}) and dlls.declared == frozenset({"b"})
    (tmp_path / torches.EXPORTS).write_text('{"torch_cuda.dll": null, "declared": []}')
    assert torches.read_dlls("2.10.0", tmp_path).cuda_exports is None


# ---- a lock file's holder ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pid", ["١٢٣", "²", "0", "00", "-1", "+5", "1_0", "99999999999999999999", "12 3", "٣"]
)
def test_a_lock_whose_pid_is_not_ascii_digits_is_busy_not_taken_over(
    pid: str, tmp_path: Path
) -> None:
    path = tmp_path / ".mambawin-patch.lock"
    path.write_text(f"pid {pid} on {HOST}\n", encoding="utf-8")
    with (
        pytest.raises(PatchError, match="in use by another mambawin run"),
        lock.hold(path, "the tree", PatchError),
    ):
        pass  # it was int('²')'s ValueError, and '١٢٣' read as pid 123
    assert path.read_text(encoding="utf-8") == f"pid {pid} on {HOST}\n"


def test_a_dead_holder_in_ascii_digits_is_still_taken_over(tmp_path: Path) -> None:
    path = tmp_path / ".mambawin-patch.lock"
    path.write_text(f"pid 4999999 on {HOST}\n")
    with lock.hold(path, "the tree", PatchError):
        assert path.read_text().startswith("pid ")
    assert not path.exists()


# ---- a compiler's error lines under wine ---------------------------------------------------------


def test_an_error_line_with_a_huge_line_number_is_not_a_traceback(tmp_path: Path) -> None:
    output = f"x.cu({'9' * 5000}): error: boom\nx.cu(12): error: real\n"
    errors = all_errors(output, tmp_path)  # int() of 5000 digits was a ValueError
    assert [(e.line, e.text) for e in errors] == [(12, "real")]


# ---- pip's reports -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "output",
    [
        "",
        "no json here",
        "[]",
        "{}",
        '{"install": {}}',
        '{"install": "torch"}',
        '{"install": [1]}',
        '{"install": [{"metadata": []}]}',
        '{"install": [{"metadata": {"name": 1, "version": "2.10.0"}}]}',
        '{"install": [{"metadata": {"name": "torch", "version": null}}]}',
        '{"install": [' * 5000 + "]}" * 5000,
        '{"install": [{"metadata": {"name": "torch", "version": "2.10.0"}}]',  # cut short
    ],
)
def test_a_pip_report_of_another_shape_is_a_value_error(output: str) -> None:
    with pytest.raises(ValueError):
        report_installs(output)


def _pip(stdout: str, code: int = 0, stderr: str = "") -> proc.Completed:
    return proc.Completed(("pip",), code, stdout, stderr)


def _report(*versions: str) -> str:
    items = [{"metadata": {"name": "torch", "version": v}} for v in versions]
    return json.dumps({"version": "1", "install": items})


def test_the_torch_pip_would_install_is_read_from_its_report() -> None:
    assert torches.read_choice("torch>=2.10", _pip(_report("2.15.0"))) == "2.15.0"


@pytest.mark.parametrize(
    "done",
    [
        _pip(_report()),
        _pip(_report("2.10.0", "2.11.0")),
        _pip(_report("not a version")),
        _pip('{"install": [1]}'),
        _pip("", 1, "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n"),
    ],
)
def test_a_torch_pip_cannot_choose_is_one_line_naming_the_requirement(
    done: proc.Completed, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/pip/constraints.txt")
    with pytest.raises(UpstreamError, match=r"torch>=2\.10") as caught:
        torches.read_choice("torch>=2.10", done)
    assert "\n" not in str(caught.value)
    if done.returncode:  # the constraint that may be why is named
        assert "PIP_CONSTRAINT=/etc/pip/constraints.txt applies" in str(caught.value)
        assert "ResolutionImpossible" in str(caught.value)


def test_the_load_step_asks_pip_for_the_floors_minor_and_the_newest() -> None:
    asked: list[str] = []

    def resolve(requirement: str) -> str:
        asked.append(requirement)
        return "2.10.1" if "==2.10.*" in requirement else "2.12.0"  # a constraint: torch<2.13

    chosen = torches.installable_versions(Version("2.10"), resolve)
    assert asked == ["torch>=2.10,==2.10.*", "torch>=2.10"]
    assert torches.wanted(Version("2.10"), chosen) == ("2.10.1", "2.12.0")


def test_a_torch_pip_refuses_fails_the_load_step_with_the_version_and_constraint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `pip index versions` ignored pip's constraints: the step then failed in pip download
    # with only "ResolutionImpossible"
    from mambawin.verify.wineload import step

    monkeypatch.setenv("PIP_CONSTRAINT", "c.txt")
    refused = _pip("", 1, "ERROR: ResolutionImpossible\n")
    tools = step.LoadTools(
        find_wine=lambda: "/usr/bin/wine",
        toolchain=lambda _root: step.toolchain_at(tmp_path / "tc"),
        versions=lambda floor: torches.installable_versions(
            floor, lambda req: torches.read_choice(req, refused)
        ),
        ready=lambda toolchain: None,
        library=lambda wheel, project: step.Library("x.pyd", b"MZ", (), ()),
    )
    from test_verify_load import wheel_of

    result = step.load_step(
        wheel_of(tmp_path), "causal-conv1d", _stable(), tmp_path / "w", None, tools
    )
    assert result.status is Status.FAIL
    assert "pip cannot install torch>=2.10,==2.10.* for win_amd64" in result.summary
    assert "PIP_CONSTRAINT=c.txt applies" in result.summary


def _stable() -> Provenance:
    from test_verify_load import RECORD

    return RECORD


# ---- a toolchain folder's version names and cuda.h ---------------------------------------------


@pytest.mark.parametrize(
    "name", ["١٤.٤٤", "14.4" + "4" * 200, "14.44\n", "14", "14.x", "²4.44", "-14.44"]
)
def test_a_version_folder_of_other_digits_is_no_toolset(name: str, tmp_path: Path) -> None:
    from mambawin.errors import ToolchainError
    from mambawin.toolchain.wine import newest_version_dir

    (tmp_path / name).mkdir()
    with pytest.raises(ToolchainError, match="no MSVC toolset under"):
        newest_version_dir(tmp_path, "MSVC toolset")


@pytest.mark.parametrize(
    ("line", "version"),
    [
        ("#define CUDA_VERSION 13000", "13.0"),
        ("#define CUDA_VERSION 12080 // 12.8", "12.8"),
        ("#define CUDA_VERSION ١٣٠٠٠", None),
        ("#define CUDA_VERSION " + "1" * 5000, None),
        ("#define CUDA_VERSION", None),
    ],
)
def test_cuda_h_is_read_in_ascii_digits(line: str, version: str | None, tmp_path: Path) -> None:
    from mambawin.toolchain.wine import WindowsToolchain

    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cuda.h").write_text(line + "\n", encoding="utf-8")
    assert WindowsToolchain(tmp_path, tmp_path, tmp_path).cuda_version() == version


# ---- the shim a wheel holds (parsed, never run) ------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [b"-" * 100_000 + b"1", b"a" + b".b" * 200_000 + b".default", b"(" * 100_000, b"x=1\x00"],
)
def test_a_shim_nested_too_deep_or_not_python_is_a_wheel_error(source: bytes) -> None:
    from mambawin.errors import WheelError
    from mambawin.verify.wineload.ops import shim_ops

    with pytest.raises(WheelError, match="rebuild the wheel"):
        shim_ops(source, "causal_conv1d_cuda.py")  # MemoryError / RecursionError tracebacks


def test_a_download_pip_refuses_names_the_version_and_the_constraint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mambawin.errors import CommandError

    monkeypatch.setenv("PIP_CONSTRAINT", "/etc/c.txt")

    def refuse(requirements: object, dest: Path) -> None:
        tail = "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io\n"
        raise CommandError("pip failed", argv=("pip",), returncode=1, tail=tail)

    with pytest.raises(UpstreamError) as caught:
        torches.torch_dlls("2.12.0", tmp_path / "dlls", download=refuse)
    said = str(caught.value)  # it was pip's "ResolutionImpossible" alone
    assert "torch 2.12.0" in said and "PIP_CONSTRAINT=/etc/c.txt applies" in said
    assert "ResolutionImpossible" in said and "\n" not in said
    assert not (tmp_path / "dlls" / "2.12.0").exists()  # nothing half-written
