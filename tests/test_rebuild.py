"""`mambawin rebuild`: a published wheel's provenance and file name become the build that made it
(source pinned), this machine is checked against it before any work, and the rebuild is compared
member by member. Wheels are small hand-made ones; the build and the machine's facts are fakes
passed in, so nothing is fetched or compiled."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version
from typer.testing import CliRunner
from wheel.wheelfile import WheelFile

from mambawin import __version__
from mambawin.archs import parse_archs
from mambawin.builder.backends import Outcome
from mambawin.builder.rebuild import RebuildReport, command_line, machine_differences, rebuild
from mambawin.builder.rebuild_target import MachineFacts, Target, read_target
from mambawin.builder.request import BuildRequest
from mambawin.builder.results import BuildResult
from mambawin.cli import app
from mambawin.errors import MachineDiffers, RebuildDiffers, UpstreamError, UsageError, WheelError
from mambawin.fetch.pin import SourcePin
from mambawin.fetch.simple_index import IndexFile
from mambawin.fetch.upstream import Checkout
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.wheel.compare import compare_wheels
from mambawin.wheel.provenance import Provenance

HOST = "linux_x86_64"
COMMIT = "a" * 40
SHA = "b" * 64
DATE = "2024-01-02T03:04:05+00:00"
EPOCH = 1704164645
COMPILER = "gcc 13.3.0, nvcc 13.0"
SO = "mamba_ssm/selective_scan_cuda.cpython-312-x86_64-linux-gnu.so"


def provenance(**changes: Any) -> dict[str, Any]:
    """A torch-ABI git build's record, as `build` writes it, with changes."""
    record: dict[str, Any] = {
        "schema": 1,
        "upstream_repo": MAMBA.default_repo,
        "ref": "v2.3.2",
        "commit": COMMIT,
        "version": "2.3.2",
        "patches": [
            {"id": "arch-list", "status": "applied"},
            {"id": "complex-removal", "status": "applied"},
        ],
        "left_out": ["math-defines"],
        "requirements": [
            {"from": "triton", "to": None, "reason": "dropped on request (--drop)"},
        ],
        "archs": ["86", "90"],
        "torch_version": "2.11.0",
        "cuda_version": "13.0",
        "compiler": COMPILER,
        "torch_headers": "2.11.0",
        "abi": "torch",
        "torch_floor": "",
        "mambawin_version": __version__,
        "build_date": DATE,
        "source": {"kind": "git", "commit": COMMIT},
    }
    record.update(changes)
    return record


def make_wheel(
    folder: Path,
    record: dict[str, Any] | None,
    *,
    name: str = "mamba_ssm",
    version: str = "2.3.2+cu130torch2.11",
    tags: str = "cp312-cp312-linux_x86_64",
    body: bytes = b"\x7fELF library",
    mode: int = 0o755,
) -> Path:
    """A small wheel with the wheel library's writer: a package, a library stand-in, the
    dist-info and (record not None) mambawin's provenance."""
    src = folder / f"src-{name}-{tags}"
    dist = src / f"{name}-{version}.dist-info"
    (src / name).mkdir(parents=True, exist_ok=True)
    dist.mkdir(parents=True, exist_ok=True)
    (src / name / "__init__.py").write_text("x = 1\n")
    library = src / name / "selective_scan_cuda.cpython-312-x86_64-linux-gnu.so"
    library.write_bytes(body)
    library.chmod(mode)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (dist / "WHEEL").write_text(
        f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: {tags}\n\n"
    )
    if record is not None:
        (dist / "mambawin-provenance.json").write_text(json.dumps(record))
    path = folder / f"{name}-{version}-{tags}.whl"
    os.environ["SOURCE_DATE_EPOCH"] = str(EPOCH)  # the writer dates members by it
    try:
        with WheelFile(path, "w") as out:
            out.write_files(str(src))
    finally:
        del os.environ["SOURCE_DATE_EPOCH"]
    shutil.rmtree(src)
    return path


def stable_sdist_record(**changes: Any) -> dict[str, Any]:
    return provenance(
        upstream_repo="https://pypi.org/simple/",
        ref="v2.3.2",
        commit="",
        patches=[{"id": "stable-binding", "status": "applied"}],
        left_out=[],
        requirements=[],
        abi="stable",
        torch_floor="2.10",
        torch_version="",
        source={
            "kind": "sdist",
            "file": "mamba_ssm-2.3.2.tar.gz",
            "sha256": SHA,
            "index": "https://pypi.org/simple/",
        },
        **changes,
    )


