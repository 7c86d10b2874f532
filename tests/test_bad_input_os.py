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
    worker = threading.Thread(target=lambda: result.update(r=invoke("matrix", "--spec", str(fifo))))
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # unblock the reader so the suite ends, then fail
        with open(fifo, "w"):
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
    code, stdout, _ = invoke("matrix", "--spec", str(spec), "--json")
    assert code == UsageError.exit_code
    assert "byte-order mark" in json.loads(stdout)["error"]


def test_a_folder_as_a_spec(tmp_path: Path) -> None:
    code, _, output = invoke("matrix", "--spec", str(tmp_path))
    assert code == UsageError.exit_code and "a folder" in one_error_line(output)


# ---- OS errors: exit 10, the path and the cause --------------------------------------------------


def test_init_under_a_file_is_one_line_with_exit_10(tmp_path: Path) -> None:
    (tmp_path / "keep.toml").write_text("mine\n", encoding="utf-8")
    code, _, output = invoke("init", "--out", str(tmp_path / "keep.toml" / "x.toml"))
    assert code == FileSystemError.exit_code
    assert "keep.toml" in one_error_line(output)
    assert (tmp_path / "keep.toml").read_text(encoding="utf-8") == "mine\n"


def test_a_cache_under_a_file_is_one_line_with_exit_10(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "f" / "cache"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".git").mkdir()  # looks like a clone; the cache fails first
    code, _, output = invoke("fetch", "--repo", str(repo), "--ref", "v1")
    assert code == FileSystemError.exit_code, output
    assert str(tmp_path / "f") in one_error_line(output)


def test_a_name_too_long_is_named(tmp_path: Path) -> None:
    code, _, output = invoke("init", "--out", str(tmp_path / ("x" * 300 + ".toml")))
    assert code == FileSystemError.exit_code
    assert "too long" in one_error_line(output)


def test_os_error_names_the_path_the_reason_and_the_fix() -> None:
    import errno

    message = str(
        os_error(
            OSError(errno.ENOSPC, "No space left on device", "/w/out.whl"), "write the wheel to"
        )
    )
    assert message == (
        "cannot write the wheel to /w/out.whl: No space left on device; free "
        "some space there or choose another folder"
    )
    assert "read-only" in str(os_error(OSError(errno.EROFS, "Read-only file system", "/r")))


def test_an_os_error_under_json_is_a_json_document(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("x", encoding="utf-8")
    code, stdout, _ = invoke("matrix", "--spec", str(tmp_path / "a" / "spec.toml"), "--json")
    document = json.loads(stdout)
    assert (document["exit_code"], code) == (FileSystemError.exit_code,) * 2
    assert str(tmp_path / "a") in document["error"]


# ---- SOURCE_DATE_EPOCH, git arguments, --repo, --out, --source ----------------------------------


@pytest.mark.parametrize("value", ["99999999999", "0", "315532799"])
def test_a_source_date_epoch_a_zip_cannot_hold_is_refused(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mambawin.wheel.provenance import source_date_epoch

    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    with pytest.raises(UsageError, match="1980-01-01 to 2107-12-31"):
        source_date_epoch()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert source_date_epoch() == 1700000000


@pytest.mark.parametrize(
    "args",
    [
        ["fetch", "--repo", "--upload-pack=touch /tmp/pwned", "--ref", "v1"],
        ["fetch", "--repo", "https://example.invalid/x.git", "--ref", "--output=/tmp/x"],
    ],
)
def test_a_value_git_would_read_as_an_option_is_refused_before_git(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "cache"))
    code, _, output = invoke(*args)
    assert code == UsageError.exit_code, output
    assert "starts with '-'" in one_error_line(output)
    assert not (tmp_path / "cache" / "mirrors").exists()  # git never ran


def test_a_folder_that_is_not_a_git_repository_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "cache"))
    plain = tmp_path / "plain"
    plain.mkdir()
    code, _, output = invoke("fetch", "--repo", str(plain), "--ref", "v1")
    assert code == UsageError.exit_code
    line = one_error_line(output)
    assert "not a git repository" in line and "--source" in line


def test_build_checks_out_before_any_fetch(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    for out in (tmp_path / "a-file", tmp_path / "a-file" / "wheels"):
        code, _, output = invoke(
            "build",
            "--repo",
            str(tmp_path / "no-such-repo"),
            "--ref",
            "v1",
            "--arch",
            "90",
            "--out",
            str(out),
        )
        assert code == UsageError.exit_code, output
        assert "--out" in one_error_line(output) and "no-such-repo" not in output


def test_build_refuses_an_out_without_room_for_the_wheel(tmp_path: Path) -> None:
    from collections import namedtuple

    from mambawin.builder.workspace import check_out

    usage = namedtuple("usage", "total used free")
    with pytest.raises(FileSystemError, match="MB free"):
        check_out(tmp_path / "w", 4, True, disk_usage=lambda p: usage(0, 0, 10_000_000))
    check_out(tmp_path / "w", 1, False, disk_usage=lambda p: usage(0, 0, 10**12))
    assert not (tmp_path / "w").exists()  # checking creates nothing


def source_tree(root: Path) -> Path:
    (root / "csrc").mkdir(parents=True)
    (root / "csrc" / "kernel.cu").write_text("// kernel\n", encoding="utf-8")
    return root


def test_source_links_inside_are_copied_as_links_into_the_copy(tmp_path: Path) -> None:
    from mambawin.builder.workspace import copy_source

    src = source_tree(tmp_path / "src")
    (src / "loop").symlink_to(src)  # the tree's own root: copied 13 GB before
    (src / "alias.cu").symlink_to(src / "csrc" / "kernel.cu")  # absolute, inside
    copy_source(src, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert (copy / "loop").is_symlink() and (copy / "loop").resolve() == copy.resolve()
    assert (copy / "alias.cu").resolve() == (copy / "csrc" / "kernel.cu").resolve()
    assert sum(1 for _ in copy.rglob("*.cu")) >= 1


@pytest.mark.parametrize("make", ["outside", "dangling", "loop"])
def test_source_links_out_of_the_tree_or_nowhere_are_refused(make: str, tmp_path: Path) -> None:
    from mambawin.builder.workspace import copy_source

    src = source_tree(tmp_path / "src")
    if make == "outside":
        (tmp_path / "secret").write_text("x", encoding="utf-8")
        (src / "leak").symlink_to(tmp_path / "secret")
    elif make == "dangling":
        (src / "gone").symlink_to(tmp_path / "nowhere")
    else:
        (src / "a").symlink_to(src / "b")
        (src / "b").symlink_to(src / "a")
    with pytest.raises(UsageError, match="--source"):
        copy_source(src, tmp_path / "copy")
    assert not (tmp_path / "copy").exists()
