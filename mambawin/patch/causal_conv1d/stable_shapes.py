"""What causal-conv1d's pybind11 binding exports, per upstream version: the facts the stable port
is written against, and the check that a tree's binding is exactly one of them.

Upstream's csrc/causal_conv1d.cpp has had three shapes since v1.5.0 (read from every tag):
- v1.5.0 .. v1.5.0.post8 ("returning"): fwd and update return the output, bwd returns
  [dx, dweight, dbias, dinitial_states] and allocates them (dx only when not passed in);
- v1.5.1 .. v1.5.4 ("out"): every function writes into output arguments and returns nothing
  (upstream's new cpp_functions.py allocates them in Python);
- v1.6.0 .. v1.6.1.post4 and main ("out-deterministic"): "out", and the backward reads
  CAUSAL_CONV1D_DETERMINISTIC / torch.use_deterministic_algorithms to sum per-batch workspaces.
Before v1.5.0 update takes no conv_state_indices (v1.4.0) or the signatures differ further; those
versions are outside the stable patches' range. A binding that matches none of the shapes is
drift: the port would silently bind the wrong arguments, so it refuses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

CPP = "csrc/causal_conv1d.cpp"
FUNCTIONS = ("causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update")
# Written into our binding's first lines, so a patched tree still says which shape it was.
SHAPE_MARK = "// mambawin stable-binding: upstream binding shape"

_T = "const at::Tensor &"
_OPT = "const c10::optional<at::Tensor> &"
_FWD_RETURNING = (
    f"at::Tensor causal_conv1d_fwd({_T}x, {_T}weight, {_OPT}bias_, {_OPT}seq_idx_, "
    f"{_OPT}initial_states_, c10::optional<at::Tensor> &final_states_out_, bool silu_activation)"
)
_BWD_RETURNING = (
    f"std::vector<at::Tensor> causal_conv1d_bwd({_T}x, {_T}weight, {_OPT}bias_, at::Tensor &dout, "
    f"{_OPT}seq_idx_, {_OPT}initial_states_, {_OPT}dfinal_states_, "
    "c10::optional<at::Tensor> &dx_, bool return_dinitial_states, bool silu_activation)"
)
_UPDATE_RETURNING = (
    f"at::Tensor causal_conv1d_update({_T}x, {_T}conv_state, {_T}weight, {_OPT}bias_, "
    f"bool silu_activation, {_OPT}cache_seqlens_, {_OPT}conv_state_indices_)"
)
_FWD_OUT = (
    f"void causal_conv1d_fwd({_T}x, {_T}weight, {_OPT}bias_, {_OPT}seq_idx_, "
    f"{_OPT}initial_states_, at::Tensor &out, c10::optional<at::Tensor> &final_states_out_, "
    "bool silu_activation)"
)
_BWD_OUT = (
    f"void causal_conv1d_bwd({_T}x, {_T}weight, {_OPT}bias_, at::Tensor &dout, {_OPT}seq_idx_, "
    f"{_OPT}initial_states_, {_OPT}dfinal_states_, at::Tensor &dx, at::Tensor &dweight, "
    "c10::optional<at::Tensor> &dbias_, c10::optional<at::Tensor> &dinitial_states_, "
    "bool silu_activation)"
)
_UPDATE_OUT = (
    f"void causal_conv1d_update({_T}x, {_T}conv_state, {_T}weight, {_OPT}bias_, at::Tensor &out, "
    f"bool silu_activation, {_OPT}cache_seqlens_, {_OPT}conv_state_indices_)"
)
# v1.6.0's binding decides determinism itself; our op takes it as an argument instead.
_DETERMINISM = "use_deterministic_mode()"


@dataclass(frozen=True)
class BindingShape:
    """One shape of upstream's binding: its exported functions' signatures, and determinism."""

    name: str
    signatures: Mapping[str, str]  # function -> normalised C++ signature
    deterministic: bool  # the backward sums workspaces when deterministic (v1.6.0+)
    returns_outputs: bool  # fwd/bwd/update allocate and return their outputs (v1.5.0.x)


SHAPES: tuple[BindingShape, ...] = (
    BindingShape(
        "returning",
        dict(zip(FUNCTIONS, (_FWD_RETURNING, _BWD_RETURNING, _UPDATE_RETURNING), strict=True)),
        deterministic=False,
        returns_outputs=True,
    ),
    BindingShape(
        "out",
        dict(zip(FUNCTIONS, (_FWD_OUT, _BWD_OUT, _UPDATE_OUT), strict=True)),
        deterministic=False,
        returns_outputs=False,
    ),
    BindingShape(
        "out-deterministic",
        dict(zip(FUNCTIONS, (_FWD_OUT, _BWD_OUT, _UPDATE_OUT), strict=True)),
        deterministic=True,
        returns_outputs=False,
    ),
)

# A definition: return type, optional line break, name, parameters, opening brace.
_DEFINITION = re.compile(
    r"^(?P<ret>[A-Za-z_][\w:<>]*)\s+(?P<name>causal_conv1d_(?:fwd|bwd|update))\((?P<params>[^)]*)\)\s*\{",
    re.MULTILINE,
)
_EXPORT = re.compile(r'^\s*m\.def\("(?P<name>\w+)",\s*&(?P<target>\w+)', re.MULTILINE)


def normalise(signature: str) -> str:
    """One space between tokens, none inside the parentheses' edges."""
    text = " ".join(signature.split())
    return text.replace("( ", "(").replace(" )", ")")


def signatures(text: str) -> dict[str, str]:
    """Each exported function's normalised signature, as the binding defines it."""
    found = {}
    for match in _DEFINITION.finditer(text):
        found[match["name"]] = normalise(f"{match['ret']} {match['name']}({match['params']})")
    return found


def exports(text: str) -> tuple[str, ...]:
    """The names PYBIND11_MODULE exports (`m.def("name", &name, ...)`), in order."""
    return tuple(m["name"] for m in _EXPORT.finditer(text) if m["name"] == m["target"])


def shape_of(text: str) -> BindingShape | None:
    """The shape of an upstream binding, or of one stable-binding wrote; None when neither."""
    for shape in SHAPES:
        if f"{SHAPE_MARK} {shape.name}\n" in text:
            return shape
    if "PYBIND11_MODULE" not in text or exports(text) != FUNCTIONS:
        return None
    found = signatures(text)
    deterministic = _DETERMINISM in text
    for shape in SHAPES:
        if found == dict(shape.signatures) and deterministic == shape.deterministic:
            return shape
    return None


def mismatch(text: str) -> str:
    """The first fact of text that no shape has: what a drift message names."""
    if "PYBIND11_MODULE" not in text:
        return "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)"
    if exports(text) != FUNCTIONS:
        return f'exports {", ".join(FUNCTIONS)} (m.def("causal_conv1d_fwd", ...))'
    found = signatures(text)
    for name in FUNCTIONS:
        known = {shape.signatures[name] for shape in SHAPES}
        if found.get(name) not in known:
            return min(known)
    return f"{_DETERMINISM} in the v1.6.0+ signatures"