MATCHING = MachineFacts(
    mambawin=__version__, torch="2.11.0", cuda="13.0", compiler=COMPILER, python="3.12"
)


# ---- the record → the request ---------------------------------------------------------------


def test_a_git_torch_wheel_maps_to_the_build_that_made_it(tmp_path: Path) -> None:
    target = read_target(make_wheel(tmp_path, provenance()), host=HOST, jobs=8)
    request = target.request
    assert request.package == MAMBA and request.ref == "v2.3.2" and request.repo is None
    assert request.source_from == "git"
    assert request.pin == SourcePin(commit=COMMIT)
    assert request.archs == parse_archs("86;90")
    assert request.abi == "torch" and request.platform is None and request.backend == "native"
    assert request.skip_patches == ("math-defines",)
    assert request.drop == ("triton",)
    assert request.keep_complex is False  # complex-removal was in effect
    assert request.local_version == "auto"  # the label the build derives
    assert request.with_ == "none" and request.jobs == 8
    assert target.epoch == EPOCH
    assert target.needs == MATCHING
    assert command_line(target) == (
        f"SOURCE_DATE_EPOCH={EPOCH} mambawin build --ref v2.3.2 --source-from git --arch '86;90' "
        "--jobs 8 --arch-groups off --skip-patch math-defines --drop triton --with none"
    )


def test_shared_passes_in_the_record_rebuild_with_proven_groups_and_none_with_off(
    tmp_path: Path,
) -> None:
    """The record keeps each proven unit's passes; a rebuild asks for grouping only then, so a
    wheel built when no proof applied rebuilds one pass per arch whatever the table holds."""
    shared = ["causal_conv1d_fwd: arch=compute_80,code=[sm_80,sm_89]"]
    grouped = make_wheel(tmp_path, provenance(archs=["80", "89"], shared_passes=shared))
    assert read_target(grouped, host=HOST, jobs=8).request.arch_groups == "proven"
    read_back = Provenance.from_dict(provenance(shared_passes=shared))
    assert read_back.shared_passes == tuple(shared)
    assert read_back.to_dict()["shared_passes"] == shared
    alone = make_wheel(tmp_path / "alone", provenance())
    assert read_target(alone, host=HOST, jobs=8).request.arch_groups == "off"
    assert "shared_passes" not in Provenance().to_dict()


def test_an_sdist_stable_wheel_pins_the_sdist_and_no_python(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path,
        stable_sdist_record(),
        version="2.3.2+cu130.stable.torch2.10",
        tags="py3-none-linux_x86_64",
    )
    target = read_target(wheel, host=HOST)
    assert target.request.source_from == "index" and target.request.repo is None
    assert target.request.pin == SourcePin(sdist_file="mamba_ssm-2.3.2.tar.gz", sdist_sha256=SHA)
    assert target.request.abi == "stable" and target.request.local_version == "auto"
    assert target.needs.python == "" and target.needs.torch == "2.11.0"  # torch_headers


def test_a_win_amd64_wheel_is_the_cross_build(tmp_path: Path) -> None:
    record = stable_sdist_record(
        compiler="cl.exe 19.44.35207 (MSVC toolset 14.44.35207), nvcc.exe 13.0, under wine"
    )
    wheel = make_wheel(
        tmp_path, record, version="2.3.2+cu130.stable.torch2.10", tags="py3-none-win_amd64"
    )
    request = read_target(wheel, host=HOST).request
    assert request.platform == "win_amd64" and request.backend == "cross-windows"
    assert request.with_ is None  # the cross build makes one package
    rooted = read_target(wheel, host=HOST, windows_root=tmp_path / "tc").request
    assert rooted.windows_root == tmp_path / "tc"
    with pytest.raises(MachineDiffers, match="rebuild it on a win_amd64 machine"):
        read_target(wheel, host="macosx_14_0_arm64")


def test_a_causal_conv1d_wheel_without_a_label_and_without_complex_removal(tmp_path: Path) -> None:
    record = provenance(
        patches=[{"id": "arch-list", "status": "applied"}], left_out=[], requirements=[]
    )
    wheel = make_wheel(tmp_path, record, name="causal_conv1d", version="1.6.1")
    request = read_target(wheel, host=HOST).request
    assert request.package == CAUSAL_CONV1D and request.local_version == "none"
    assert request.keep_complex is False and request.with_ is None
    mamba = read_target(make_wheel(tmp_path / "m", record, version="2.3.2+mine"), host=HOST).request
    assert mamba.keep_complex is True  # complex-removal neither in effect nor left out
    assert mamba.local_version == "mine"


