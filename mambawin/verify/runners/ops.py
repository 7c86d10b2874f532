"""Proof, without a GPU, that a stable-ABI wheel's ops reach torch: they register, and
torch.compile(fullgraph=True) traces upstream's public function through them.

A stable wheel's library is no Python module: its shim (`selective_scan_cuda.py`,
`causal_conv1d_cuda.py`) loads it with `torch.ops.load_library`, and its `STABLE_TORCH_LIBRARY`
block registers `torch.ops.<extension>.*`. An import can succeed while that went wrong (a library
built for another torch that registers nothing, a shim whose fakes are missing), and the first
sign would be a failed call on a GPU. This runner reads the dispatcher instead: every op of the
namespace, its schema, whether a CUDA kernel and a Meta (fake) kernel are registered; then it
traces `selective_scan_fn` / `causal_conv1d_fn` on fake CUDA tensors, which needs a CUDA torch but
no GPU (so a Windows CI runner can run it), and reports the ops the graph calls.

Run inside the install environment: `python -m mambawin.verify.runners.ops --json PROJECT ...`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from mambawin.packages import CAUSAL_CONV1D, MAMBA, package_named
from mambawin.verify.runners.common import emit

# The dispatch keys an op needs: CUDA runs it, Meta is what the shim's register_fake installs
# and what FakeTensorMode (torch.compile's tracer) calls.
KERNEL_KEYS = ("CUDA", "Meta")


@dataclass(frozen=True)
class Op:
    """One registered op of a stable library."""

    name: str  # namespace::op
    schema: str
    kernels: tuple[str, ...]  # those of KERNEL_KEYS registered

    @property
    def complete(self) -> bool:
        return set(self.kernels) == set(KERNEL_KEYS)


def registered_ops(namespace: str) -> list[Op]:
    """Every op the dispatcher knows under `namespace::`, with its schema and kernels."""
    import torch

    ops = []
    for name in sorted(torch._C._dispatch_get_all_op_names()):
        if not name.startswith(f"{namespace}::"):
            continue
        packet = getattr(getattr(torch.ops, namespace), name.split("::", 1)[1])
        kernels = tuple(
            key for key in KERNEL_KEYS if torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
        )
        ops.append(Op(name, str(packet.default._schema), kernels))
    return ops


def _trace_scan() -> Any:
    import torch
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

    batch, dim, dstate, seqlen = 2, 64, 16, 128

    def scan(u: Any, delta: Any, A: Any, B: Any, C: Any, D: Any, z: Any, bias: Any) -> Any:
        return selective_scan_fn(u, delta, A, B, C, D, z, bias, delta_softplus=True)

    def empty(*shape: int) -> Any:
        return torch.empty(*shape, device="cuda")

    inputs = (
        empty(batch, dim, seqlen),
        empty(batch, dim, seqlen),
        empty(dim, dstate),
        empty(batch, dstate, seqlen),
        empty(batch, dstate, seqlen),
        empty(dim),
        empty(batch, dim, seqlen),
        empty(dim),
    )
    return scan, inputs


def _trace_conv() -> Any:
    import torch
    from causal_conv1d import causal_conv1d_fn

    def conv(x: Any, weight: Any, bias: Any) -> Any:
        return causal_conv1d_fn(x, weight, bias, activation="silu")

    half: dict[str, Any] = {"device": "cuda", "dtype": torch.float16}
    return conv, (
        torch.empty(2, 64, 128, **half),
        torch.empty(64, 4, **half),
        torch.empty(64, **half),
    )


# The modules a wheel brings: one of them missing is the wheel's fault, any other module is one of
# upstream's requirements that the environment lacks.
OURS = frozenset(
    {MAMBA.extension, CAUSAL_CONV1D.extension, MAMBA.import_name, CAUSAL_CONV1D.import_name}
)

# Upstream's public function per package: what a user's torch.compile(fullgraph=True) model calls.
TRACES: dict[str, tuple[str, Callable[[], Any]]] = {
    MAMBA.name: ("selective_scan_fn", _trace_scan),
    CAUSAL_CONV1D.name: ("causal_conv1d_fn", _trace_conv),
}


def trace(project: str) -> dict[str, Any]:
    """torch.compile(fullgraph=True) of the package's public function on fake CUDA tensors: the
    shape of what it returns and the torch ops the captured graph calls."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    api, make = TRACES[project]
    graphs: list[Any] = []

    def capture(graph_module: Any, example_inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()  # each trace starts from a clean cache, whatever ran before
    with FakeTensorMode(allow_non_fake_inputs=True):
        function, inputs = make()
        compiled: Callable[..., Any] = torch.compile(function, fullgraph=True, backend=capture)
        out = compiled(*inputs)
    # The graph's torch ops: ours (selective_scan_cuda.fwd), or upstream's own custom op that
    # wraps ours (causal-conv1d >= 1.5 registers causal_conv1d_fn as torch.library.custom_op).
    called = sorted(
        {
            str(node.target)
            for graph in graphs
            for node in graph.graph.nodes
            if node.op == "call_function"
            and isinstance(node.target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))
        }
    )
    return {"api": api, "shape": list(out.shape), "graphs": len(graphs), "ops": called}


