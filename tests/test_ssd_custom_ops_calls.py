"""ssd-custom-ops' wrappers hand upstream's callers exactly what upstream's helpers return.

The block mambawin appends to ssd_combined.py runs on CPU here around stand-ins with upstream's
return conventions (the caller's buffers written in place and returned, None where upstream has
none, `out` itself as outz without z), since the real helpers need a GPU: for every combination of
optional arguments the wrapped call returns the same tuple, the same buffer objects, and the
backward's op returns no buffer it writes (a custom op may not).
"""

from __future__ import annotations

import itertools
import math
from types import SimpleNamespace
from typing import Any, Optional

import pytest

from mambawin.patch.mamba import ssd_custom_ops

torch = pytest.importorskip("torch")
Tensor = torch.Tensor
SHAPE = {"batch": 1, "seqlen": 8, "nheads": 2, "headdim": 4, "dstate": 3, "chunk": 4}


def _fwd(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
         seq_idx=None, cu_seqlens=None, dt_softplus=False,
         dt_limit=(0.0, float("inf"))):  # fmt: skip
    b, length, h, p = x.shape
    n, c = B.shape[-1], math.ceil(length / chunk_size)
    out = x + 1
    out_x = x + 2 if z is not None else None
    cs = torch.full((b, h, c, chunk_size), 3.0)
    outs = (out, out_x, cs, cs + 1, torch.zeros(b, c, h, p, n), torch.zeros(b, h, p, n))
    return outs if cu_seqlens is None else (*outs, torch.ones(cu_seqlens.shape[0] - 1, h, p, n))


def _bwd(dout, x, dt, A, B, C, out, chunk_size, D=None, z=None, dt_bias=None,
         initial_states=None, dfinal_states=None, seq_idx=None, dt_softplus=False,
         dt_limit=(0.0, float("inf")), dx=None, ddt=None, dB=None, dC=None, dz=None,
         recompute_output=False):  # fmt: skip
    def written(buffer: Tensor | None, like: Tensor, value: float) -> Tensor:
        target = buffer if buffer is not None else torch.empty_like(like)
        return target.fill_(value)  # a value per slot: a swapped slot shows

    vals = (
        written(dx, x, 7.0), written(ddt, dt, 8.0), A + 1, written(dB, B, 9.0),
        written(dC, C, 10.0), D + 1 if D is not None else None,
        written(dz, z, 11.0) if z is not None else None,
        dt_bias + 1 if dt_bias is not None else None,
        initial_states + 1 if initial_states is not None else None,
    )  # fmt: skip
    return vals if not recompute_output else (*vals, x * 5 if z is not None else out)


@pytest.fixture(scope="module")
def block() -> SimpleNamespace:
    """The appended block executed after the stand-ins (ops in a test namespace)."""
    text = ssd_custom_ops.block(state_dtype=False).replace("mamba_ssm::", "mambawin_test::")
    namespace: dict[str, Any] = {
        "torch": torch,
        "Tensor": Tensor,
        "Optional": Optional,
        "_mamba_chunk_scan_combined_fwd": _fwd,
        "_mamba_chunk_scan_combined_bwd": _bwd,
    }
    exec(compile(text, "ssd_custom_ops_block", "exec"), namespace)
    return SimpleNamespace(**namespace)


def _inputs() -> dict[str, Tensor]:
    b, length, h, p, n = (SHAPE[k] for k in ("batch", "seqlen", "nheads", "headdim", "dstate"))
    return {
        "x": torch.randn(b, length, h, p),
        "dt": torch.rand(b, length, h),
        "A": -torch.rand(h),
        "B": torch.randn(b, length, 1, n),
        "C": torch.randn(b, length, 1, n),
    }


def _same(got: tuple[Any, ...], want: tuple[Any, ...]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            assert torch.equal(g, w)


@pytest.mark.parametrize(("with_z", "with_d", "varlen"), list(itertools.product([0, 1], repeat=3)))
def test_forward_returns_upstreams_tuple(
    block: SimpleNamespace, with_z: int, with_d: int, varlen: int
) -> None:
    t = _inputs()
    kwargs = {
        "z": torch.randn_like(t["x"]) if with_z else None,
        "D": torch.ones(SHAPE["nheads"]) if with_d else None,
        "cu_seqlens": torch.tensor([0, 3, 8]) if varlen else None,
    }
    got = block._mamba_chunk_scan_combined_fwd(*t.values(), SHAPE["chunk"], **kwargs)
    _same(got, _fwd(*t.values(), SHAPE["chunk"], **kwargs))


CASES = list(itertools.product([0, 1], repeat=6))


@pytest.mark.parametrize(("with_z", "given", "recompute", "with_d", "bias", "init"), CASES)
def test_backward_returns_upstreams_tuple_and_the_callers_buffers(
    block: SimpleNamespace,
    with_z: int,
    given: int,
    recompute: int,
    with_d: int,
    bias: int,
    init: int,
) -> None:
    t = _inputs()
    x = t["x"]
    out, dout = x * 3, torch.randn_like(x)
    h, p, n = SHAPE["nheads"], SHAPE["headdim"], SHAPE["dstate"]
    z = torch.randn_like(x) if with_z else None
    buffers = {
        "dx": torch.zeros_like(x) if given else None,
        "ddt": torch.zeros_like(t["dt"]) if given else None,
        "dB": torch.zeros_like(t["B"]) if given else None,
        "dC": torch.zeros_like(t["C"]) if given else None,
        "dz": torch.zeros_like(x) if given and with_z else None,
    }
    kwargs = {
        "z": z,
        "D": torch.ones(h) if with_d else None,
        "dt_bias": torch.ones(h) if bias else None,
        "initial_states": torch.zeros(1, h, p, n) if init else None,
        "recompute_output": bool(recompute),
        **buffers,
    }
    args = (dout, *t.values(), out, SHAPE["chunk"])
    got = block._mamba_chunk_scan_combined_bwd(*args, **kwargs)
    _same(got, _bwd(*args, **kwargs))
    for position, name in ((0, "dx"), (1, "ddt"), (3, "dB"), (4, "dC"), (6, "dz")):
        if buffers[name] is not None:
            assert got[position] is buffers[name]  # written in place, as upstream returns it
    if recompute and not with_z:
        assert got[-1] is out