def test_another_repository_is_kept(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, provenance(upstream_repo="https://example.com/fork/mamba"))
    assert read_target(wheel, host=HOST).request.repo == "https://example.com/fork/mamba"


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"ref": "--upload-pack=x"}, "odd ref"),
        ({"ref": "v2.3.2\nx"}, "has ref"),
        ({"archs": ["８６"]}, "archs"),
        ({"archs": ["sm_86"]}, "archs"),  # read as 86 and written back otherwise
        ({"archs": []}, "records no archs"),
        ({"source": {"kind": "git", "commit": "HEAD"}}, "names commit"),
        ({"source": {"kind": "git", "commit": "c" * 40}}, "names commit"),  # not the record's
        ({"source": {"kind": "sdist", "file": "x.tar.gz", "sha256": "zz" * 32}}, "no sha256"),
        ({"source": {"kind": "sdist", "file": "../x.tar.gz", "sha256": SHA}}, "names sdist"),
        ({"source": {"kind": "ftp"}}, "kind 'ftp'"),
        ({"source": {}}, "local folder"),
        ({"upstream_repo": "-oProxyCommand=x"}, "upstream_repo"),
        ({"left_out": ["no-such-patch"]}, "leaves out patch"),
        ({"abi": "stable"}, "says abi stable"),
        ({"abi": "weird"}, "abi 'weird'"),
        ({"build_date": "yesterday"}, "build_date"),
        ({"build_date": "2024-01-02T03:04:05"}, "time zone"),
    ],
)
def test_an_odd_record_is_refused_as_a_wheel_error(
    tmp_path: Path, changes: dict[str, Any], says: str
) -> None:
    wheel = make_wheel(tmp_path, provenance(**changes))
    with pytest.raises(WheelError, match=says) as caught:
        read_target(wheel, host=HOST)
    assert "\n" not in str(caught.value).replace("v2.3.2\\n", "")


def test_a_wheel_without_provenance_is_refused(tmp_path: Path) -> None:
    with pytest.raises(WheelError, match=r"carries no mambawin-provenance\.json"):
        read_target(make_wheel(tmp_path, None), host=HOST)


# ---- this machine against the record -------------------------------------------------------------


def _target(tmp_path: Path, record: dict[str, Any] | None = None, **kw: Any) -> Target:
    return read_target(make_wheel(tmp_path, record or provenance(), **kw), host=HOST)


def test_the_same_machine_has_no_difference(tmp_path: Path) -> None:
    assert machine_differences(_target(tmp_path), MATCHING) == []


def test_each_difference_names_its_fix(tmp_path: Path) -> None:
    other = replace(MATCHING, torch="2.10.0", python="3.11", mambawin="0.0.1")
    found = {m.what: m for m in machine_differences(_target(tmp_path), other)}
    assert set(found) == {"torch", "Python", "mambawin"}
    assert found["torch"].fix == "pip install torch==2.11.0"
    assert found["Python"].fix == "run mambawin with Python 3.12"
    assert found["mambawin"].fix == f"pip install mambawin=={__version__}"


def test_a_stable_wheel_checks_no_python_and_a_cross_one_fixes_the_windows_toolchain(
    tmp_path: Path,
) -> None:
    record = stable_sdist_record(compiler="cl.exe 19.44, nvcc.exe 13.0, under wine")
    target = _target(
        tmp_path, record, version="2.3.2+cu130.stable.torch2.10", tags="py3-none-win_amd64"
    )
    found = machine_differences(target, replace(MATCHING, python="3.9", torch="2.10.0"))
    assert [m.what for m in found] == ["torch", "compiler"]
    assert found[0].fix == "mambawin toolchain windows --setup --torch 2.11.0"


# ---- the rebuild and its comparison --------------------------------------------------------------


def copying_build(
    source: Path, *, body: bytes | None = None, seen: list[Any] | None = None
) -> Callable[[BuildRequest], Outcome]:
    """A build that writes the published wheel again (or one whose library is body) into out."""

    def build(request: BuildRequest) -> Outcome:
        if seen is not None:
            seen.append((request, os.environ.get("SOURCE_DATE_EPOCH")))
        request.out.mkdir(parents=True)
        if body is None:
            wheel = request.out / source.name
            shutil.copyfile(source, wheel)
        else:
            wheel = make_wheel(request.out, provenance(), body=body)
        return Outcome((_result(wheel),))

    return build


