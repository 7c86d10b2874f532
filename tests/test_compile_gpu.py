"""torch.compile(fullgraph=True) through upstream's whole models on a stable pair, on the GPU.

`MAMBAWIN_TEST_STABLE_WHEELS=<folder with a stable mamba-ssm and causal-conv1d wheel> pytest -m gpu
tests/test_compile_gpu.py`: the wheels are installed into a scratch folder (no dependencies: torch,
triton, einops and transformers come from this interpreter) and verify's compile runner runs there
in a child process, once per model: upstream's Mamba and Mamba2 blocks forward and backward, and
MambaLMHeadModel (Mamba1 and Mamba2 layers) a training step, in float32 and bfloat16; and the
blocks under mode="reduce-overhead" (CUDA graphs). Each must match eager within verify's
tolerances and be one graph with no break (torch._dynamo.explain, fullgraph=True); a model whose
upstream Python stops the graph at a line the runner knows (UPSTREAM_LIMITS, docs/stable-abi.md:
Mamba2's backward reads a Triton autotuner's choice) must name that line and still match eager
compiled without fullgraph. Any other break fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

REPO = Path(__file__).resolve().parent.parent
# Models whose graphs upstream's own Python stops (the runner names the line); all others whole.
LIMITED = {"Mamba2", "MambaLMHeadModel[Mamba2]"}


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


def _assert_compiled(rows: list[dict], expected: int) -> None:
    assert len(rows) == expected
    for row in rows:
        where = f"{row['model']} {row['dtype']}: {row['reason']} {row.get('reasons')}"
        assert row["passed"], where  # matches eager (and, unless limited, one graph)
        if row["model"] not in LIMITED or "limit" not in row:
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
    _assert_compiled(rows, 2)


@pytest.mark.parametrize("block", ["Mamba", "Mamba2"])
def test_blocks_compile_with_cuda_graphs(site: Path, block: str) -> None:
    args = ("--block", block, "--dtypes", "bfloat16", "--mode", "reduce-overhead", "--iters", "3")
    _assert_compiled(compile_rows(site, *args), 1)
