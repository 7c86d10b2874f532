"""A compiled model's graphs: how many, why they break, and the verdict on them.

torch._dynamo.explain counts the graphs and breaks of one call (with each break's reason and
upstream line); a run without fullgraph counts the graphs it took. A break at an upstream line
known to keep a tree without the ssd-custom-ops patch from being one graph is that tree's limit,
not the wheel's failure. Passed: one graph, no break, every error within tolerance. Used by the
compile runner (compile.py) inside the install environment; imports torch only when it runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from mambawin.patch.mamba.ssd_custom_ops import FWD_OP as SSD_FWD_OP


def graph_breaks(function: Callable[..., Any], *args: Any) -> dict[str, Any]:
    """torch._dynamo.explain of one call: graphs, breaks, and each break's reason and line."""
    import torch

    torch._dynamo.reset()
    explained = torch._dynamo.explain(function)(*args)
    reasons = []
    for found in explained.break_reasons:
        frame = found.user_stack[-1] if found.user_stack else None
        where = f" at {frame.filename}:{frame.lineno}" if frame is not None else ""
        reasons.append(str(found.reason).splitlines()[0][:300] + where)
    torch._dynamo.reset()
    return {
        "graphs": explained.graph_count,
        "breaks": explained.graph_break_count,
        "reasons": reasons,
    }


def verdict(breaks: dict[str, Any], errors: dict[str, dict[str, float]]) -> tuple[bool, str]:
    """Passed when there is one graph and no break and every error is within tolerance."""
    if breaks["breaks"] or breaks["graphs"] != 1:
        first = breaks["reasons"][0] if breaks["reasons"] else "no reason given"
        return False, f"{breaks['graphs']} graphs, {breaks['breaks']} breaks: {first}"
    return within(errors, "1 graph, 0 breaks")


def within(errors: dict[str, dict[str, float]], graphs: str) -> tuple[bool, str]:
    name, worst = max(errors.items(), key=lambda kv: kv[1]["ratio"])
    if worst["ratio"] > 1.0:
        return False, f"{name} off by {worst['max_abs']:.3g} ({worst['ratio']:.3g}x tolerance)"
    # The ratio too: a bfloat16 weight gradient of size ~100 is within tolerance off by 1.
    ratio = f"{worst['ratio']:.2g}x tolerance"
    return True, f"{graphs}; largest error {name} {worst['max_abs']:.3g} ({ratio})"


# Upstream lines that keep a model from being one graph in a tree without the ssd-custom-ops patch
# (a wheel built before it), by (file, function) as a fullgraph failure names them: why. Found on
# the H100 (docs/stable-abi.md). A patched wheel runs that code inside a custom op, so a break
# there is a failure like any other.
UPSTREAM_LIMITS = {
    ("ssd_state_passing.py", "_state_passing_bwd"): (
        "reads the Triton autotuner's choice after the launch "
        '(`_state_passing_bwd_kernel.best_config.kwargs["BLOCK_SIZE"]`), a value known only '
        "when the kernel has run"
    ),
}


def ssd_custom_ops_installed() -> bool:
    """Whether the installed mamba_ssm runs Mamba2's chunked scan as ssd-custom-ops' ops."""
    import torch

    try:
        importlib.import_module("mamba_ssm.ops.triton.ssd_combined")
    except ImportError:
        return False
    namespace, name = SSD_FWD_OP.split("::")
    return hasattr(getattr(torch.ops, namespace), name)


def upstream_limit(reason: str, *, patched: bool) -> str | None:
    """Why the graph cannot be whole, when a fullgraph failure is at a known upstream line of a
    tree without ssd-custom-ops (patched: None, the break is the wheel's)."""
    if patched:
        return None
    for (file, function), why in UPSTREAM_LIMITS.items():
        if f"{file}:" in reason and reason.endswith(f" in {function})"):
            return f"upstream's {file} ({function}) {why}"
    return None


def without_fullgraph(run: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    """run() with dynamo's counters fresh: its result, and the graphs and breaks it compiled."""
    import torch
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    result = run()
    reasons = sorted(counters["graph_break"])
    found = {
        "graphs": int(counters["stats"]["unique_graphs"]),
        "breaks": int(sum(counters["graph_break"].values())),
        "reasons": [r.splitlines()[0][:300] for r in reasons],
    }
    return result, found


def graph_limit(
    reason: str, breaks: dict[str, Any], retry: Callable[[], Any]
) -> tuple[Any, dict[str, Any]] | dict[str, Any]:
    """After fullgraph failed (reason: its one line): the failing row, or, when the failure is a
    known upstream limit, retry() compiled without fullgraph and the graphs it took (how far the
    graph goes)."""
    limit = upstream_limit(reason, patched=ssd_custom_ops_installed())
    if limit is None:
        return {"passed": False, "reason": reason, **breaks}
    result, found = without_fullgraph(retry)
    return result, {**found, "limit": limit}