def _result(wheel: Path) -> BuildResult:
    return BuildResult(
        wheel=wheel,
        size=wheel.stat().st_size,
        sha256="",
        archs="90",
        log=None,
        version="2.3.2",
        commit=COMMIT,
        key="k",
        build_dir=wheel.parent,
        units_compiled=0,
        reused_objects=False,
        steps={},
        package=MAMBA.name,
    )


def test_an_identical_rebuild(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    target = _target(tmp_path)
    seen: list[Any] = []
    report = rebuild(
        [target], build=copying_build(target.wheel, seen=seen), probe=lambda r: MATCHING
    )
    assert report.identical
    ((request, epoch),) = seen
    assert epoch == str(EPOCH) and "SOURCE_DATE_EPOCH" not in os.environ  # set for the build only
    assert request.pin == target.request.pin and request.out.name == "wheelhouse"
    assert not request.out.exists()  # the scratch folder is mambawin's and gone
    assert report.to_json()["wheels"][0]["differences"] == []  # type: ignore[index]


def test_a_differing_rebuild_names_the_member(tmp_path: Path) -> None:
    target = _target(tmp_path)
    keep = tmp_path / "kept"
    report = rebuild(
        [target],
        build=copying_build(target.wheel, body=b"\x7fELF other"),
        probe=lambda r: MATCHING,
        keep=keep,
    )
    assert not report.identical
    (only,) = report.wheels
    assert f"content: {SO}" in only.comparison.differences
    assert only.kept == keep / target.wheel.name and only.kept.is_file()


def test_a_machine_that_differs_or_a_keep_that_is_a_file_builds_nothing(tmp_path: Path) -> None:
    def build(request: BuildRequest) -> Outcome:
        raise AssertionError("built on a machine that cannot give the same bytes")

    (tmp_path / "a-file").write_text("mine\n")
    with pytest.raises(UsageError, match="is not a folder"):
        rebuild(
            [_target(tmp_path)], build=build, probe=lambda r: MATCHING, keep=tmp_path / "a-file"
        )

    with pytest.raises(MachineDiffers, match=r"pip install torch==2\.11\.0") as caught:
        rebuild([_target(tmp_path)], build=build, probe=lambda r: replace(MATCHING, torch="2.10.0"))
    assert "\n" not in str(caught.value)


def test_the_comparison_names_modes_dates_and_members(tmp_path: Path) -> None:
    one = make_wheel(tmp_path / "a", provenance())
    other = make_wheel(tmp_path / "b", provenance(), mode=0o700)
    compared = compare_wheels(one, other)
    assert not compared.identical
    assert compared.differences[0].startswith(f"mode: {SO} 100755 against 100700")
    assert compare_wheels(one, one).identical
    with zipfile.ZipFile(other, "a") as archive:
        archive.writestr("extra.txt", "x")
    assert "only in the second: extra.txt" in compare_wheels(one, other).differences


# ---- the pinned source ---------------------------------------------------------------------------


def test_the_pin_refuses_another_sdist_and_a_moved_ref(tmp_path: Path) -> None:
    pin = SourcePin(sdist_file="mamba_ssm-2.3.2.tar.gz", sdist_sha256=SHA)
    listed = IndexFile("mamba_ssm-2.3.2.tar.gz", "u", "c" * 64, Version("2.3.2"), "i")
    with pytest.raises(UpstreamError, match="another file under the same name"):
        pin.pick([listed])
    with pytest.raises(UpstreamError, match="no longer lists"):
        pin.pick([])
    assert pin.pick([replace(listed, sha256=SHA)]).sha256 == SHA
    moved = Checkout(tmp_path, "r", "v2.3.2", "d" * 40, "2.3.2", None)
    with pytest.raises(UpstreamError, match="the ref moved"):
        SourcePin(commit=COMMIT).check(moved)
    SourcePin(commit=COMMIT).check(replace(moved, commit=COMMIT))
    with pytest.raises(UpstreamError, match="a git checkout"):
        pin.check(moved)


# ---- the command ---------------------------------------------------------------------------------


def never(request: BuildRequest) -> Outcome:
    raise AssertionError("--plan or a refusal compiled")


def invoke(args: list[str], **obj: Any) -> Any:
    context = {"host": HOST, "machine_facts": lambda r: MATCHING, "build": never, **obj}
    return CliRunner().invoke(app, ["rebuild", *args], obj=context)


def test_plan_compiles_nothing_and_shows_the_command(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, provenance())
    result = invoke([str(wheel), "--plan"])
    assert result.exit_code == 0, result.output
    assert f"SOURCE_DATE_EPOCH={EPOCH} mambawin build --ref v2.3.2" in result.stdout
    assert f"source: commit {COMMIT}" in result.stdout and "torch 2.11.0: ok" in result.stdout
    document = json.loads(invoke([str(wheel), "--plan", "--json"]).stdout)
    assert document["ready"] is True and document["wheels"][0]["checks"][0]["what"] == "mambawin"


def test_a_different_machine_is_exit_13_with_one_json_document(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, provenance())
    facts = {"machine_facts": lambda r: replace(MATCHING, cuda="12.9")}
    for args in ([str(wheel)], [str(wheel), "--plan"]):
        result = invoke([*args, "--json"], **facts)
        assert result.exit_code == MachineDiffers.exit_code, result.output
        document = json.loads(result.stdout)
        assert "CUDA 13.0" in document["error"] and document["exit_code"] == 13
    plain = invoke([str(wheel)], **facts)
    assert plain.exit_code == 13 and plain.stdout == ""
    assert len([line for line in plain.stderr.splitlines() if line.strip()]) == 1


def test_identical_and_differing_results(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, provenance())
    same = invoke([str(wheel)], build=copying_build(wheel))
    assert same.exit_code == 0, same.output
    assert same.stdout.startswith(f"{wheel}: identical (sha256 ")
    other = invoke([str(wheel), "--json"], build=copying_build(wheel, body=b"\x7fELF other"))
    assert other.exit_code == RebuildDiffers.exit_code, other.output
    document = json.loads(other.stdout)
    assert document["identical"] is False
    (entry,) = document["wheels"]
    assert set(entry) >= {"wheel", "sha256", "rebuilt_sha256", "identical", "differences"}
    assert f"content: {SO}" in entry["differences"]
    text = invoke([str(wheel)], build=copying_build(wheel, body=b"\x7fELF other"))
    assert (
        text.exit_code == 14
        and f"{wheel}: DIFFERS: " in text.stdout
        and f"content: {SO}" in text.stdout
    )


@pytest.mark.parametrize("kind", ["no-provenance", "fifo", "loop", "not-a-wheel"])
def test_bad_wheels_are_one_line_exit_7(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "mamba_ssm-2.3.2-cp312-cp312-linux_x86_64.whl"
    if kind == "no-provenance":
        path = make_wheel(tmp_path, None)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path)
    else:
        path = tmp_path / "notes.txt"
        path.write_text("x")
    result = invoke([str(path), "--json"])
    assert result.exit_code == WheelError.exit_code, result.output
    assert json.loads(result.stdout)["exit_code"] == 7
    assert len([line for line in result.stderr.splitlines() if line.strip()]) == 1


# ---- a real rebuild ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_real_published_wheel_rebuilds_to_the_same_bytes(tmp_path: Path) -> None:
    value = os.environ.get("MAMBAWIN_TEST_REBUILD_WHEEL")
    if not value:
        pytest.skip("MAMBAWIN_TEST_REBUILD_WHEEL is not set (a wheel mambawin built, to rebuild)")
    result = CliRunner().invoke(app, ["rebuild", value, "--json", "--keep", str(tmp_path)])
    document = json.loads(result.stdout)
    assert result.exit_code == 0, document
    assert document["identical"] is True


# ---- the real pipeline on a fake upstream: build, then rebuild from another cache folder ---------


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Any]:
    """The fake causal-conv1d 0.1.0 built from its sdist on a file:// index (no nvcc: its
    build_ext writes a placeholder), as `build --source-from index` does; and its doctor."""
    from sdist_index import make_index, make_sdist, use_index
    from test_build import RecordedDoctor
    from test_build_causal_conv1d import TOOLCHAIN

    from mambawin.builder import pipeline
    from mambawin.builder.request import Tools
    from mambawin.doctor.checks import DoctorReport

    simple = make_index(tmp_path / "index", [make_sdist(tmp_path, "0.1.0")])
    use_index(monkeypatch, simple.as_uri())
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    doctor = RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)])
    request = BuildRequest(
        ref="v0.1.0", package=CAUSAL_CONV1D, source_from="index", out=tmp_path / "published"
    )
    result = pipeline.build(request, tools=Tools(doctor=doctor))
    assert result.wheel is not None
    return result.wheel, doctor


