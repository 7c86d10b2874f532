"""stable-functions: cpp_functions.py takes its three functions from the stable shim (--abi stable).

Why: from v1.5.1 upstream's cpp_functions.py wraps each extension call in a
`torch.library.custom_op` and calls it with keyword arguments, one of them named `out`
(`_causal_conv1d_fwd_cpp(..., out=out, ...)`, and `dx=` a slice of mamba's dxz buffer).
torch.compile treats any `out=` keyword as an out-variant call and refuses a non-contiguous one
("Attempted to call op with non-contiguous `out=` tensor"): mamba's `x, z = xz.chunk(2, dim=1)`
makes a channel-major x, so every Mamba block broke its graph three times at the conv, in the
forward and again in the backward (issue 26). The shim's `causal_conv1d_{fwd,bwd,update}_function`
keep upstream's signatures and allocations and call the stable ops positionally (their schemas
mark what they write); this patch appends one import that rebinds the three names, so
causal_conv1d_interface.py and mamba_ssm, which import them from here, get the shim's. Upstream's
custom ops stay defined, untouched. Anchored on the three functions' parameter lists (read with
ast): any other signature is drift. v1.5.0.x has no cpp_functions.py (not-applicable): its
Python calls the shim directly.
"""

from __future__ import annotations

import ast

from mambawin.packages import CAUSAL_CONV1D
from mambawin.patch.base import Outcome, Patch, PatchContext, Tree, stable_only

ID = "stable-functions"
FILE = "causal_conv1d/cpp_functions.py"
EXTENSION = "causal_conv1d_cuda"
VERSIONS = CAUSAL_CONV1D.stable_versions  # every stable port has cpp_functions' shape or none
# Each function the shim serves, with upstream's parameters (v1.5.1 to main, one text).
FUNCTIONS: dict[str, tuple[str, ...]] = {
    "causal_conv1d_fwd_function": (
        "x",
        "weight",
        "bias",
        "seq_idx",
        "initial_states",
        "final_states_out",
        "silu_activation",
    ),
    "causal_conv1d_bwd_function": (
        "x",
        "weight",
        "bias",
        "dout",
        "seq_idx",
        "initial_states",
        "dfinal_states",
        "dx",
        "return_dinitial_states",
        "silu_activation",
    ),
    "causal_conv1d_update_function": (
        "x",
        "conv_state",
        "weight",
        "bias",
        "silu_activation",
        "cache_seqlens",
        "conv_state_indices",
    ),
}
MARK = "# mambawin stable-functions:"
_NAMES = "".join(f"    {name},\n" for name in sorted(FUNCTIONS))
BLOCK = f"""

{MARK} the stable shim serves these three functions, calling its ops positionally
# (torch.compile traces them; the custom ops above take `out=` keywords it cannot trace).
from {EXTENSION} import (  # noqa: E402, F811
{_NAMES})
"""


def _parameters(text: str) -> dict[str, tuple[str, ...]]:
    """Each module-level function's positional parameter names."""
    return {
        node.name: tuple(arg.arg for arg in node.args.args)
        for node in ast.parse(text).body
        if isinstance(node, ast.FunctionDef)
    }


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Append the import of the shim's functions to cpp_functions.py (anchors checked first)."""
    if not tree.exists(FILE):
        return "not-applicable"
    text = tree.read(FILE)
    if MARK in text:
        return "already-applied"
    if f"import {EXTENSION}" not in text:
        raise ctx.drift(FILE, f"import {EXTENSION}")
    found = _parameters(text)
    for name, params in FUNCTIONS.items():
        if found.get(name) != params:
            raise ctx.drift(FILE, f"def {name}({', '.join(params)})")
    tree.write(FILE, text.rstrip("\n") + "\n" + BLOCK)
    return "applied"


PATCH = Patch(
    id=ID,
    summary="cpp_functions.py: fwd/bwd/update functions from the stable shim (traceable calls)",
    prevents="torch.compile: Attempted to call op with non-contiguous `out=` tensor (three graph "
    "breaks per Mamba block)",
    versions=VERSIONS,
    why="upstream's custom ops take out=/dx= keywords that torch.compile refuses for a "
    "view; the stable ops' schemas declare their writes, so positional calls trace",
    files=(FILE,),
    transform=transform,
    skip_reason=stable_only,
)
