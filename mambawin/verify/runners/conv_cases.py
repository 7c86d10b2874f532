"""The causal-conv1d cases the conv runner checks, and their float64 references (the causal
convolution with SiLU, initial and final states, seq_idx, and the decoding update)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mambawin.verify.runners.common import DTYPES

WIDTHS = (2, 3, 4)


SEQLENS = (1, 7, 128, 1025, 4096)


MODES = ("plain", "channel_last", "initial_states", "seq_idx")


# (rtol, atol) per input dtype and for the fp32 weights: upstream's tests/test_causal_conv1d.py.
TOLERANCES = {"float32": (3e-4, 1e-3), "float16": (3e-3, 5e-3), "bfloat16": (1e-2, 5e-2)}


WEIGHT_TOLERANCE = (1e-3, 1e-3)


@dataclass(frozen=True)
class ConvCase:
    """One call: dtype, width, length, bias/SiLU, and mode (a layout/feature, or 'update')."""

    dtype: str
    width: int
    seqlen: int
    bias: bool
    silu: bool
    mode: str
    batch: int = 2
    dim: int = 64

    @property
    def name(self) -> str:
        flags = [f for f, on in (("bias", self.bias), ("silu", self.silu)) if on]
        return " ".join([self.dtype, self.mode, f"w={self.width}", f"L={self.seqlen}", *flags])


@dataclass(frozen=True)
class ConvConfig:
    """What to run: seed, dtypes, widths, lengths, update cases or not, the device."""

    seed: int
    dtypes: tuple[str, ...] = DTYPES
    widths: tuple[int, ...] = WIDTHS
    seqlens: tuple[int, ...] = SEQLENS
    update: bool = True
    device: str = "cuda"
    json_output: bool = False


def features(fn: Any) -> tuple[str, ...]:
    """The modes the installed causal_conv1d_fn supports, from its parameters."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return ("plain", "channel_last")
    modes = ["plain", "channel_last"]
    if {"initial_states", "return_final_states"} <= set(params):
        modes.append("initial_states")
    if "seq_idx" in params:
        modes.append("seq_idx")
    return tuple(modes)


def plan_cases(config: ConvConfig, modes: Sequence[str]) -> list[ConvCase]:
    """Each (dtype, width, length) gets one mode and one bias/SiLU pair, rotating so that every
    mode meets every pair; then the update path at lengths 1 and 4 with every pair."""
    cases, pairs = [], ((True, True), (False, False), (True, False), (False, True))
    for d, dtype in enumerate(config.dtypes):
        grid = [(w, L) for w in config.widths for L in config.seqlens]
        for i, (width, seqlen) in enumerate(grid):
            mode = modes[(i + d) % len(modes)]
            bias, silu = pairs[(i // len(modes) + i + d) % len(pairs)]
            cases.append(ConvCase(dtype, width, seqlen, bias, silu, mode))
        if config.update:
            cases += [
                ConvCase(dtype, w, L, *pairs[(w + L + d) % len(pairs)], "update")
                for w in config.widths
                for L in (1, 4)
            ]
    return cases


def conv_ref(
    x: Any,
    weight: Any,
    bias: Any = None,
    initial_states: Any = None,
    seq_idx: Any = None,
    silu: bool = False,
    compute: Any = None,
) -> tuple[Any, Any]:
    """(out, final_states) in float64 (or `compute`), differentiable; final_states = the last
    width-1 inputs."""
    import torch
    import torch.nn.functional as F

    f64, (batch, dim, seqlen), width = compute or torch.float64, x.shape, weight.shape[1]
    pad = (
        initial_states.to(f64)
        if initial_states is not None
        else x.new_zeros(batch, dim, width - 1, dtype=f64)
    )
    full = torch.cat([pad, x.to(f64)], dim=-1)
    out = x.new_zeros(batch, dim, seqlen, dtype=f64)
    for k in range(width):
        term = weight[:, k, None].to(f64) * full[..., k : k + seqlen]
        out = out + term * _same_sequence(seq_idx, width - 1 - k, seqlen, f64)
    if bias is not None:
        out = out + bias.to(f64)[:, None]
    return (F.silu(out) if silu else out), full[..., full.shape[-1] - (width - 1) :]


def _same_sequence(seq_idx: Any, lag: int, seqlen: int, dtype: Any) -> Any:
    """1 where the input `lag` steps back is in the same packed sequence (padding is 0 anyway)."""
    if seq_idx is None or lag == 0:
        return 1.0
    import torch

    mask = torch.zeros(seq_idx.shape[0], seqlen, dtype=dtype, device=seq_idx.device)
    mask[:, lag:] = (seq_idx[:, lag:] == seq_idx[:, :-lag]).to(dtype)
    return mask[:, None, :]


def update_ref(
    x: Any, conv_state: Any, weight: Any, bias: Any, silu: bool, compute: Any = None
) -> tuple[Any, Any]:
    """(out, new conv_state) of one decoding step: x (batch, dim[, seqlen]) after the state."""
    import torch

    x3 = x.unsqueeze(-1) if x.dim() == 2 else x
    wide = compute or torch.float64
    full = torch.cat([conv_state.to(wide), x3.to(wide)], dim=-1)
    width, seqlen = weight.shape[1], x3.shape[-1]
    history = full[..., full.shape[-1] - seqlen - (width - 1) : full.shape[-1] - seqlen]
    out, _ = conv_ref(x3, weight, bias, history, None, silu, compute)
    return (out.squeeze(-1) if x.dim() == 2 else out), full[..., -conv_state.shape[-1] :]


def tolerance(name: str, case: ConvCase) -> tuple[float, float]:
    """Activations and dx at the input dtype's tolerance; fp32 weight gradients at 1e-3."""
    return WEIGHT_TOLERANCE if name in ("dweight", "dbias") else TOLERANCES[case.dtype]
