"""ssd-custom-ops: Mamba2's chunked scan runs as two custom ops, so torch.compile traces Mamba2
whole (--abi stable).

Why: upstream's `_mamba_chunk_scan_combined_bwd` (mamba_ssm/ops/triton/ssd_combined.py, every
tag from v2.2.3) reads Triton autotuners' picks after their launches
(`_state_passing_bwd_kernel.best_config.kwargs["BLOCK_SIZE"]` in ssd_state_passing.py, the same in
ssd_chunk_scan.py and ssd_combined.py): a value that exists only once a kernel ran, so dynamo
breaks the graph there and a Mamba2 block or LM compiled as 2 graphs (issue 26). Replacing those
reads with a value computed without the autotuner would change which block size sums the partial
dD/ddA blocks whenever the autotuner picks another config, so this patch leaves every kernel and
every read alone: it appends a block that wraps upstream's forward and backward helpers, as they
are, in `torch.library.custom_op`s with exact fake kernels, and rebinds the two module-level names
that MambaChunkScanCombinedFn and MambaSplitConv1dScanCombinedFn call. dynamo then sees two
opaque ops; the autotuners run at run time, as in eager.

Only --abi stable: an --abi torch build calls causal_conv1d's and selective_scan's pybind11
modules, which break the graph anyway, and keeps upstream's Python byte for byte.

Anchored on what the fake kernels restate: both helpers' parameter lists (read with ast; main
after v2.3.2.post1 adds `state_dtype`, which the block passes on), their return statements, and
the dtypes upstream gives the states; anything else is drift.
"""

from __future__ import annotations

import ast

from packaging.specifiers import SpecifierSet

from mambawin.patch.base import (
    Outcome,
    Patch,
    PatchContext,
    Tree,
    marked_block,
    read_template,
)
from mambawin.patch.mamba.stable import SUPPORTED, skip_reason

ID = "ssd-custom-ops"
FILE = "mamba_ssm/ops/triton/ssd_combined.py"
VERSIONS: SpecifierSet = SUPPORTED
FWD = "_mamba_chunk_scan_combined_fwd"
BWD = "_mamba_chunk_scan_combined_bwd"
# The ops' names (verify's compile runner looks for the first to tell a patched install).
FWD_OP = "mamba_ssm::chunk_scan_combined_fwd"
BWD_OP = "mamba_ssm::chunk_scan_combined_bwd"
_FWD_PARAMS = (
    "x",
    "dt",
    "A",
    "B",
    "C",
    "chunk_size",
    "D",
    "z",
    "dt_bias",
    "initial_states",
    "seq_idx",
    "cu_seqlens",
    "dt_softplus",
    "dt_limit",
)
_BWD_PARAMS = (
    "dout",
    "x",
    "dt",
    "A",
    "B",
    "C",
    "out",
    "chunk_size",
    "D",
    "z",
    "dt_bias",
    "initial_states",
    "dfinal_states",
    "seq_idx",
    "dt_softplus",
    "dt_limit",
    "dx",
    "ddt",
    "dB",
    "dC",
    "dz",
    "recompute_output",
)
STATE_DTYPE = "state_dtype"
# What the block and its fake kernels rely on, in every supported tag.
ANCHORS = (
    "from typing import Optional",
    "from torch import Tensor",
    "return out, out_x, dt, dA_cumsum, states, final_states\n",
    "return out, out_x, dt, dA_cumsum, states, final_states, varlen_states\n",
    "return_vals = (dx, ddt_given, dA, dB_given, dC_given, dD, dz, ddt_bias, dinitial_states)",
    "return return_vals if not recompute_output else (*return_vals, outz)",
)
# The states' dtypes the fakes give, as upstream writes them: the tags up to v2.3.2.post1, then
# main's state_dtype variant.
_DTYPES = {
    False: ("out_dtype=C.dtype)", "dstates_dtype=x.dtype,"),
    True: (
        "out_dtype=state_dtype if state_dtype is not None else C.dtype)",
        "dstates_dtype=state_dtype if state_dtype is not None else x.dtype,",
    ),
}


def _parameters(text: str) -> dict[str, tuple[str, ...]]:
    """Each module-level function's positional parameter names."""
    return {
        node.name: tuple(arg.arg for arg in node.args.args)
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef)
    }


def _has_state_dtype(text: str, ctx: PatchContext) -> bool:
    """Whether upstream's helpers take state_dtype (drift unless they take one known list)."""
    try:
        found = _parameters(text)
    except SyntaxError as exc:  # not Python any more: nothing to anchor on
        raise ctx.drift(FILE, f"def {FWD}( (line {exc.lineno} does not parse)") from None
    variant = None
    for name, params in ((FWD, _FWD_PARAMS), (BWD, _BWD_PARAMS)):
        got = found.get(name)
        if got not in (params, (*params, STATE_DTYPE)):
            raise ctx.drift(FILE, f"def {name}({', '.join(params)})")
        this = got == (*params, STATE_DTYPE)
        if variant is not None and this != variant:
            raise ctx.drift(FILE, f"def {name}({', '.join((*params, STATE_DTYPE))})")
        variant = this
    return bool(variant)


def block(state_dtype: bool) -> str:
    """The appended block; it passes state_dtype on only where upstream takes one."""
    keyword = ", state_dtype=state_dtype" if state_dtype else ""
    text = read_template(__package__, "ssd_custom_ops.py.in")
    for placeholder, value in (("@STATE_KW@", keyword), ("@FWD_OP@", FWD_OP), ("@BWD_OP@", BWD_OP)):
        text = text.replace(placeholder, value)
    return text


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Append the custom-op block to ssd_combined.py (anchors checked first)."""
    if not tree.exists(FILE):
        raise ctx.drift(FILE, f"def {FWD}(")
    text = tree.read(FILE)
    old = marked_block(text, ID)
    upstream = text if old is None else text[: old.start()] + text[old.end() :]
    state_dtype = _has_state_dtype(upstream, ctx)
    for anchor in (*ANCHORS, *_DTYPES[state_dtype]):
        if anchor not in upstream:
            raise ctx.drift(FILE, anchor)
    new = block(state_dtype)
    if old is not None and old.group(0) == new:
        return "already-applied"
    tree.write(FILE, upstream.rstrip("\n") + "\n\n\n" + new)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="ssd_combined.py: Mamba2's chunked-scan fwd/bwd as custom ops (torch.compile traces "
    "Mamba2 whole)",
    prevents="torch.compile: graph break at `_state_passing_bwd_kernel.best_config` (a Mamba2 "
    "block or LM compiles as 2 graphs)",
    versions=VERSIONS,
    why="the backward reads Triton autotuners' best_config after each launch, which "
    "dynamo cannot trace; custom ops with fake kernels keep upstream's kernels and numerics",
    files=(FILE,),
    transform=transform,
    skip_reason=skip_reason,
)
