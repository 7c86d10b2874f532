"""repack.rewrite_wheel on small hand-made wheels: requirements, versions, RECORD, provenance."""

from __future__ import annotations

import ast
import base64
import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from packaging.version import Version
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin import __version__
from mambawin.cli import app
from mambawin.errors import UsageError, WheelError
from mambawin.wheel import repack
from mambawin.wheel.guard import GUARD_BEGIN
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import (
    PROVENANCE_NAME,
    Provenance,
    local_version_label,
    read_provenance,
)
from mambawin.wheel.repack import rewrite_wheel

TAG = "cp311-cp311-linux_x86_64"
WIN = "cp311-cp311-win_amd64"
SO = "selective_scan_cuda.cpython-311-x86_64-linux-gnu.so"
INIT = '"""Mamba."""\n\nfrom __future__ import annotations\n\n__version__ = "2.2.6"\n'


def metadata_bytes(requires: list[str], version: str = "2.2.6", name: str = "mamba_ssm") -> bytes:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        "Summary: Mamba state-space model",
    ]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return ("\n".join(lines) + "\n\nMamba, built by hand for a test.\n").encode()


def make_wheel(
    folder: Path,
    requires: list[str] | None = None,
    *,
    version: str = "2.2.6",
    raw_metadata: bytes | None = None,
    tag: str = TAG,
    init: str = INIT,
) -> Path:
    """A small mamba_ssm wheel built with the wheel library: package, `.so` stand-in, dist-info."""
    src = folder / f"src-{version}"
    dist = src / f"mamba_ssm-{version}.dist-info"
    (src / "mamba_ssm").mkdir(parents=True)
    dist.mkdir()
    (src / "mamba_ssm" / "__init__.py").write_text(init)
    (src / SO).write_bytes(b"\x7fELF" + bytes(range(256)) * 8)
    (dist / "METADATA").write_bytes(raw_metadata or metadata_bytes(requires or [], version))
    (dist / "WHEEL").write_text(
        f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: {tag}\n\n"
    )
    path = folder / f"mamba_ssm-{version}-{tag}.whl"
    with WheelFile(path, "w") as out:
        out.write_files(str(src))
    return path


def raw_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as out:
        for name, data in members.items():
            out.writestr(name, data)
    return path


def sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record_of(data: dict[str, bytes], dist: str) -> bytes:
    rows = [f"{name},sha256={sha256(d)},{len(d)}" for name, d in data.items()]
    return ("\n".join([*rows, f"{dist}/RECORD,,"]) + "\n").encode()


def valid_members() -> dict[str, bytes]:
    dist = "mamba_ssm-2.2.6.dist-info"
    data = {
        "mamba_ssm/__init__.py": INIT.encode(),
        f"{dist}/METADATA": metadata_bytes([]),
        f"{dist}/WHEEL": f"Wheel-Version: 1.0\nTag: {TAG}\n\n".encode(),
    }
    return {**data, f"{dist}/RECORD": record_of(data, dist)}


def member(wheel: Path, suffix: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        names = [n for n in archive.namelist() if n.endswith(suffix)]
        assert len(names) == 1, names
        return archive.read(names[0])


# ---- requirements ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "triton",
        "triton>=3.5.0",
        'triton ; sys_platform == "linux"',
        "triton[extra]",
        "Triton",
        "triton (>=2.0)",
        'triton; extra == "dev"',
        "TRITON==3.1.0",
        "triton (>=2.0) ; python_version >= '3.8'",
    ],
)
def test_on_windows_triton_becomes_triton_windows_however_it_is_spelled(
    tmp_path: Path, spelling: str
) -> None:
    others = ["tritonclient>=2", "pytorch-triton", "triton-nightly", "einops"]
    wheel = make_wheel(tmp_path, ["torch", spelling, *others], tag=WIN)
    out = requirements(rewrite_wheel(wheel, tmp_path / "out"))
    renamed = Requirement(out[1])
    original = Requirement(spelling)
    assert renamed.name == "triton-windows"
    assert (renamed.specifier, renamed.marker, renamed.extras) == (
        original.specifier,
        original.marker,
        original.extras,
    )
    assert [out[0], *out[2:]] == ["torch", *others]


