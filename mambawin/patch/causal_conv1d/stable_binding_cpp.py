"""The C++ text of causal-conv1d's stable-ABI binding (written by the stable-binding patch).

mambawin's own code, written from the ops' signatures and ConvParamsBase/ConvParamsBwd's fields
(csrc/causal_conv1d.h): it checks the same conditions upstream's binding checks, fills the same
parameters and launches the same kernel templates, through torch's stable C ABI only
(torch::stable::Tensor, STD_TORCH_CHECK, the aoti_torch_* shims). Every op takes its outputs as
arguments and returns nothing, as upstream's binding does from v1.5.1 on; the Python shim
(stable_shim.py) allocates them for the v1.5.0.x shape. `binding(deterministic=...)` adds the
v1.6.0+ deterministic backward (workspaces summed afterwards), its flag an argument of the op.
"""

from __future__ import annotations

from mambawin.patch.base import read_template

# v1.6.0+: ConvParamsBwd has `deterministic` and per-batch (channel-first) or per-chunk
# (channel-last) float workspaces that the kernels fill instead of atomically adding into dweight
# and dbias; the binding sums them afterwards. Upstream read the flag from the environment and
# at::globalContext() inside the binding; neither exists on the stable ABI, so the shim decides
# it in Python (same rules) and passes it in.
# The C++ is package data: data/causal_conv1d_stable.cpp.in with @NAME@ slots, and the three
# determinism fragments the v1.6.0+ shape fills them with.
_HEAD = read_template(__package__, "causal_conv1d_stable.cpp.in")
_DETERMINISM_HELPERS = read_template(__package__, "determinism_helpers.cpp.in")
_DETERMINISM_BEFORE = read_template(__package__, "determinism_before.cpp.in")
_DETERMINISM_AFTER = read_template(__package__, "determinism_after.cpp.in")


def binding(namespace: str, *, deterministic: bool) -> str:
    """The binding's C++ text: ops in torch.ops.<namespace>; deterministic: the v1.6.0+ bwd."""
    parts = {
        "@NAMESPACE@": namespace,
        "@DETERMINISM_HELPERS@": _DETERMINISM_HELPERS if deterministic else "",
        "@DETERMINISTIC_PARAMETER@": ", bool deterministic" if deterministic else "",
        "@DETERMINISM_BEFORE@": _DETERMINISM_BEFORE if deterministic else "",
        "@DETERMINISM_AFTER@": _DETERMINISM_AFTER if deterministic else "",
        "@DETERMINISTIC_SCHEMA@": ", bool deterministic" if deterministic else "",
    }
    text = _HEAD
    for key, value in parts.items():
        text = text.replace(key, value)
    return text