def _namespace(project: str) -> str:
    package = package_named(project)
    assert package is not None, project
    return package.extension


def check(project: str) -> dict[str, Any]:
    """One package: import its shim, read its registered ops, trace its public function."""
    namespace = _namespace(project)
    result: dict[str, Any] = {"project": project, "namespace": namespace}
    try:
        importlib.import_module(namespace)
        ops = registered_ops(namespace)
    except Exception as exc:  # the failure is the finding, reported as such
        return {**result, "passed": False, "error": f"import {namespace}: {exc!r}"}
    result["ops"] = [asdict(op) for op in ops]
    failure = None
    try:
        result["trace"] = trace(project)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] in OURS:
            failure = repr(exc)[:400]
        else:  # the environment lacks one of upstream's requirements: no fault of the wheel
            result["untraced"] = (
                f"{TRACES[project][0]} not traced: {exc.name} is not installed (install the "
                "wheels with their requirements: pip install WHEEL)"
            )
    except Exception as exc:  # a graph break or a missing fake, reported
        failure = repr(exc)[:400]
    found = problems(project, ops, result.get("trace"), failure)
    return {**result, "passed": not found, "problems": found}


def problems(
    project: str, ops: Sequence[Op], traced: dict[str, Any] | None, failure: str | None
) -> list[str]:
    """What keeps the package's ops from serving a user: an op without a CUDA or Meta kernel, no
    op at all, a trace that broke, or a graph that calls no op (upstream fell back to Python)."""
    namespace, api = _namespace(project), TRACES[project][0]
    found = [
        f"{op.name} has no {' or '.join(k for k in KERNEL_KEYS if k not in op.kernels)} kernel"
        for op in ops
        if not op.complete
    ]
    if not ops:
        found.append(f"no op registered under torch.ops.{namespace}")
    if failure is not None:
        found.append(f"torch.compile(fullgraph=True) of {api} failed: {failure}")
    elif traced is not None and not traced["ops"]:
        found.append(f"{api}'s graph calls no compiled op: a Python fallback ran")
    return found


def run(projects: Sequence[str]) -> dict[str, Any]:
    import torch

    checks = [check(project) for project in projects]
    return {
        "passed": bool(checks) and all(c["passed"] for c in checks),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "packages": checks,
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="+", choices=sorted(TRACES))
    parser.add_argument("--json", action="store_true")
    return parser


def report(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The runner's report for its command line (what `verify.runners.worker` calls)."""
    return run(_parser().parse_args(argv).projects)


def main(argv: Sequence[str] | None = None) -> int:
    emit(report(argv), _parser().parse_args(argv).json)
    return 0  # the verdict is the report's "passed", as for every runner


if __name__ == "__main__":
    sys.exit(main())