@pytest.mark.parametrize("spelling", ["triton", "triton>=3.5.0", "Triton (>=2.0)"])
def test_on_linux_triton_stays_unless_dropped(tmp_path: Path, spelling: str) -> None:
    wheel = make_wheel(tmp_path, ["torch", spelling, "einops"])
    assert requirements(rewrite_wheel(wheel, tmp_path / "a")) == ["torch", spelling, "einops"]
    dropped = rewrite_wheel(wheel, tmp_path / "b", drop=("TRITON",))
    assert requirements(dropped) == ["torch", "einops"]


def test_every_other_metadata_byte_stays_as_it_was(tmp_path: Path) -> None:
    head = (
        b"Metadata-Version: 2.1\r\nName: mamba_ssm\r\nVersion: 2.2.6\r\n"
        b"Summary:   odd   spacing  \r\nKeywords: a,\r\n  folded,\r\n\tvalue\r\n"
        b"Requires-Dist:   einops   \r\n"
    )
    triton = b"Requires-Dist: triton\r\n  >=3.0 ; extra == 'dev'\r\n"
    tail = (
        b'Requires-Dist: transformers ; extra == "x"\r\nProvides-Extra: x\r\n\r\n'
        b"Body text mentions\r\nRequires-Dist: triton\r\nand stays.\r\n"
    )
    wheel = make_wheel(tmp_path, raw_metadata=head + triton + tail)
    out = rewrite_wheel(wheel, tmp_path / "out", drop=("triton",), keep=("transformers",))
    assert member(out, ".dist-info/METADATA") == head + tail


def test_on_linux_upstreams_set_stays_and_projects_go_only_on_request(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["torch", "tilelang==0.1.8", "triton"])
    assert requirements(rewrite_wheel(wheel, tmp_path / "a")) == [
        "torch",
        "tilelang==0.1.8",
        "triton",
    ]
    dropped = rewrite_wheel(wheel, tmp_path / "b", drop=("triton", "TileLang"))
    assert requirements(dropped) == ["torch"]


# ---- RECORD, names, versions ------------------------------------------------------------------


def test_record_lists_every_file_with_its_real_hash_and_size(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["triton", "torch"])
    out = rewrite_wheel(
        wheel,
        tmp_path / "out",
        local_version="cu129torch2.8",
        provenance=Provenance(torch_version="2.8.0", cuda_version="12.9"),
    )
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        record_name = next(n for n in names if n.endswith(".dist-info/RECORD"))
        rows = list(csv.reader(io.StringIO(archive.read(record_name).decode())))
        listed = {row[0]: (row[1], row[2]) for row in rows}
        assert set(listed) == set(names)
        assert listed.pop(record_name) == ("", "")
        for name, (digest, size) in listed.items():
            data = archive.read(name)
            assert (digest, size) == (f"sha256={sha256(data)}", str(len(data))), name


def test_local_version_is_the_same_in_name_metadata_and_dist_info(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["torch"], version="2.2.6.post3+cu12torch2.8cxx11abiTRUE")
    out = rewrite_wheel(wheel, tmp_path / "out", local_version="+cu129torch2.8")
    assert out.name == f"mamba_ssm-2.2.6.post3+cu129torch2.8-{TAG}.whl"
    assert parse_wheel_filename(out.name)[1] == Version("2.2.6.post3+cu129torch2.8")
    assert b"\nVersion: 2.2.6.post3+cu129torch2.8\n" in member(out, "METADATA")
    with zipfile.ZipFile(out) as archive:
        folders = {n.split("/")[0] for n in archive.namelist() if ".dist-info/" in n}
    assert folders == {"mamba_ssm-2.2.6.post3+cu129torch2.8.dist-info"}


