"""benchmarks/same_bytes.py: two folders of wheels compared byte for byte, and where they differ,
member by member (content, permission bits, date), so a measured difference names its cause."""

from __future__ import annotations

import argparse
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
NAME = "mamba_ssm-2.3.2+cu130-cp312-cp312-linux_x86_64.whl"


@pytest.fixture
def same_bytes(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import same_bytes as module

    return module


def wheel(folder: Path, *, mode: int = 0o644, body: bytes = b"x = 1\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NAME
    with zipfile.ZipFile(path, "w") as out:
        entry = zipfile.ZipInfo("mamba_ssm/__init__.py", date_time=(2024, 1, 2, 3, 4, 6))
        entry.external_attr = mode << 16
        out.writestr(entry, body)
    return path


def test_the_same_wheels_are_identical(tmp_path: Path, same_bytes: ModuleType) -> None:
    wheel(tmp_path / "a")
    wheel(tmp_path / "b")
    result = same_bytes.compare(tmp_path / "a", tmp_path / "b")
    assert result["identical"] is True
    assert result["wheels"][NAME]["differences"] == []


def test_a_umask_difference_is_named_as_a_mode(tmp_path: Path, same_bytes: ModuleType) -> None:
    wheel(tmp_path / "a")
    wheel(tmp_path / "b", mode=0o664)
    result = same_bytes.compare(tmp_path / "a", tmp_path / "b")
    assert result["identical"] is False
    assert result["wheels"][NAME]["differences"] == ["mode: mamba_ssm/__init__.py 644 against 664"]


def test_other_bytes_are_named_as_content(tmp_path: Path, same_bytes: ModuleType) -> None:
    wheel(tmp_path / "a")
    wheel(tmp_path / "b", body=b"x = 2\n")
    differences = same_bytes.compare(tmp_path / "a", tmp_path / "b")["wheels"][NAME]["differences"]
    assert differences == ["content: mamba_ssm/__init__.py"]


def test_a_missing_wheel_is_no_match(tmp_path: Path, same_bytes: ModuleType) -> None:
    wheel(tmp_path / "a")
    (tmp_path / "b").mkdir()
    assert same_bytes.compare(tmp_path / "a", tmp_path / "b")["identical"] is False
    empty = same_bytes.compare(tmp_path / "b", tmp_path / "b")
    assert empty["identical"] is False  # no wheel at all proves nothing


def test_the_second_build_runs_as_another_user_under_another_name(
    tmp_path: Path, same_bytes: ModuleType
) -> None:
    args = argparse.Namespace(
        mamba_repo=Path("/src/mamba"),
        conv_repo=Path("/src/cc1d"),
        ref="v2.3.2.post1",
        conv_ref="v1.6.1.post4",
        arch="90",
        abi="stable",
        jobs=16,
        user="builder2",
        hostname="other host",
    )
    command = same_bytes.second_build(args, tmp_path / "c2", tmp_path / "b")
    assert command[:4] == ["unshare", "-u", "bash", "-c"]
    assert command[4].startswith("hostname 'other host' && su builder2 -s /bin/bash -c ")
    assert f"MAMBAWIN_CACHE_DIR={tmp_path / 'c2'}" in command[4]
    assert "--abi stable" in command[4] and "causal-conv1d==v1.6.1.post4" in command[4]


def test_the_second_cache_is_in_neither_builds_out(same_bytes: ModuleType) -> None:
    """The first build (the caller) makes DIR/a; a second --user could not write a cache inside
    it (measured: `cannot use DIR/a/much: Permission denied`)."""
    work = Path("/w")
    second = work / same_bytes.LONGER
    assert not second.is_relative_to(work / "a") and not second.is_relative_to(work / "b")
    assert len(str(second)) > len(str(work / "c1"))