def test_a_built_wheel_rebuilds_to_its_bytes_from_another_cache_folder(
    built: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mambawin import dispatch
    from mambawin.builder.request import Tools

    wheel, doctor = built
    published = wheel.read_bytes()
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "a" / "much" / "longer" / "cache"))
    tools = Tools(doctor=doctor)
    target = read_target(wheel)
    assert target.request.source_from == "index" and target.request.pin is not None
    report = rebuild(
        [target],
        build=lambda r: dispatch.run(r, tools=tools),
        probe=lambda r: dispatch.machine_facts(r, tools),
        keep=tmp_path / "kept",
    )
    assert report.identical, report.to_json()
    assert wheel.read_bytes() == published  # the published wheel is only read
    assert (tmp_path / "kept" / wheel.name).read_bytes() == published


def test_another_sdist_under_the_same_name_is_refused_before_the_build(
    built: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sdist_index import make_index, use_index

    from mambawin import dispatch
    from mambawin.builder.request import Tools

    wheel, doctor = built
    # the same file name, other bytes: a re-upload, or another index's file
    (tmp_path / "re-uploaded").mkdir()
    note = tmp_path / "re-uploaded" / "PKG-INFO"
    note.write_text("Metadata-Version: 2.1\nName: causal_conv1d\nVersion: 0.1.0\n")
    other = tmp_path / "re-uploaded" / "causal_conv1d-0.1.0.tar.gz"
    with tarfile.open(other, "w:gz") as tar:
        tar.add(note, "causal_conv1d-0.1.0/PKG-INFO")
    simple = make_index(tmp_path / "other-index", [other])
    use_index(monkeypatch, simple.as_uri())
    monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / "fresh-cache"))
    compiled: list[BuildRequest] = []
    tools = Tools(doctor=doctor)

    def build(request: BuildRequest) -> Outcome:
        compiled.append(request)
        return dispatch.run(request, tools=tools)

    with pytest.raises(UpstreamError, match="another file under the same name"):
        rebuild([read_target(wheel)], build=build, probe=lambda r: dispatch.machine_facts(r, tools))
    assert compiled  # the build ran and its fetch refused the sdist, before any patch or compile


