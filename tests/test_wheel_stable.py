"""A stable-ABI wheel's rewrite: py3-none tags (name and WHEEL), torch >= the floor, the stable
label, provenance and the guard that accepts every torch from the floor on; the build key's abi."""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from mambawin.abi import STABLE_FLOOR, torch_requirement
from mambawin.builder.key import KeyInputs, build_key
from mambawin.errors import WheelError
from mambawin.wheel import stable_wheel
from mambawin.wheel.guard import Built, guard_versions, set_guard
from mambawin.wheel.info import read_wheel
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import Provenance, normalize_local_label, stable_label
from mambawin.wheel.repack import retag, rewrite_wheel

TAG = "cp311-cp311-linux_x86_64"
LIBRARY = "causal_conv1d_cuda_stable.abi3.so"


def make_wheel(folder: Path, requires: tuple[str, ...] = ("torch", "packaging", "ninja")) -> Path:
    """A small causal_conv1d wheel as bdist_wheel tags it: cp311-cp311, the library, the shim."""
    src = folder / "src"
    dist = src / "causal_conv1d-1.6.1.dist-info"
    (src / "causal_conv1d").mkdir(parents=True)
    dist.mkdir()
    (src / "causal_conv1d" / "__init__.py").write_text('__version__ = "1.6.1"\n')
    (src / "causal_conv1d_cuda.py").write_text("import torch\n")
    (src / LIBRARY).write_bytes(b"\x7fELF" + bytes(range(64)))
    metadata = ["Metadata-Version: 2.1", "Name: causal_conv1d", "Version: 1.6.1"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    (dist / "METADATA").write_text("\n".join(metadata) + "\n\nCausal conv1d.\n")
    (dist / "WHEEL").write_text(
        f"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: false\nTag: {TAG}\n\n"
    )
    path = folder / f"causal_conv1d-1.6.1-{TAG}.whl"
    with WheelFile(path, "w") as out:
        out.write_files(str(src))
    return path


def stable_provenance() -> Provenance:
    return Provenance(
        version="1.6.1",
        torch_version="2.14.1+cu130",
        cuda_version="13.0",
        abi="stable",
        torch_floor=str(STABLE_FLOOR),
    )


def rewritten(tmp_path: Path) -> Path:
    return rewrite_wheel(
        make_wheel(tmp_path),
        tmp_path / "out",
        local_version=stable_label("13.0", str(STABLE_FLOOR)),
        provenance=stable_provenance(),
        abi="stable",
    )


def test_a_stable_wheel_is_tagged_py3_none_in_its_name_and_wheel_file(tmp_path: Path) -> None:
    wheel = rewritten(tmp_path)
    assert wheel.name == "causal_conv1d-1.6.1+cu130.stable.torch2.10-py3-none-linux_x86_64.whl"
    info = read_wheel(wheel)  # checks the WHEEL Tag lines against the name, and RECORD
    assert info.file.tags == frozenset({"py3-none-linux_x86_64"})
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        wheel_file = archive.read(f"{info.dist_info}/WHEEL").decode()
    assert "Tag: py3-none-linux_x86_64\n" in wheel_file and TAG not in wheel_file
    assert "Root-Is-Purelib: false" in wheel_file
    assert LIBRARY in names and "causal_conv1d_cuda.py" in names
    assert (tmp_path / f"causal_conv1d-1.6.1-{TAG}.whl").is_file()  # the input is untouched


def test_a_stable_wheel_requires_torch_from_the_floor(tmp_path: Path) -> None:
    wheel = rewritten(tmp_path)
    assert requirements(wheel) == [torch_requirement(), "packaging", "ninja"]
    assert torch_requirement() == f"torch>={STABLE_FLOOR}"
    info = read_wheel(wheel)
    with zipfile.ZipFile(wheel) as archive:
        record = json.loads(archive.read(f"{info.dist_info}/mambawin-provenance.json"))
    assert record["abi"] == "stable" and record["torch_floor"] == "2.10"
    assert record["requirements"][0]["from"] == "torch"
    assert record["requirements"][0]["to"] == "torch>=2.10"


def test_a_second_rewrite_keeps_the_tags_and_the_requirement(tmp_path: Path) -> None:
    first = rewritten(tmp_path)
    second = rewrite_wheel(first, tmp_path / "again", abi="stable")
    assert second.name == first.name
    assert requirements(second) == requirements(first)


@pytest.mark.parametrize(
    ("requires", "expected"),
    [
        (("torch>=2.4",), ["torch>=2.10,>=2.4"]),
        (("torch>=2.12",), ["torch>=2.10,>=2.12"]),  # both hold; never loosened
        (("packaging",), ["packaging", "torch>=2.10"]),
    ],
)
def test_the_floor_joins_what_upstream_requires(
    tmp_path: Path, requires: tuple[str, ...], expected: list[str]
) -> None:
    wheel = rewrite_wheel(make_wheel(tmp_path, requires), tmp_path / "out", abi="stable")
    assert requirements(wheel) == expected


def test_a_torch_abi_rewrite_keeps_setup_pys_tags(tmp_path: Path) -> None:
    wheel = rewrite_wheel(make_wheel(tmp_path), tmp_path / "out")
    assert wheel.name.endswith(f"-{TAG}.whl")
    assert requirements(wheel)[0] == "torch"


def test_retag_keeps_every_other_byte_and_writes_one_tag_per_platform() -> None:
    wheel_file = b"Wheel-Version: 1.0\r\nTag: cp311-cp311-a\r\nTag: cp311-cp311-b\r\nBuild: 1\r\n"
    assert retag(wheel_file, "py3", "none", "a.b") == (
        b"Wheel-Version: 1.0\r\nTag: py3-none-a\r\nTag: py3-none-b\r\nBuild: 1\r\n"
    )
    with pytest.raises(WheelError, match="no Tag line"):
        retag(b"Wheel-Version: 1.0\n", "py3", "none", "a")


def test_the_stable_label_is_pep440_and_says_stable_and_the_floor() -> None:
    label = stable_label("13.0.1", "2.10")
    assert label == "cu130.stable.torch2.10" == normalize_local_label(label)


def test_the_guard_of_a_stable_wheel_accepts_every_torch_from_the_floor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = guard_versions(stable_provenance())
    assert built == Built("2.10", "13", at_least=True)
    guard = set_guard(b'"""causal_conv1d."""\n', built, "causal_conv1d").decode()
    for version, cuda, fits in (
        ("2.14.1+cu130", "13.0", True),
        ("2.10.0", "13.0", True),
        ("2.9.1", "13.0", False),
        ("2.14.1", "12.8", False),
    ):
        torch = type("torch", (), {"__version__": version, "version": type("v", (), {})})
        torch.version.cuda = cuda  # type: ignore[attr-defined]
        monkeypatch.setitem(__import__("sys").modules, "torch", torch)
        if fits:
            exec(guard, {})
        else:
            with pytest.raises(ImportError, match=r"built for torch >= 2\.10 with CUDA 13\.x"):
                exec(guard, {})


def test_the_key_separates_abis_and_keeps_torch_keys() -> None:
    inputs = KeyInputs("c0ffee", (), "tree", "90", "2.14", "13.0", "gcc", "cp311", "linux", False)
    assert build_key(replace(inputs, abi="stable")) != build_key(inputs)
    # A torch-ABI key without a front-end table is what it was before the abi and front_table
    # fields existed (the kept builds stay valid).
    fields = {k: v for k, v in asdict(inputs).items() if k not in ("abi", "front_table")}
    before = hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    assert build_key(inputs) == before


@pytest.mark.parametrize(
    ("record", "stable", "floor"),
    [
        ({"abi": "stable", "torch_floor": "2.11", "cuda_version": "13.0"}, True, "2.11"),
        # an older record without its floor: stable for the audit, so stable for the guard too
        ({"abi": "stable", "cuda_version": "13.0"}, True, "2.10"),
        ({"abi": "torch", "torch_version": "2.8.0", "cuda_version": "12.9"}, False, None),
        ({"torch_version": "2.8.0", "cuda_version": "12.9"}, False, None),
    ],
)
def test_the_guard_and_the_audit_agree_on_what_makes_a_wheel_stable(
    record: dict[str, str], stable: bool, floor: str | None
) -> None:
    provenance = Provenance.from_dict(record)
    assert provenance.is_stable is stable is stable_wheel.is_stable(provenance)
    built = guard_versions(provenance)
    assert built is not None and built.at_least is stable
    if floor is not None:
        assert (
            built.torch == floor == str(provenance.floor) == str(stable_wheel.floor_of(provenance))
        )


def test_the_typed_provenance_reads_back_what_it_wrote() -> None:
    written = Provenance(
        upstream_repo="r",
        commit="c",
        patches=({"id": "arch-list", "status": "applied"},),
        archs=("sm_90",),
        abi="stable",
        torch_floor="2.10",
        build_date="2023-11-14T22:13:20+00:00",
    )
    assert Provenance.from_dict(written.to_dict()) == written
    assert Provenance.from_dict(None) == Provenance(build_date="")
    assert written.torch_target == ">= 2.10"
    with pytest.raises(WheelError, match="torch_floor 'x' is not a version"):
        _ = Provenance.from_dict({"abi": "stable", "torch_floor": "x"}).floor