def test_the_data_folder_is_renamed_with_the_dist_info(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    data = tmp_path / "with-data"
    data.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        members = {n: archive.read(n) for n in archive.namelist() if not n.endswith("RECORD")}
    members["mamba_ssm-2.2.6.data/scripts/mamba-bench"] = b"#!python\n"
    dist = "mamba_ssm-2.2.6.dist-info"
    members[f"{dist}/RECORD"] = record_of(members, dist)
    out = rewrite_wheel(
        raw_zip(data / wheel.name, members), tmp_path / "out", local_version="cu129torch2.8"
    )
    assert member(out, ".data/scripts/mamba-bench") == b"#!python\n"
    with zipfile.ZipFile(out) as archive:
        tops = {n.split("/")[0] for n in archive.namelist() if "/" in n}
    assert tops == {
        "mamba_ssm",
        "mamba_ssm-2.2.6+cu129torch2.8.data",
        "mamba_ssm-2.2.6+cu129torch2.8.dist-info",
    }


def test_without_a_local_version_the_version_is_kept(tmp_path: Path) -> None:
    out = rewrite_wheel(make_wheel(tmp_path, ["triton"]), tmp_path / "out")
    assert out.name == f"mamba_ssm-2.2.6-{TAG}.whl"
    assert b"\nVersion: 2.2.6\n" in member(out, "METADATA")


@pytest.mark.parametrize(
    ("cuda", "torch", "extra", "label"),
    [
        ("12.9", "2.8.0+cu129", "", "cu129torch2.8"),
        ("13.0.1", "2.9.1", "", "cu130torch2.9"),
        ("12", "2.10.0.dev20260101", "", "cu120torch2.10"),
        ("12.4", "2.6.0", "cxx11abiTRUE", "cu124torch2.6cxx11abitrue"),
    ],
)
def test_local_version_label(cuda: str, torch: str, extra: str, label: str) -> None:
    assert local_version_label(cuda, torch, extra=extra) == label


@pytest.mark.parametrize("bad", ["cu129 torch", "cu129+x", "", "+", "ü"])
def test_a_bad_local_version_is_a_usage_error_with_the_rule(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="PEP 440"):
        rewrite_wheel(make_wheel(tmp_path), tmp_path / "out", local_version=bad or " ")


def test_a_bad_version_for_the_label_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="CUDA version 'twelve'"):
        local_version_label("twelve", "2.8")


# ---- provenance and the torch guard -----------------------------------------------------------


def full_provenance() -> Provenance:
    return Provenance(
        upstream_repo="https://github.com/state-spaces/mamba",
        ref="v2.2.6",
        commit="0" * 40,
        version="2.2.6",
        patches=({"id": "bool-switch", "status": "applied"},),
        archs=("sm_86", "sm_89"),
        torch_version="2.8.0+cu129",
        cuda_version="12.9",
        compiler="MSVC 19.44",
    )


def test_provenance_is_recorded_with_the_build_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    out = rewrite_wheel(make_wheel(tmp_path), tmp_path / "out", provenance=full_provenance())
    record = read_provenance(out)
    assert record is not None
    assert record.stored["build_date"] == "2023-11-14T22:13:20+00:00"
    assert record.stored["patches"] == [{"id": "bool-switch", "status": "applied"}]
    assert (record.stored["commit"], record.stored["archs"], record.stored["mambawin_version"]) == (
        "0" * 40,
        ["sm_86", "sm_89"],
        __version__,
    )
    assert (
        member(out, f".dist-info/{PROVENANCE_NAME}")
        == (json.dumps(record.stored, indent=2, sort_keys=True) + "\n").encode()
    )


def test_a_wheel_without_provenance_reads_as_none(tmp_path: Path) -> None:
    out = rewrite_wheel(make_wheel(tmp_path), tmp_path / "out")
    assert read_provenance(out) is None
    assert GUARD_BEGIN.encode() not in member(out, "mamba_ssm/__init__.py")


