"""Upstream's Mamba block traces whole through the stable shims, with no GPU (issue 26).

The real upstream Python (mamba_ssm and causal_conv1d at a supported pair of tags, from the
mirrors named by MAMBAWIN_TEST_UPSTREAM and MAMBAWIN_TEST_CAUSAL_CONV1D) with mambawin's stable
shims and stable-functions patch; the ops' schemas are the bindings' own (registered from Python
here, as the compiled library registers them), their fakes the shims'. torch._dynamo.explain of
the block's forward, which also traces its autograd.Function's backward, on fake CUDA tensors:
one graph, no break. Before the shims owned the calling convention it was 4 graphs and 3 breaks
("Attempted to call op with non-contiguous `out=` tensor" at cpp_functions.py's custom-op call).
Needs a CUDA torch, einops and huggingface_hub (mamba_ssm imports them); the GPU test
(tests/test_compile_gpu.py) runs the compiled block.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from mambawin.patch.base import PatchContext, PatchOptions, Tree
from mambawin.patch.causal_conv1d import stable_functions, stable_shim
from mambawin.patch.causal_conv1d.stable_binding_cpp import binding
from mambawin.patch.causal_conv1d.stable_shapes import shape_of
from mambawin.patch.mamba import ssd_custom_ops
from mambawin.patch.mamba import stable_shim as mamba_shim
from mambawin.patch.mamba.stable_binding_source import BWD_SCHEMA, FWD_SCHEMA

pytestmark = pytest.mark.upstream

PAIRS = [("v2.3.0", "v1.6.0"), ("v2.3.2.post1", "v1.6.1.post4")]

# Run in a child: the ops are registered once per process, and dynamo's state stays there.
DRIVER = r"""
import json, os, re, sys
sys.path.insert(0, sys.argv[1])
import torch
SCHEMAS = json.loads(sys.argv[2])
libraries = {}

def define(path):  # what the compiled library's STABLE_TORCH_LIBRARY block does when loaded
    namespace = os.path.basename(path).split("_stable")[0]
    library = libraries.setdefault(namespace, torch.library.Library(namespace, "DEF"))
    for schema in SCHEMAS[namespace]:
        library.define(schema)

torch.ops.load_library = define
from torch._subclasses.fake_tensor import FakeTensorMode
from mamba_ssm.modules.mamba_simple import Mamba

