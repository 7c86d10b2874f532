"""torch.compile(fullgraph=True) through upstream's whole models on a stable pair, on the GPU.

`MAMBAWIN_TEST_STABLE_WHEELS=<folder with a stable mamba-ssm and causal-conv1d wheel> pytest -m gpu
tests/test_compile_gpu.py`: the wheels are installed into a scratch folder (no dependencies: torch,
triton, einops and transformers come from this interpreter) and verify's compile runner runs there
in a child process, once per model: upstream's Mamba and Mamba2 blocks forward and backward, and
MambaLMHeadModel (Mamba1 and Mamba2 layers) a training step, in float32 and bfloat16; and the
blocks under mode="reduce-overhead" (CUDA graphs). Each must match eager within verify's
tolerances and be one graph with no break (torch._dynamo.explain, fullgraph=True). Mamba2 too:
a stable mamba-ssm wheel built with the ssd-custom-ops patch runs the chunked scan whose backward
reads Triton autotuners' choices as custom ops. Only a wheel built before that patch may stop the
graph at the line the runner knows (UPSTREAM_LIMITS, docs/stable-abi.md), naming it and still
matching eager compiled without fullgraph. Any other break fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mambawin.patch.base import MARK_BEGIN
from mambawin.patch.mamba import ssd_custom_ops

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parent.parent
# Models whose graphs upstream's own Python stops in a wheel without ssd-custom-ops (the runner
# names the line); with the patch, and for all others, whole.
LIMITED = {"Mamba2", "MambaLMHeadModel[Mamba2]"}


def has_ssd_custom_ops(site: Path) -> bool:
    """Whether the installed mamba-ssm wheel was built with the ssd-custom-ops patch."""
    source = site / ssd_custom_ops.FILE
    return f"{MARK_BEGIN} {ssd_custom_ops.ID}" in source.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stable pair installed into a scratch folder."""
    folder = os.environ.get("MAMBAWIN_TEST_STABLE_WHEELS")
    if not folder:
        pytest.skip("set MAMBAWIN_TEST_STABLE_WHEELS to a folder of stable wheels")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    wheels = sorted(Path(folder).glob("*.stable.*.whl"))
    assert {w.name.split("-")[0] for w in wheels} == {"mamba_ssm", "causal_conv1d"}, wheels
    target = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*pip, "--target", str(target), *map(str, wheels)], check=True)
    return target


def compile_rows(site: Path, *args: str) -> list[dict]:
    """verify's compile runner with args, in a child with the pair first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    command = [sys.executable, "-m", "mambawin.verify.runners.compile", "--json", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])["rows"]


def _assert_compiled(rows: list[dict], expected: int, *, whole: bool) -> None:
    """whole: the wheel has ssd-custom-ops, so every model must be one graph."""
    assert len(rows) == expected
    for row in rows:
        where = f"{row['model']} {row['dtype']}: {row['reason']} {row.get('reasons')}"
        assert row["passed"], where  # matches eager (and, unless limited, one graph)
        if whole or row["model"] not in LIMITED or "limit" not in row:
            assert (row["graphs"], row["breaks"]) == (1, 0), where
        else:
            assert row["limit"].startswith("upstream's "), where


@pytest.mark.parametrize(
    "model",
    [("--block", "Mamba"), ("--block", "Mamba2"), ("--lm", "Mamba1"), ("--lm", "Mamba2")],
    ids=["Mamba", "Mamba2", "LM-Mamba1", "LM-Mamba2"],
)
def test_compiles_whole_forward_and_backward_and_matches_eager(
    site: Path, model: tuple[str, str]
) -> None:
    rows = compile_rows(site, *model, "--dtypes", "float32,bfloat16", "--iters", "3")
    _assert_compiled(rows, 2, whole=has_ssd_custom_ops(site))


@pytest.mark.parametrize("block", ["Mamba", "Mamba2"])
def test_blocks_compile_with_cuda_graphs(site: Path, block: str) -> None:
    args = ("--block", block, "--dtypes", "bfloat16", "--mode", "reduce-overhead", "--iters", "3")
    _assert_compiled(compile_rows(site, *args), 1, whole=has_ssd_custom_ops(site))
