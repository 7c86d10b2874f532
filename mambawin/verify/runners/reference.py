"""Pure-torch selective scans: the float64 truth the compiled kernel is checked against.

Written for mambawin (not copied from upstream) from the recurrence the kernel implements:

    delta' = softplus(delta + delta_bias)           (bias and softplus optional)
    x_t    = exp(delta'_t * A) * x_{t-1} + delta'_t * B_t * u_t
    y_t    = <x_t, C_t> + D * u_t,  out = y * silu(z)  (D and z optional)

Shapes follow `selective_scan_cuda.fwd`: u, delta, z (batch, dim, seqlen); A (dim, dstate);
B and C either fixed (dim, dstate) or variable (batch, dstate, seqlen) or
(batch, groups, dstate, seqlen); D and delta_bias (dim,). Complex A is not supported: mambawin
removes the complex kernels by default. torch is imported lazily by callers of this module only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor


def selective_scan_ref(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    z: Tensor | None = None,
    delta_bias: Tensor | None = None,
    delta_softplus: bool = False,
    return_last_state: bool = False,
) -> Any:
    """Sequential scan in float64 (differentiable); returns out or (out, last_state), float64."""
    import torch

    f64 = torch.float64
    u, delta, A = u.to(f64), delta.to(f64), A.to(f64)
    dt = effective_delta(delta, delta_bias, delta_softplus)
    decay = torch.exp(torch.einsum("bdl,dn->bdln", dt, A))
    drive = _drive(dt, u, B.to(f64))
    C_t = _per_step(C.to(f64), u.shape[1])
    state = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])
    ys = []
    for t in range(u.shape[2]):
        state = decay[:, :, t] * state + drive[:, :, t]
        ys.append(_readout(state, C_t, t))
    out = _finish(torch.stack(ys, dim=2), u, D, z)
    return (out, state) if return_last_state else out


def selective_scan_parallel(
    u: Tensor,
    delta: Tensor,
    A: Tensor,
    B: Tensor,
    C: Tensor,
    D: Tensor | None = None,
    z: Tensor | None = None,
    delta_bias: Tensor | None = None,
    delta_softplus: bool = False,
) -> Tensor:
    """Vectorised log-depth (Hillis-Steele) scan in the input dtype: a fair eager baseline.

    It does O(L log L) work over (batch, dim, dstate, seqlen) tensors, with no Python loop over
    time steps, so it is what a careful torch user would write without a custom kernel.
    """
    import torch

    dtype = u.dtype
    dt = effective_delta(delta, delta_bias, delta_softplus).to(dtype)
    decay = torch.exp(torch.einsum("bdl,dn->bdnl", dt, A.to(dtype)))
    drive = _drive(dt, u, B.to(dtype)).transpose(2, 3)  # (b, d, n, l): scan along the last dim
    states = _hillis_steele(decay, drive)
    C_full = _per_step(C.to(dtype), u.shape[1])
    if C_full.dim() == 2:
        y = torch.einsum("bdnl,dn->bdl", states, C_full)
    else:
        y = torch.einsum("bdnl,bdnl->bdl", states, C_full)
    return _finish(y, u, D, z).to(dtype)


def effective_delta(delta: Tensor, delta_bias: Tensor | None, softplus: bool) -> Tensor:
    """delta + delta_bias, through softplus when asked (threshold 20, as the kernel does)."""
    import torch.nn.functional as F

    if delta_bias is not None:
        delta = delta + delta_bias.to(delta.dtype)[..., None]
    return F.softplus(delta) if softplus else delta


def expand_groups(BC: Tensor, dim: int) -> Tensor:
    """Variable B/C as (batch, dim, dstate, seqlen): each group serves dim // groups channels."""
    if BC.dim() == 3:
        BC = BC.unsqueeze(1)
    groups = BC.shape[1]
    if dim % groups:
        raise ValueError(f"dim {dim} is not a multiple of the {groups} B/C groups")
    return BC.repeat_interleave(dim // groups, dim=1)


def _drive(dt: Tensor, u: Tensor, B: Tensor) -> Tensor:
    """delta * B * u as (batch, dim, seqlen, dstate)."""
    import torch

    if B.dim() == 2:
        return torch.einsum("bdl,dn,bdl->bdln", dt, B, u.to(dt.dtype))
    return torch.einsum("bdl,bdnl,bdl->bdln", dt, expand_groups(B, u.shape[1]), u.to(dt.dtype))


def _per_step(C: Tensor, dim: int) -> Tensor:
    return C if C.dim() == 2 else expand_groups(C, dim)


def _readout(state: Tensor, C: Tensor, t: int) -> Tensor:
    import torch

    if C.dim() == 2:
        return torch.einsum("bdn,dn->bd", state, C)
    return torch.einsum("bdn,bdn->bd", state, C[..., t])


def _finish(y: Tensor, u: Tensor, D: Tensor | None, z: Tensor | None) -> Tensor:
    import torch.nn.functional as F

    if D is not None:
        y = y + u.to(y.dtype) * D.to(y.dtype)[:, None]
    if z is not None:
        y = y * F.silu(z.to(y.dtype))
    return y


def _hillis_steele(decay: Tensor, drive: Tensor) -> Tensor:
    """Inclusive scan of x_t = a_t x_{t-1} + b_t along the last dim, log2(L) out-of-place steps."""
    import torch.nn.functional as F

    a, b = decay, drive
    shift = 1
    while shift < a.shape[-1]:
        # Pair (a, b) at t with the one `shift` steps back; padding is the identity (1, 0).
        a_prev = F.pad(a[..., :-shift], (shift, 0), value=1.0)
        b_prev = F.pad(b[..., :-shift], (shift, 0), value=0.0)
        a, b = a * a_prev, b + a * b_prev
        shift *= 2
    return b
