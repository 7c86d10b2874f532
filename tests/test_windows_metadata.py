"""What a Windows wheel's METADATA says is true for Windows: its Operating System classifiers,
its Requires-Python (the oldest Python it installs on) and mamba-ssm's causal-conv1d extra (a
causal-conv1d that serves the fast path, the pair rule's minimum)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from test_metadata import make_wheel

from mambawin.wheel.headers import WINDOWS_OS, with_platform_headers
from mambawin.wheel.metadata import header_values, requires_dist
from mambawin.wheel.repack import rewrite_wheel
from mambawin.wheel.requirements import Plan, plan, raise_floor

UPSTREAM = (
    "Metadata-Version: 2.1\nName: mamba_ssm\nVersion: {version}\nSummary: Mamba\n"
    "Classifier: Programming Language :: Python :: 3\n"
    "Classifier: License :: OSI Approved :: Apache Software License\n"
    "Classifier: Operating System :: Unix\n"
    "Requires-Python: >=3.9\n"
    "Requires-Dist: torch\n"
    'Requires-Dist: causal-conv1d>=1.2.0; extra == "causal-conv1d"\n'
    "\nMamba.\n"
)


def _metadata(wheel: Path) -> bytes:
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name)


def _rewritten(tmp_path: Path, tag: str, *, version: str = "2.2.4", abi: str = "torch") -> bytes:
    raw = UPSTREAM.format(version=version).encode()
    wheel = make_wheel(tmp_path, version=version, raw_metadata=raw, tag=tag)
    return _metadata(rewrite_wheel(wheel, tmp_path / "out", abi=abi))  # type: ignore[arg-type]


def test_a_windows_wheel_says_windows_not_unix(tmp_path: Path) -> None:
    raw = _rewritten(tmp_path, "cp312-cp312-win_amd64")
    classifiers = header_values(raw, "Classifier")
    assert "Operating System :: Unix" not in classifiers  # upstream's stayed in every wheel
    assert WINDOWS_OS in classifiers
    assert "Programming Language :: Python :: 3" in classifiers  # the rest stay
    assert (
        b"Classifier: Operating System :: Microsoft :: Windows\nRequires-Python" in raw
    )  # in place


def test_a_stable_windows_wheel_requires_the_floors_python(tmp_path: Path) -> None:
    raw = _rewritten(tmp_path, "cp312-cp312-win_amd64", abi="stable")
    assert header_values(raw, "Requires-Python") == [">=3.10"]  # it was upstream's >=3.9


def test_a_torch_abi_windows_wheel_requires_its_tags_python(tmp_path: Path) -> None:
    raw = _rewritten(tmp_path, "cp312-cp312-win_amd64")
    assert header_values(raw, "Requires-Python") == [">=3.12"]


@pytest.mark.parametrize(
    ("version", "floor"), [("2.2.5", "1.5.1"), ("2.2.4", "1.4.0"), ("2.1.0", "1.4.0")]
)
def test_the_causal_conv1d_extra_names_one_that_serves_the_fast_path(
    version: str, floor: str, tmp_path: Path
) -> None:
    raw = _rewritten(tmp_path, "cp312-cp312-win_amd64", version=version)
    wanted = f'causal-conv1d>={floor}; extra == "causal-conv1d"'
    assert wanted in requires_dist(raw)  # it was >=1.2.0: below the 1.4.0 the kernels need


def test_a_linux_wheel_keeps_upstreams_headers_byte_for_byte(tmp_path: Path) -> None:
    raw = _rewritten(tmp_path, "cp312-cp312-linux_x86_64")
    assert raw == UPSTREAM.format(version="2.2.4").encode()


def test_a_second_rewrite_changes_nothing(tmp_path: Path) -> None:
    first = make_wheel(
        tmp_path, version="2.2.4", raw_metadata=UPSTREAM.format(version="2.2.4").encode(),
        tag="cp312-cp312-win_amd64",
    )  # fmt: skip
    once = rewrite_wheel(first, tmp_path / "once")
    twice = rewrite_wheel(once, tmp_path / "twice")
    assert _metadata(once) == _metadata(twice)


def test_missing_headers_are_added_after_the_last_one() -> None:
    changes = with_platform_headers(Plan((), ()), "win_amd64", [], None, Version("3.10"))
    assert [c.after for c in changes.classifiers] == [WINDOWS_OS]
    assert changes.python is not None and changes.python.after == ">=3.10"
    from mambawin.wheel.metadata import edit_metadata

    raw = b"Metadata-Version: 2.1\nName: x\nVersion: 1\n\nbody\n"
    edited = edit_metadata(raw, changes, None)
    assert edited == (
        b"Metadata-Version: 2.1\nName: x\nVersion: 1\n"
        b"Classifier: Operating System :: Microsoft :: Windows\nRequires-Python: >=3.10\n\nbody\n"
    )
    assert edit_metadata(b"Name: x", changes, None).startswith(b"Name: x\nClassifier: ")


@pytest.mark.parametrize(
    ("given", "floor", "wanted"),
    [
        (">=3.9", ">=3.10", ">=3.10"),
        (">=3.11", ">=3.10", ">=3.11"),  # a higher own floor stays
        (">=3.9,<3.14", ">=3.10", "<3.14,>=3.10"),
        ("", ">=3.10", ">=3.10"),
        (">3.8", ">=3.10", ">=3.10"),
        ("~=3.9", ">=3.10", "~=3.9,>=3.10"),  # not a plain lower bound: kept, floor added
        (">=1.2.0", ">=1.4.0", ">=1.4.0"),
        (">=1.1.0", ">=1.1.0,<1.2.0", "<1.2.0,>=1.1.0"),
    ],
)
def test_raise_floor(given: str, floor: str, wanted: str) -> None:
    assert raise_floor(SpecifierSet(given), SpecifierSet(floor)) == SpecifierSet(wanted)


@pytest.mark.parametrize("value", ["garbage", ">=", "3.10"])
def test_a_requires_python_packaging_cannot_read_is_left_as_upstream_wrote_it(value: str) -> None:
    changes = with_platform_headers(Plan((), ()), "win_amd64", [], value, Version("3.10"))
    assert changes.python is None


@pytest.mark.parametrize(
    "classifier",
    [
        "Operating System :: POSIX :: Linux",
        "Operating System :: MacOS",
        "Operating System :: Unix",
    ],
)
def test_every_other_systems_classifier_leaves_a_windows_wheel(classifier: str) -> None:
    changes = with_platform_headers(
        Plan((), ()), "win_amd64", [classifier, "Operating System :: OS Independent"], None, None
    )
    assert [(c.before, c.after) for c in changes.classifiers] == [(classifier, WINDOWS_OS)]
    # OS Independent stays true


def test_causal_conv1d_extra_is_left_alone_on_linux_and_for_causal_conv1d() -> None:
    requires = ['causal-conv1d>=1.2.0; extra == "causal-conv1d"']
    assert plan("mamba-ssm", "linux_x86_64", requires, version="2.2.4").changes == ()
    assert plan("causal-conv1d", "win_amd64", requires, version="1.5.0").changes == ()


def test_a_stable_wheel_rewritten_again_by_metadata_keeps_the_floors_python(tmp_path: Path) -> None:
    # `mambawin metadata` passes no abi: the provenance says the wheel is a stable one
    stable = make_wheel(
        tmp_path, version="2.2.4", raw_metadata=UPSTREAM.format(version="2.2.4").encode(),
        tag="py3-none-win_amd64",
    )  # fmt: skip
    provenance = {"schema": 1, "abi": "stable", "torch_floor": "2.10", "cuda_version": "13.0"}
    once = rewrite_wheel(stable, tmp_path / "once", provenance=provenance)
    assert header_values(_metadata(once), "Requires-Python") == [">=3.10"]