def test_guard_goes_after_docstring_and_future_import(tmp_path: Path) -> None:
    out = rewrite_wheel(make_wheel(tmp_path), tmp_path / "out", provenance=full_provenance())
    text = member(out, "mamba_ssm/__init__.py").decode()
    body = ast.parse(text).body  # a misplaced __future__ import would be a SyntaxError here
    assert ast.get_docstring(ast.parse(text)) == "Mamba."
    assert isinstance(body[1], ast.ImportFrom) and body[1].module == "__future__"
    assert text.index(GUARD_BEGIN) > text.index("from __future__")
    assert 'built_torch, built_cuda = "2.8", "12"' in text
    assert text.endswith('__version__ = "2.2.6"\n')


def test_second_rewrite_keeps_provenance_and_a_single_guard(tmp_path: Path) -> None:
    first = rewrite_wheel(make_wheel(tmp_path), tmp_path / "a", provenance=full_provenance())
    second = rewrite_wheel(first, tmp_path / "b", local_version="cu129torch2.8")
    assert read_provenance(second).stored == read_provenance(first).stored
    assert member(second, "mamba_ssm/__init__.py").decode().count(GUARD_BEGIN) == 1


def test_guard_can_be_skipped_and_removed(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path)
    plain = rewrite_wheel(wheel, tmp_path / "a", provenance=full_provenance(), guard=False)
    assert member(plain, "mamba_ssm/__init__.py") == INIT.encode()
    guarded = rewrite_wheel(wheel, tmp_path / "b", provenance=full_provenance())
    removed = rewrite_wheel(guarded, tmp_path / "c", guard=False)
    assert member(removed, "mamba_ssm/__init__.py") == INIT.encode()
    assert read_provenance(removed) is not None


# ---- never modify, never leave half a file ----------------------------------------------------


def test_input_is_never_modified(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["triton"])
    before = wheel.read_bytes()
    rewrite_wheel(
        wheel, tmp_path / "out", local_version="cu129torch2.8", provenance=full_provenance()
    )
    assert wheel.read_bytes() == before


def test_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["triton"])
    with pytest.raises(WheelError, match="overwrite the input"):
        rewrite_wheel(wheel, tmp_path)


def test_source_date_epoch_gives_identical_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    wheel = make_wheel(tmp_path, ["triton"])
    first = rewrite_wheel(wheel, tmp_path / "a", provenance=full_provenance())
    second = rewrite_wheel(wheel, tmp_path / "b", provenance=full_provenance())
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        assert {i.date_time for i in archive.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_an_earlier_output_of_mambawin_is_replaced_whole(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["triton"])
    target = rewrite_wheel(wheel, tmp_path / "out", provenance={"mambawin": "earlier"})
    assert rewrite_wheel(wheel, tmp_path / "out", drop=("triton",)) == target
    assert requirements(target) == []
    assert sorted(p.name for p in target.parent.iterdir()) == [wheel.name]


def test_a_file_of_the_outputs_name_that_mambawin_did_not_write_is_never_replaced(
    tmp_path: Path,
) -> None:
    wheel = make_wheel(tmp_path, ["triton"])
    target = tmp_path / "out" / wheel.name
    target.parent.mkdir()
    target.write_bytes(b"someone's own wheel")
    with pytest.raises(UsageError, match="is not a wheel mambawin wrote"):
        rewrite_wheel(wheel, tmp_path / "out", drop=("triton",))
    assert target.read_bytes() == b"someone's own wheel"
    assert sorted(p.name for p in target.parent.iterdir()) == [wheel.name]
    target.unlink()
    again = rewrite_wheel(wheel, tmp_path / "out")  # a rerun giving the very same bytes is fine
    assert rewrite_wheel(wheel, tmp_path / "out") == again


def test_a_failure_leaves_the_old_output_and_no_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path, ["triton"])
    target = tmp_path / "out" / wheel.name
    target.parent.mkdir()
    target.write_bytes(b"an older wheel")

    def explode(*args: object) -> bytes:
        raise OSError("disk full")

    monkeypatch.setattr(repack, "edit_metadata", explode)
    with pytest.raises(OSError, match="disk full"):
        rewrite_wheel(wheel, tmp_path / "out")
    assert target.read_bytes() == b"an older wheel"
    assert [p.name for p in target.parent.iterdir()] == [wheel.name]