def test_a_git_build_from_a_local_clone_rebuilds_with_repo_and_a_moved_tag_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import git
    from test_build import RecordedDoctor
    from test_build_causal_conv1d import TOOLCHAIN, fake

    from mambawin import dispatch
    from mambawin.builder import pipeline
    from mambawin.builder.request import Tools
    from mambawin.doctor.checks import DoctorReport

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    repo = fake(tmp_path, "fake_causal_conv1d")
    tools = Tools(doctor=RecordedDoctor([DoctorReport((), True, parse_archs("90"), 2, TOOLCHAIN)]))
    asked = BuildRequest(
        repo=str(repo), ref="v0.1.0", package=CAUSAL_CONV1D, out=tmp_path / "published"
    )
    wheel = pipeline.build(asked, tools=tools).wheel
    assert wheel is not None
    with pytest.raises(UsageError, match="built from a local clone: pass --repo"):
        read_target(wheel)
    with pytest.raises(UsageError, match="the provenance would differ"):
        read_target(wheel, repo="https://example.com/other/causal-conv1d")

    def again(cache: str) -> RebuildReport:
        monkeypatch.setenv("MAMBAWIN_CACHE_DIR", str(tmp_path / cache))
        return rebuild(
            [read_target(wheel, repo=str(repo))],
            build=lambda r: dispatch.run(r, tools=tools),
            probe=lambda r: dispatch.machine_facts(r, tools),
        )

    assert again("another/longer/cache").identical
    moved = git.Repo(repo)
    (repo / "NEW").write_text("a later commit\n")
    moved.index.add(["NEW"])
    actor = git.Actor("test", "test@example.invalid")
    moved.index.commit("later", author=actor, committer=actor)
    moved.create_tag("v0.1.0", force=True)
    with pytest.raises(UpstreamError, match="the ref moved"):
        again("third-cache")
