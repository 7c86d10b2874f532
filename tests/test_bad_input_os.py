"""Operating-system errors and hostile files: one line naming the path and the cause, its own exit
code, valid JSON under --json, and nothing half-written."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import FileSystemError, UsageError, os_error

SPEC_TEXT = """\
python = ["3.12"]
archs = ["90"]
[[package]]
name = "mamba-ssm"
ref = "v2.2.6"
[[torch]]
version = "2.10.0"
cuda = "13.0"
"""


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.output


def one_error_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, output
    return lines[0]


# ---- specs and other user files: regular files only, capped, BOM named --------------------------


def test_a_fifo_spec_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "spec.toml"
    os.mkfifo(fifo)
    result: dict[str, tuple[int, str, str]] = {}
    worker = threading.Thread(target=lambda: result.update(r=invoke("matrix", "--spec",
                                                                     str(fifo))))
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the reader so the suite ends, then fail
        with open(fifo, "w"):  # noqa: PTH123
            pass
        pytest.fail("reading a FIFO spec blocked")
    code, _, output = result["r"]
    assert code == UsageError.exit_code and "FIFO" in one_error_line(output)


def test_dev_zero_as_a_spec_is_refused_before_reading(tmp_path: Path) -> None:
    code, _, output = invoke("matrix", "--spec", "/dev/zero")
    assert code == UsageError.exit_code and "character device" in one_error_line(output)


def test_a_huge_spec_is_refused_by_size(tmp_path: Path) -> None:
    spec = tmp_path / "big.toml"
    spec.write_bytes(b"#" * (2 << 20))
    code, _, output = invoke("matrix", "--spec", str(spec))
    assert code == UsageError.exit_code and "bytes" in one_error_line(output)


def test_a_utf8_bom_is_named(tmp_path: Path) -> None:
    spec = tmp_path / "bom.toml"
    spec.write_bytes(b"\xef\xbb\xbf" + SPEC_TEXT.encode())
    code, stdout, output = invoke("matrix", "--spec", str(spec), "--json")
    assert code == UsageError.exit_code
    assert "byte-order mark" in json.loads(stdout)["error"]


def test_a_folder_as_a_spec(tmp_path: Path) -> None:
    code, _, output = invoke("matrix", "--spec", str(tmp_path))
    assert code == UsageError.exit_code and "a folder" in one_error_line(output)


# ---- OS errors: exit 10, the path and the cause --------------------------------------------------


def test_init_under_a_file_is_one_line_with_exit_10(tmp_path: Path) -> None:
    (tmp_path / "keep.toml").write_text("mine\n", encoding="utf-8")
    code, stdout, _ = invoke("init", "--out", str(tmp_path / "keep.toml" / "x.toml"))
    assert code == FileSystemError.exit_code
    assert (tmp_path / "keep.toml").read_text(encoding="utf-8") == "mine\n"


def test_a_cache_under_a_file_is_one_line_with_exit_10(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "f" / "cache"))
    code, _, output = invoke("fetch", "--repo", str(tmp_path), "--ref", "v1")
    assert code == FileSystemError.exit_code, output
    assert str(tmp_path / "f") in one_error_line(output)


def test_a_name_too_long_is_named(tmp_path: Path) -> None:
    code, _, output = invoke("init", "--out", str(tmp_path / ("x" * 300 + ".toml")))
    assert code == FileSystemError.exit_code
    assert "too long" in one_error_line(output)


def test_os_error_names_the_path_the_reason_and_the_fix() -> None:
    import errno

    message = str(os_error(OSError(errno.ENOSPC, "No space left on device", "/w/out.whl"),
                           "write the wheel to"))
    assert message == ("cannot write the wheel to /w/out.whl: No space left on device; free "
                       "some space there or choose another folder")
    assert "read-only" in str(os_error(OSError(errno.EROFS, "Read-only file system", "/r")))


def test_an_os_error_under_json_is_a_json_document(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x", encoding="utf-8")
    code, stdout, _ = invoke("matrix", "--spec", str(tmp_path / "a" / "spec.toml"), "--json")
    document = json.loads(stdout)
    assert (document["exit_code"], code) == (FileSystemError.exit_code,) * 2
    assert str(tmp_path / "a") in document["error"]
