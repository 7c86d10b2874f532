"""verify's wheel discovery (one wheel or a wheelhouse) and the mamba-ssm/causal-conv1d pair."""

from __future__ import annotations

from pathlib import Path

import pytest
from wheel.wheelfile import WheelFile

from mambawin.errors import UsageError
from mambawin.packages import CAUSAL_CONV1D, MAMBA
from mambawin.verify.packages import find_wheels, pair_problems
from mambawin.wheel.provenance import Provenance

MAMBA_NAME, CONV_NAME = MAMBA.name, CAUSAL_CONV1D.name


def wheel(folder: Path, dist: str, version: str, tag: str = "py3-none-any") -> Path:
    """A minimal real wheel (RECORD by `wheel`) of distribution `dist`."""
    path = folder / f"{dist}-{version}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    with WheelFile(path, "w") as archive:
        archive.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
        )
        archive.writestr(
            f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n"
        )
    return path


def test_a_wheelhouse_yields_both_packages_mamba_first(tmp_path):
    wheel(tmp_path, "causal_conv1d", "1.6.1.post4+cu130torch2.11")
    wheel(tmp_path, "mamba_ssm", "2.3.2.post1+cu130torch2.11")
    wheel(tmp_path, "einops", "0.8.1")  # a dependency wheel in the same folder is left alone
    refs = find_wheels(tmp_path)
    assert [(r.project, r.extension) for r in refs] == [
        (MAMBA_NAME, "selective_scan_cuda"),
        (CONV_NAME, "causal_conv1d_cuda"),
    ]
    assert refs[1].version == "1.6.1.post4+cu130torch2.11" and refs[1].label == "causal_conv1d"


def test_several_wheels_of_one_package_keep_the_one_that_fits(tmp_path):
    fits = wheel(tmp_path, "mamba_ssm", "2.3.2", "cp312-cp312-win_amd64")
    wheel(tmp_path, "mamba_ssm", "2.3.2", "cp311-cp311-win_amd64")
    assert find_wheels(tmp_path, fits=["cp312-cp312-win_amd64"])[0].path == fits
    with pytest.raises(UsageError, match="2 mamba_ssm wheels"):
        find_wheels(tmp_path, fits=["cp312-cp312-win_amd64", "cp311-cp311-win_amd64"])


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        (lambda d: d / "missing.whl", "does not exist"),
        (lambda d: d, "holds no mamba_ssm or causal_conv1d wheel"),
        (lambda d: wheel(d, "einops", "0.8.1"), "verify checks mamba_ssm and causal_conv1d"),
    ],
)
def test_bad_paths_are_usage_errors(tmp_path, make, fragment):
    with pytest.raises(UsageError, match=fragment):
        find_wheels(make(tmp_path))


def test_the_pair_rule():
    same = Provenance.from_dict({"torch_version": "2.11.0", "cuda_version": "13.0"})
    assert (
        pair_problems(("2.3.2.post1+cu130torch2.11", same), ("1.6.1.post4+cu130torch2.11", same))
        == []
    )
    old = pair_problems(("2.2.6", None), ("1.2.0.post2", None))
    assert len(old) == 1 and "needs causal_conv1d>=1.5.1, found 1.2.0.post2" in old[0]
    assert pair_problems(("2.1.0", None), ("1.4.0", None)) == []
    assert pair_problems(("1.2.2", None), ("1.2.0", None)) == []
    labels = pair_problems(("2.3.2+cu130torch2.11", None), ("1.6.1+cu128torch2.8", None))
    assert len(labels) == 1 and "local labels differ" in labels[0]
    torch = pair_problems(
        ("2.3.2", same),
        ("1.6.1", Provenance.from_dict({"torch_version": "2.10.0", "cuda_version": "13.0"})),
    )
    assert torch == [
        "built for different torch (2.11 vs 2.10): rebuild both with the same toolchain"
    ]
