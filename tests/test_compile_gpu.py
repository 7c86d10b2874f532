"""torch.compile(fullgraph=True) through upstream's whole models on a stable pair, on the GPU.

`MAMBAWIN_TEST_STABLE_WHEELS=<folder with a stable mamba-ssm and causal-conv1d wheel> pytest -m gpu
tests/test_compile_gpu.py`: the wheels are installed into a scratch folder (no dependencies: torch,
triton, einops and transformers come from this interpreter) and verify's compile runner runs there
in a child process: upstream's Mamba and Mamba2 blocks, forward and backward, float32 and
bfloat16, must be one graph with no break (torch._dynamo.explain), compile with fullgraph=True and
match eager within verify's tolerances; MambaLMHeadModel (Mamba1 and Mamba2 layers) a training
step the same way; and the blocks under mode="reduce-overhead" (CUDA graphs).
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


def _assert_whole_graphs(rows: list[dict], expected: int) -> None:
    assert len(rows) == expected
    for row in rows:
        where = f"{row['model']} {row['dtype']}: {row['reason']} {row.get('reasons')}"
        assert row["passed"], where
        assert (row["graphs"], row["breaks"]) == (1, 0), where


def test_blocks_and_lm_training_steps_compile_whole_and_match_eager(site: Path) -> None:
    rows = compile_rows(
        site, "--dtypes", "float32,bfloat16", "--lm", "Mamba1", "--lm", "Mamba2", "--iters", "3"
    )
    _assert_whole_graphs(rows, 8)  # 2 blocks and 2 LMs, in 2 dtypes


def test_blocks_compile_whole_with_cuda_graphs(site: Path) -> None:
    rows = compile_rows(site, "--dtypes", "bfloat16", "--mode", "reduce-overhead", "--iters", "3")
    _assert_whole_graphs(rows, 2)
