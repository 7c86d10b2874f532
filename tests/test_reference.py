"""verify.runners.reference against a naive per-timestep, per-element loop (CPU, float64)."""

from __future__ import annotations

import itertools
import math

import pytest

torch = pytest.importorskip("torch")

from mambawin.verify.runners.reference import selective_scan_parallel, selective_scan_ref  # noqa: E402

F64 = torch.float64


def naive_scan(u, delta, A, B, C, D, z, delta_bias, softplus):
    """The recurrence written out element by element: no einsum, no broadcasting."""
    batch, dim, L = u.shape
    dstate = A.shape[1]
    out = torch.zeros(batch, dim, L, dtype=F64)
    last = torch.zeros(batch, dim, dstate, dtype=F64)
    for b, d in itertools.product(range(batch), range(dim)):
        state = [0.0] * dstate
        for t in range(L):
            dt = float(delta[b, d, t]) + (float(delta_bias[d]) if delta_bias is not None else 0.0)
            if softplus:
                dt = dt if dt > 20 else math.log1p(math.exp(dt))
            y = 0.0
            for n in range(dstate):
                b_val = (
                    float(B[d, n]) if B.dim() == 2 else float(B[b, d // (dim // B.shape[1]), n, t])
                )
                c_val = (
                    float(C[d, n]) if C.dim() == 2 else float(C[b, d // (dim // C.shape[1]), n, t])
                )
                state[n] = math.exp(dt * float(A[d, n])) * state[n] + dt * b_val * float(u[b, d, t])
                y += state[n] * c_val
            if D is not None:
                y += float(D[d]) * float(u[b, d, t])
            if z is not None:
                zv = float(z[b, d, t])
                y *= zv / (1 + math.exp(-zv))
            out[b, d, t] = y
        last[b, d] = torch.tensor(state, dtype=F64)
    return out, last


def make(var_B, var_C, groups, has_D, has_z, has_bias, batch=2, dim=4, dstate=3, L=9, seed=0):
    gen = torch.Generator().manual_seed(seed)

    def r(*shape, scale=1.0, uniform=False):
        fn = torch.rand if uniform else torch.randn
        return scale * fn(*shape, generator=gen, dtype=F64)

    return dict(
        u=r(batch, dim, L),
        delta=r(batch, dim, L, scale=0.5, uniform=True),
        A=r(dim, dstate, scale=-1.0, uniform=True),
        B=r(batch, groups, dstate, L) if var_B else r(dim, dstate),
        C=r(batch, groups, dstate, L) if var_C else r(dim, dstate),
        D=r(dim) if has_D else None,
        z=r(batch, dim, L) if has_z else None,
        delta_bias=r(dim, scale=0.5, uniform=True) if has_bias else None,
    )


COMBOS = [
    (vb, vc, g, d, z, bias, sp)
    for vb, vc, g, d, z, bias, sp in itertools.product(
        (False, True),
        (False, True),
        (1, 2),
        (False, True),
        (False, True),
        (False, True),
        (False, True),
    )
    if g == 1 or (vb and vc)
]


@pytest.mark.parametrize("combo", COMBOS, ids=lambda c: "-".join(str(int(x)) for x in c))
def test_reference_matches_naive_loop(combo):
    var_B, var_C, groups, has_D, has_z, has_bias, softplus = combo
    x = make(var_B, var_C, groups, has_D, has_z, has_bias)
    want_out, want_last = naive_scan(**x, softplus=softplus)
    out, last = selective_scan_ref(**x, delta_softplus=softplus, return_last_state=True)
    assert out.dtype == F64
    torch.testing.assert_close(out, want_out, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(last, want_last, rtol=1e-12, atol=1e-12)


def test_variable_BC_with_three_dims_is_one_group():
    x = make(True, True, 1, True, False, False)
    three = dict(x, B=x["B"][:, 0], C=x["C"][:, 0])
    torch.testing.assert_close(selective_scan_ref(**three), selective_scan_ref(**x))


def test_seqlen_one_is_a_single_step():
    x = make(True, False, 1, True, True, True, L=1)
    want, _ = naive_scan(**x, softplus=True)
    torch.testing.assert_close(selective_scan_ref(**x, delta_softplus=True), want)


def test_low_precision_inputs_are_upcast_exactly():
    x = make(True, True, 1, True, True, True)
    low = {
        k: (v.to(torch.bfloat16) if v is not None and k in ("u", "delta", "z") else v)
        for k, v in x.items()
    }
    upcast = {k: (v.to(F64) if v is not None else None) for k, v in low.items()}
    torch.testing.assert_close(selective_scan_ref(**low), selective_scan_ref(**upcast))


@pytest.mark.parametrize(
    "combo",
    [
        (True, True, 2, True, True, True, True),
        (False, False, 1, False, False, False, False),
        (True, False, 1, True, False, True, True),
    ],
)
def test_reference_backward_gradcheck(combo):
    var_B, var_C, groups, has_D, has_z, has_bias, softplus = combo
    x = make(var_B, var_C, groups, has_D, has_z, has_bias, batch=1, dim=2, dstate=2, L=4)
    names = [k for k, v in x.items() if v is not None]
    leaves = [x[k].clone().requires_grad_() for k in names]

    def fn(*args):
        return selective_scan_ref(**dict(zip(names, args, strict=True)), delta_softplus=softplus)

    assert torch.autograd.gradcheck(fn, leaves)


@pytest.mark.parametrize(
    "combo", [(True, True, 2, True, True, True, True), (False, True, 1, False, True, False, False)]
)
@pytest.mark.parametrize("L", [1, 5, 64, 100])
def test_parallel_scan_matches_sequential(combo, L):
    var_B, var_C, groups, has_D, has_z, has_bias, softplus = combo
    x = make(var_B, var_C, groups, has_D, has_z, has_bias, L=L)
    torch.testing.assert_close(
        selective_scan_parallel(**x, delta_softplus=softplus),
        selective_scan_ref(**x, delta_softplus=softplus),
    )


def test_parallel_scan_keeps_the_input_dtype_and_has_gradients():
    x = make(True, True, 1, True, True, True, L=16)
    x32 = {k: (v.float().requires_grad_() if v is not None else None) for k, v in x.items()}
    out = selective_scan_parallel(**x32, delta_softplus=True)
    assert out.dtype == torch.float32
    out.sum().backward()
    torch.testing.assert_close(
        out.double(), selective_scan_ref(**x, delta_softplus=True), rtol=1e-4, atol=1e-4
    )
    assert all(torch.isfinite(v.grad).all() for v in x32.values() if v is not None)


def test_groups_must_divide_dim():
    x = make(True, True, 1, False, False, False)
    x["B"] = torch.randn(2, 3, 3, 9, dtype=F64)
    with pytest.raises(ValueError, match="not a multiple"):
        selective_scan_ref(**x)
