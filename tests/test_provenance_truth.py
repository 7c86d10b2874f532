"""What a wheel says is true: its provenance names no folder of the builder's machine and no
credential, gives each compiler its own version (cl.exe's is not its toolset's), and says which
torch headers the binary was compiled against; an older record without that still reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mambawin.cross.source import windows_compilers
from mambawin.fetch.upstream import Checkout
from mambawin.toolchain.msvc import cl_version
from mambawin.toolchain.native import Toolchain
from mambawin.toolchain.pytorch import package_version
from mambawin.wheel.provenance import Provenance, read_provenance, record
from mambawin.wheel.repack import rewrite_wheel
from mambawin.wheel.stable_wheel import check_headers
from tests.test_verify import PROVENANCE, make_wheel

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _record(repo: str, **extra: str) -> dict[str, object]:
    checkout = Checkout(Path("/src"), repo, "v2.2.4", COMMIT, "2.2.4", "v2.2.4")
    found = record(
        checkout,
        patches=(),
        archs=("90",),
        cuda_version="13.0",
        compiler="gcc 13.2.0, nvcc 13.0",
        abi="stable",
        epoch=1700000000,
        **extra,
    )
    return found.to_dict()


@pytest.mark.parametrize(
    "repo",
    [
        "/home/alice/src/mamba",
        "/home/alice/.cache/mambawin/mirrors/mamba-1234",
        "file:///home/alice/src/mamba",
    ],
)
def test_a_local_repository_is_named_not_its_folder(repo: str) -> None:
    written = _record(repo)
    assert written["upstream_repo"] == "a local repository" and written["commit"] == COMMIT
    assert "alice" not in json.dumps(written)


def test_a_repository_url_keeps_no_credential() -> None:
    written = _record("https://oauth2:hunter2@gitlab.example/team/mamba.git")
    assert written["upstream_repo"] == "https://gitlab.example/team/mamba.git"
    assert "hunter2" not in json.dumps(written)


def test_cl_exe_is_given_its_own_version_not_its_toolsets() -> None:
    """The toolset folder is 14.44.35207; the cl.exe in it says 19.44.35207."""
    text = windows_compilers("14.44.35207", "13.0")
    assert "cl.exe 19.44.35207" in text and "MSVC toolset 14.44.35207" in text
    assert "cl.exe 14.44" not in text and "nvcc.exe 13.0" in text
    assert cl_version("14.50.35717") == "19.50.35717"


def test_the_native_compiler_field_labels_each_tool() -> None:
    tools = Toolchain(
        python_version="3.12",
        torch_version="2.11.0",
        torch_cuda="13.0",
        torch_cxx_std="17",
        nvcc="nvcc",
        cuda_version="13.0",
        cuda_home=None,
        host_compiler="msvc",
        host_compiler_version="19.44.35207",
        msvc_toolset="14.44.35207",
        ninja=None,
    )
    assert tools.compiler == "msvc 19.44.35207 (MSVC toolset 14.44.35207), nvcc 13.0"


def test_the_headers_compiled_against_are_recorded() -> None:
    assert _record("https://github.com/x/m", torch_headers="2.11.0")["torch_headers"] == "2.11.0"
    # a native build compiles against the torch it records
    assert _record("https://github.com/x/m", torch_version="2.10.0")["torch_headers"] == "2.10.0"


def test_an_older_record_without_the_headers_still_reads() -> None:
    older = {"schema": 1, "upstream_repo": "/home/bob/m", "abi": "stable", "torch_floor": "2.10"}
    read = Provenance.from_dict(older)
    assert read.torch_headers == "" and read.is_stable and str(read.floor) == "2.10"


def test_the_version_of_a_torch_folder_is_read_without_running_it(tmp_path: Path) -> None:
    (tmp_path / "version.py").write_text(
        "__version__ = '2.11.0+cpu'\nimport os; os.exit(1)\n", encoding="utf-8"
    )
    assert package_version(tmp_path) == "2.11.0+cpu"
    (tmp_path / "version.py").write_text("__version__ = (", encoding="utf-8")
    assert package_version(tmp_path) == ""
    assert package_version(tmp_path / "missing") == ""


@pytest.mark.parametrize(
    ("headers", "ok"), [("2.10.0", True), ("2.10.1+cpu", True), ("2.11.0", False), ("", None)]
)
def test_verify_says_when_a_stable_binary_was_not_compiled_against_its_floor(
    headers: str, ok: bool | None
) -> None:
    record = {"abi": "stable", "torch_floor": "2.10", "torch_headers": headers}
    found = check_headers(Provenance.from_dict(record))
    assert (found.ok if found is not None else None) is ok
    if found is not None and not found.ok:
        assert "2.11.0" in found.message and "--torch 2.10.0" in found.message


def test_a_rewrite_does_not_carry_an_older_wheels_folder_or_credential(tmp_path: Path) -> None:
    for repo, recorded in (
        ("/home/alice/src/mamba", "a local repository"),
        ("https://u:hunter2@github.com/x/mamba", "https://github.com/x/mamba"),
    ):
        folder = tmp_path / recorded.replace("/", "_").replace(":", "")
        folder.mkdir()
        wheel = make_wheel(folder, provenance={**PROVENANCE, "upstream_repo": repo})
        written = rewrite_wheel(wheel, folder / "out", guard=False)
        kept = read_provenance(written)
        assert kept is not None and kept.stored["upstream_repo"] == recorded
        assert "alice" not in json.dumps(kept.stored) and "hunter2" not in json.dumps(kept.stored)