@pytest.mark.parametrize("value", ["yesterday", "-5", "1.5"])
def test_a_malformed_source_date_epoch_is_refused(
    tmp_path: Path, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    with pytest.raises(UsageError, match="SOURCE_DATE_EPOCH"):
        rewrite_wheel(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ---- refusing bad input -----------------------------------------------------------------------


def corrupt_cases(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = make_wheel(tmp_path)
    name = good.name
    dist = "mamba_ssm-2.2.6.dist-info"
    cases: dict[str, tuple[Path, str]] = {}
    (tmp_path / "truncated").mkdir()
    truncated = tmp_path / "truncated" / name
    truncated.write_bytes(good.read_bytes()[:200])
    cases["truncated"] = (truncated, "not a readable zip")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / name).write_text("<html>404</html>")
    cases["html"] = (tmp_path / "text" / name, "not a readable zip")
    for missing in ("METADATA", "WHEEL", "RECORD"):
        members = {k: v for k, v in valid_members().items() if k != f"{dist}/{missing}"}
        (tmp_path / missing).mkdir()
        path = raw_zip(tmp_path / missing / name, members)
        cases[f"no {missing}"] = (path, f"no {dist}/{missing}")
    members = valid_members()
    members["mamba_ssm/__init__.py"] = b"import os; os.system('evil')\n"
    (tmp_path / "tampered").mkdir()
    cases["hash"] = (raw_zip(tmp_path / "tampered" / name, members), "RECORD hash")
    for label, evil in (
        ("dotdot", "../evil.py"),
        ("abs", "/etc/evil.py"),
        ("drive", "C:/evil.py"),
        ("nested", "mamba_ssm/../../evil.py"),
    ):
        (tmp_path / label).mkdir()
        cases[label] = (raw_zip(tmp_path / label / name, {**valid_members(), evil: b"x"}), "unsafe")
    (tmp_path / "unlisted").mkdir()
    cases["unlisted"] = (
        raw_zip(tmp_path / "unlisted" / name, {**valid_members(), "extra.py": b"x"}),
        "not listed in RECORD",
    )
    (tmp_path / "tags").mkdir()
    cases["tags"] = (
        raw_zip(tmp_path / "tags" / name.replace("linux_x86_64", "win_amd64"), valid_members()),
        "do not match the file name",
    )
    return cases


def test_bad_wheels_are_refused_with_one_line(tmp_path: Path) -> None:
    for label, (path, message) in corrupt_cases(tmp_path).items():
        with pytest.raises(WheelError, match=message) as caught:
            rewrite_wheel(path, tmp_path / "out")
        assert "\n" not in str(caught.value), label
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.parametrize("name", ["mamba_ssm-2.2.6.zip", "mamba_ssm.whl", "notes.txt"])
def test_a_file_that_is_not_named_like_a_wheel_is_refused(tmp_path: Path, name: str) -> None:
    path = raw_zip(tmp_path / name, valid_members())
    with pytest.raises(WheelError, match="not a wheel file name"):
        rewrite_wheel(path, tmp_path / "out")


def test_a_missing_wheel_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match="does not exist"):
        read_provenance(tmp_path / f"mamba_ssm-2.2.6-{TAG}.whl")


# ---- CLI --------------------------------------------------------------------------------------


def test_cli_rewrites_and_reports_json(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["torch", "triton>=3", "tilelang==0.1.8"])
    result = CliRunner().invoke(
        app,
        [
            "metadata",
            str(wheel),
            "--drop",
            "tilelang",
            "--local-version",
            "cu129torch2.8",
            "--out",
            str(tmp_path / "out"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped"] == ["tilelang==0.1.8"]
    assert requirements(Path(report["wheel"])) == ["torch", "triton>=3"]
    assert Path(report["wheel"]).name.startswith("mamba_ssm-2.2.6+cu129torch2.8-")


def test_cli_windows_wheel_reports_each_change_with_its_reason(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, ["torch", "triton>=3.5.0", "tilelang==0.1.8"], tag=WIN)
    result = CliRunner().invoke(
        app,
        ["metadata", str(wheel), "--keep", "tilelang", "--out", str(tmp_path / "out"), "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(c["from"], c["to"]) for c in report["changes"]] == [
        ("triton>=3.5.0", "triton-windows>=3.5.0")
    ]
    assert "triton-windows provides the `triton` module" in report["changes"][0]["reason"]
    assert requirements(Path(report["wheel"])) == [
        "torch",
        "triton-windows>=3.5.0",
        "tilelang==0.1.8",
    ]


@pytest.mark.parametrize("out", ["notes.txt", "notes.txt/sub"])
def test_cli_out_that_is_a_file_is_one_line(tmp_path: Path, out: str) -> None:
    wheel = make_wheel(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(app, ["metadata", str(wheel), "--out", str(tmp_path / out)])
    assert result.exit_code == UsageError.exit_code
    assert "is a file, not a folder" in result.stderr and len(result.stderr.splitlines()) == 1
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("none", ["none", "None"])
def test_cli_local_version_none_drops_the_label_as_build_does(tmp_path: Path, none: str) -> None:
    wheel = make_wheel(tmp_path, ["torch"], version="2.2.6+cu129torch2.8")
    result = CliRunner().invoke(
        app, ["metadata", str(wheel), "--local-version", none, "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.output
    written = Path(result.stdout.strip())  # the new wheel's path is the result, on stdout
    assert written.name == f"mamba_ssm-2.2.6-{TAG}.whl"
    assert b"\nVersion: 2.2.6\n" in member(written, "METADATA")


def test_an_empty_local_version_is_refused_not_ignored(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="PEP 440"):
        rewrite_wheel(make_wheel(tmp_path), tmp_path / "out", local_version="")


def test_cli_maps_a_corrupt_wheel_to_exit_code_7(tmp_path: Path) -> None:
    path = tmp_path / f"mamba_ssm-2.2.6-{TAG}.whl"
    path.write_bytes(b"PK\x03\x04 not really")
    result = CliRunner().invoke(app, ["metadata", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == WheelError.exit_code
    assert "not a readable zip" in result.stderr


# ---- bounded reads of hostile wheels ------------------------------------------------------------


def deflated_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as out:
        for name, data in members.items():
            out.writestr(name, data)
    return path


def opened_members(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every member name zipfile is asked to open (and so to inflate)."""
    opened: list[str] = []
    original = zipfile.ZipFile.open

    def spy(
        self: zipfile.ZipFile, name: str | zipfile.ZipInfo, *args: object, **kwargs: object
    ) -> object:
        opened.append(name if isinstance(name, str) else name.filename)
        return original(self, name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return opened


@pytest.mark.parametrize("huge", ["METADATA", "RECORD"])
def test_a_huge_metadata_or_record_is_refused_before_it_is_inflated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, huge: str
) -> None:
    dist = "mamba_ssm-2.2.6.dist-info"
    members = valid_members()
    members[f"{dist}/{huge}"] = members[f"{dist}/{huge}"] + b" " * (12 * 1024 * 1024)
    path = deflated_zip(tmp_path / f"mamba_ssm-2.2.6-{TAG}.whl", members)
    assert path.stat().st_size < 100_000  # a small file that would inflate to 12 MB
    opened = opened_members(monkeypatch)
    with pytest.raises(WheelError, match=f"member {dist}/{huge} claims 12,") as caught:
        read_provenance(path)
    assert "\n" not in str(caught.value)
    assert f"{dist}/{huge}" not in opened


def test_a_wheel_with_an_absurd_member_count_is_refused_without_reading_members(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {**valid_members(), **{f"mamba_ssm/f{i}.py": b"" for i in range(20_001)}}
    path = raw_zip(tmp_path / f"mamba_ssm-2.2.6-{TAG}.whl", members)
    opened = opened_members(monkeypatch)
    with pytest.raises(WheelError, match="has 20,005 members, over the 20,000"):
        read_provenance(path)
    assert opened == []