with FakeTensorMode(allow_non_fake_inputs=True):
    block = Mamba(256, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    found = torch._dynamo.explain(block)(x)
print(json.dumps({
    "graphs": found.graph_count,
    "breaks": found.graph_break_count,
    "reasons": [str(b.reason).splitlines()[0] for b in found.break_reasons],
}))
"""


def _needs(*modules: str) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (upstream's mamba_ssm imports it)")


def _extract(mirror: str, ref: str, paths: list[str], into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", mirror, "archive", ref, *paths], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _schemas(cpp: str) -> list[str]:
    """The m.def(...) schema strings of a binding (adjacent C++ literals joined)."""
    import re

    blocks = re.findall(r"m\.def\(((?:\s*\"[^\"]*\")+)\);", cpp)
    return ["".join(re.findall(r"\"([^\"]*)\"", block)) for block in blocks]


def stable_tree(tmp_path: Path, mamba_ref: str, conv_ref: str) -> tuple[Path, dict[str, list[str]]]:
    """Upstream's Python at both refs, with the stable shims and stable-functions applied."""
    mamba, conv = (
        os.environ.get("MAMBAWIN_TEST_UPSTREAM"),
        os.environ.get("MAMBAWIN_TEST_CAUSAL_CONV1D"),
    )
    if not mamba or not conv:
        pytest.skip("MAMBAWIN_TEST_UPSTREAM and MAMBAWIN_TEST_CAUSAL_CONV1D name the mirrors")
    root = tmp_path / "tree"
    _extract(mamba, mamba_ref, ["mamba_ssm"], root)
    _extract(conv, conv_ref, ["causal_conv1d", "csrc/causal_conv1d.cpp"], root)
    shape = shape_of((root / "csrc/causal_conv1d.cpp").read_text())
    assert shape is not None
    (root / "causal_conv1d_cuda.py").write_text(stable_shim.shim_text(shape))
    (root / "selective_scan_cuda.py").write_text(mamba_shim.SOURCE)
    for library in ("causal_conv1d_cuda_stable", "selective_scan_cuda_stable"):
        (root / f"{library}.abi3.so").write_bytes(b"")  # found by the loader, never dlopened
    staged = Tree(root)
    ctx = PatchContext(Version(conv_ref[1:]), PatchOptions(abi="stable"), stable_functions.ID)
    assert stable_functions.transform(staged, ctx) == "applied"
    for rel, data in staged.changed().items():
        assert data is not None
        (root / rel).write_bytes(data)
    schemas = {
        "selective_scan_cuda": [FWD_SCHEMA, BWD_SCHEMA],
        "causal_conv1d_cuda": _schemas(
            binding("causal_conv1d_cuda", deterministic=shape.deterministic)
        ),
    }
    return root, schemas


@pytest.mark.parametrize(("mamba_ref", "conv_ref"), PAIRS)
def test_upstreams_mamba_block_traces_as_one_graph(
    tmp_path: Path, mamba_ref: str, conv_ref: str
) -> None:
    _needs("torch", "einops", "huggingface_hub", "transformers", "triton")
    root, schemas = stable_tree(tmp_path, mamba_ref, conv_ref)
    found = _run(DRIVER, root, schemas)
    assert (found["graphs"], found["breaks"]) == (1, 0), found["reasons"]


def _run(driver: str, root: Path, schemas: dict[str, list[str]], *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", driver, str(root), json.dumps(schemas), *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# Mamba2 (the fused split-conv1d-scan path, use_mem_eff_path) and an LM of Mamba2 layers, through
# its cross-entropy loss. Explain traces each autograd.Function's backward with its forward, so a
# break in the chunked scan's backward shows here. rmsnorm/rms_norm off: the gated RMSNorm and
# the LM's RMSNorm are Triton launches, which dynamo can only trace with a GPU's driver; the GPU
# test (tests/test_compile_gpu.py) runs upstream's defaults.
MAMBA2_DRIVER = (
    DRIVER.split("from mamba_ssm.modules.mamba_simple import Mamba")[0]
    + r"""
from mamba_ssm.models.config_mamba import MambaConfig
from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel
from mamba_ssm.modules.mamba2 import Mamba2

try:
    with FakeTensorMode(allow_non_fake_inputs=True):
        if sys.argv[3] == "block":
            model = Mamba2(256, headdim=64, rmsnorm=False, device="cuda", dtype=torch.bfloat16)
            x = torch.randn(2, 128, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            step = lambda: model(x)
        else:
            config = MambaConfig(d_model=256, n_layer=2, vocab_size=512, rms_norm=False,
                fused_add_norm=False, ssm_cfg={"layer": "Mamba2", "rmsnorm": False})
            model = MambaLMHeadModel(config, device="cuda", dtype=torch.bfloat16)
            ids = torch.randint(0, 512, (2, 128), device="cuda")
            step = lambda: torch.nn.functional.cross_entropy(
                model(ids).logits.float().flatten(0, 1), ids.flatten())
        found = torch._dynamo.explain(step)()
    result = {"graphs": found.graph_count, "breaks": found.graph_break_count,
              "reasons": [str(b.reason).splitlines()[0] for b in found.break_reasons]}
    # AOTAutograd functionalizes the joint graph: a mutating op it cannot auto-functionalize
    # (a list return, an aliased one) fails there, in inductor, after dynamo traced it whole.
    from torch._higher_order_ops.auto_functionalize import can_auto_functionalize
    bwd = getattr(torch.ops.mamba_ssm, "chunk_scan_combined_bwd", None)
    result["functionalizable"] = None if bwd is None else can_auto_functionalize(bwd.default)
except Exception as exc:  # dynamo entered code it cannot trace here
    result = {"graphs": None, "breaks": None, "reasons": [f"{type(exc).__name__}: {exc}"[:300]]}
print(json.dumps(result))
"""
)


def with_ssd_custom_ops(root: Path, mamba_ref: str) -> None:
    """Apply ssd-custom-ops to the extracted tree (what a --abi stable build ships)."""
    staged = Tree(root)
    ctx = PatchContext(Version(mamba_ref[1:]), PatchOptions(abi="stable"), ssd_custom_ops.ID)
    assert ssd_custom_ops.transform(staged, ctx) == "applied"
    for rel, data in staged.changed().items():
        assert data is not None
        (root / rel).write_bytes(data)


@pytest.mark.parametrize("model", ["block", "lm"])
@pytest.mark.parametrize(("mamba_ref", "conv_ref"), PAIRS)
def test_upstreams_mamba2_traces_as_one_graph_with_ssd_custom_ops(
    tmp_path: Path, mamba_ref: str, conv_ref: str, model: str
) -> None:
    _needs("torch", "einops", "huggingface_hub", "transformers", "triton")
    root, schemas = stable_tree(tmp_path, mamba_ref, conv_ref)
    with_ssd_custom_ops(root, mamba_ref)
    found = _run(MAMBA2_DRIVER, root, schemas, model)
    assert (found["graphs"], found["breaks"]) == (1, 0), found["reasons"]
    assert found["functionalizable"] is True


def test_without_ssd_custom_ops_mamba2_is_not_one_graph(tmp_path: Path) -> None:
    # Unpatched, dynamo enters the chunked scan's helpers (Triton launches, then the backward's
    # best_config reads): on a GPU 2 graphs, here no graph at all (no driver for the launches).
    _needs("torch", "einops", "huggingface_hub", "transformers", "triton")
    root, schemas = stable_tree(tmp_path, *PAIRS[-1])
    found = _run(MAMBA2_DRIVER, root, schemas, "block")
    assert (found["graphs"], found["breaks"]) != (1, 0)
