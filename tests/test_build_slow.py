"""A real build of upstream v2.2.6 for sm_90 (minutes of nvcc): `pytest -m slow`."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from mambawin.archs import parse_archs
from mambawin.builder import pipeline as core
from mambawin.builder.options import BuildOptions
from mambawin.wheel.gpucode import list_gpu_code
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import read_provenance


@pytest.mark.slow
@pytest.mark.upstream
def test_real_v226_build_for_sm90_then_an_identical_rebuild(
    upstream_repo: Path, tmp_path: Path
) -> None:
    options = BuildOptions(
        repo=str(upstream_repo), ref="v2.2.6", archs=parse_archs("90"), out=tmp_path / "wheels"
    )
    first = core.build(options)

    assert first.wheel.name.startswith("mamba_ssm-2.2.6+cu")
    assert not any(r.startswith("triton") for r in requirements(first.wheel))
    provenance = read_provenance(first.wheel)
    assert provenance is not None and provenance.stored["archs"] == ["90"]
    with zipfile.ZipFile(first.wheel) as archive:
        names = [n for n in archive.namelist() if n.startswith("selective_scan_cuda")]
        assert len(names) == 1
        binary = tmp_path / names[0]
        binary.write_bytes(archive.read(names[0]))
    assert list_gpu_code(binary).sass == ("sm_90",)

    second = core.build(options)
    assert (second.reused_objects, second.units_compiled) == (True, 0)
    assert "ninja: no work to do." in second.log.read_text()
