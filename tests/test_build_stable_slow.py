"""A real --abi stable build of causal-conv1d v1.6.1.post4 for sm_90 (minutes of nvcc), audited.

The library imports no torch C++ symbol (c10::, at::, torch::) and no CPython symbol, and needs no
libpython; the wheel is py3-none; in this torch the shim imports and every op resolves, and
torch.compile(fullgraph=True) traces upstream's causal_conv1d_fn on fake CUDA tensors (no GPU
needed). Run with a python that has a CUDA torch:
    MAMBAWIN_TEST_CAUSAL_CONV1D=<causal-conv1d git repo> <python with torch> -m pytest -m slow \
        tests/test_build_stable_slow.py
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

from mambawin import proc
from mambawin.archs import parse_archs
from mambawin.builder import pipeline as core
from mambawin.builder.options import BuildOptions
from mambawin.packages import CAUSAL_CONV1D
from mambawin.wheel.info import read_wheel
from mambawin.wheel.metadata import requirements
from mambawin.wheel.provenance import read_provenance

ENV = "MAMBAWIN_TEST_CAUSAL_CONV1D"
# C++ names of torch's unstable ABI, as c++filt spells them.
UNSTABLE = re.compile(r"\b(c10|at|torch|caffe2|pybind11)::")

IMPORT_CHECK = """
import torch, causal_conv1d_cuda
ops = torch.ops.causal_conv1d_cuda
print(ops.causal_conv1d_fwd, ops.causal_conv1d_bwd, ops.causal_conv1d_update)
from torch._subclasses.fake_tensor import FakeTensorMode
from causal_conv1d import causal_conv1d_fn
graphs = []
def backend(gm, inputs):
    graphs.append(gm)
    return gm.forward
@torch.compile(fullgraph=True, backend=backend)
def conv(x, w, b):
    return causal_conv1d_fn(x, w, b, activation="silu")
with FakeTensorMode(allow_non_fake_inputs=True):
    x = torch.empty(2, 64, 128, device="cuda", dtype=torch.float16)
    w = torch.empty(64, 4, device="cuda", dtype=torch.float16)
    b = torch.empty(64, device="cuda", dtype=torch.float16)
    out = conv(x, w, b)
print("traced", tuple(out.shape), out.dtype, out.device, len(graphs))
@torch.compile(fullgraph=True, backend=backend)
def direct(x, w, b):  # the shim's own op, no upstream custom_op around it: its fake is used
    out = torch.empty_like(x)
    causal_conv1d_cuda.causal_conv1d_fwd(x, w, b, None, None, out, None, True)
    return out
with FakeTensorMode(allow_non_fake_inputs=True):
    out = direct(x, w, b)
ops_in_graph = [str(n.target) for n in graphs[-1].graph.nodes if n.op == "call_function"]
print("direct", tuple(out.shape), [t for t in ops_in_graph if "causal_conv1d_cuda" in t])
"""


def undefined_symbols(binary: Path) -> list[str]:
    """The dynamic symbols binary imports, demangled."""
    result = proc.run(["nm", "-D", "--undefined-only", "-C", str(binary)])
    # "                 U name(args)": a type letter, then the (demangled) name with its spaces
    return [line.split(None, 1)[1] for line in result.stdout.splitlines() if line.strip()]


def needed(binary: Path) -> list[str]:
    """The binary's DT_NEEDED libraries."""
    result = proc.run(["readelf", "-d", str(binary)])
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", result.stdout)


@pytest.mark.slow
@pytest.mark.upstream
def test_a_stable_build_imports_only_stable_c_symbols(tmp_path: Path) -> None:
    repo = os.environ.get(ENV)
    if not repo:
        pytest.skip(f"{ENV} is not set (path to a Dao-AILab/causal-conv1d git repo)")
    if importlib.util.find_spec("torch") is None or shutil.which("nm") is None:
        pytest.skip("needs a CUDA torch (setup.py imports it) and binutils")
    options = BuildOptions(
        repo=repo,
        ref="v1.6.1.post4",
        archs=parse_archs("90"),
        out=tmp_path / "wheels",
        jobs=2,
        package=CAUSAL_CONV1D,
        abi="stable",
    )
    wheel = core.build(options).wheel

    assert re.fullmatch(
        r"causal_conv1d-1\.6\.1(\.post4)?\+cu\d+\.stable\.torch2\.10-py3-none-linux_x86_64\.whl",
        wheel.name,
    )
    assert read_wheel(wheel).file.tags == frozenset({"py3-none-linux_x86_64"})
    assert "torch>=2.10" in requirements(wheel)
    provenance = read_provenance(wheel)
    assert provenance is not None
    assert (provenance.stored["abi"], provenance.stored["torch_floor"]) == ("stable", "2.10")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp_path / "site")
    binary = tmp_path / "site" / "causal_conv1d_cuda_stable.abi3.so"
    assert (tmp_path / "site" / "causal_conv1d_cuda.py").is_file()

    symbols = undefined_symbols(binary)
    assert not [s for s in symbols if UNSTABLE.search(s)]
    assert not [s for s in symbols if s.startswith(("Py", "_Py"))]
    assert any(s.startswith("aoti_torch_") for s in symbols)
    assert not [n for n in needed(binary) if n.startswith("libpython")]

    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    check = proc.run([sys.executable, "-c", IMPORT_CHECK], env=env, check=False)
    assert check.returncode == 0, check.stderr[-3000:]
    assert "traced (2, 64, 128) torch.float16 cuda:0 1" in check.stdout
    assert "direct (2, 64, 128) ['causal_conv1d_cuda.causal_conv1d_fwd']" in check.stdout
