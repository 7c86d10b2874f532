"""`build --plan` names the wheel the real build then writes: one real build per package through
upstream's own setup.py (minutes of nvcc: `pytest -m slow`, torch and nvcc needed).

The upstream clones come from the environment: MAMBAWIN_TEST_UPSTREAM (state-spaces/mamba) and
MAMBAWIN_TEST_CAUSAL_CONV1D (Dao-AILab/causal-conv1d); a package whose variable is unset is
skipped. MAMBAWIN_TEST_REF / MAMBAWIN_TEST_CAUSAL_CONV1D_REF pick the tag (default: the clone's
newest release; causal-conv1d v1.6.1.post4 and mamba v2.3.2 are the tags whose version file
disagrees with the tag), MAMBAWIN_TEST_ARCH the arch (default 90).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mambawin.archs import parse_archs
from mambawin.builder import pipeline as core
from mambawin.builder.options import BuildOptions
from mambawin.packages import CAUSAL_CONV1D, MAMBA, Package


@pytest.mark.slow
@pytest.mark.upstream
@pytest.mark.parametrize(
    ("package", "variable"),
    [(MAMBA, "MAMBAWIN_TEST_UPSTREAM"), (CAUSAL_CONV1D, "MAMBAWIN_TEST_CAUSAL_CONV1D")],
    ids=["mamba-ssm", "causal-conv1d"],
)
def test_the_real_build_writes_the_wheel_the_plan_names(
    package: Package, variable: str, tmp_path: Path
) -> None:
    repo = os.environ.get(variable)
    if not repo:
        pytest.skip(f"{variable} is not set (a git clone of {package.default_repo})")
    pytest.importorskip("torch", reason="a real build needs torch with CUDA")
    ref_variable = "MAMBAWIN_TEST_REF" if package == MAMBA else f"{variable}_REF"
    options = BuildOptions(
        repo=repo,
        ref=os.environ.get(ref_variable) or None,
        package=package,
        archs=parse_archs(os.environ.get("MAMBAWIN_TEST_ARCH", "90")),
        out=tmp_path / "wheelhouse",
    )

    planned = core.plan(options)
    built = core.build(options)

    assert built.wheel is not None and built.wheel.name == planned.wheel
    assert planned.units and planned.gencode
