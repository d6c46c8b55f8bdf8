"""Every backend of apply_rotary (nn/rotary.py's ``_backends``) against the one reference,
``rotation_reference``, which is itself checked against the rotation written as complex numbers.

The Triton kernel is this file's GPU twin in tests/test_cuda.py (it needs a CUDA device)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import _native
from posenc.nn import rotary

F64 = torch.float64
LAYOUTS = ["adjacent", "half_split"]


def tables(
    s: int, r: int, layout: str, *, rotation: bool, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``[s, r]`` tables in ``layout``: a rotation (both columns of a pair equal) or any values."""
    g = torch.Generator().manual_seed(seed)
    if not rotation:
        return torch.randn(s, r, generator=g, dtype=F64), torch.randn(s, r, generator=g, dtype=F64)
    angle = torch.randn(s, r // 2, generator=g, dtype=F64) * 10
    both = (
        (lambda t: torch.cat([t, t], -1))
        if layout == "half_split"
        else (lambda t: t.repeat_interleave(2, -1))
    )
    return both(angle.cos()), both(angle.sin())


@given(
    s=st.integers(1, 7),
    pairs=st.integers(1, 5),
    extra=st.integers(0, 3),
    layout=st.sampled_from(LAYOUTS),
    inverse=st.booleans(),
)
def test_the_reference_is_the_rotation_of_complex_pairs(s, pairs, extra, layout, inverse):
    r, d = 2 * pairs, 2 * pairs + extra
    x = torch.randn(2, s, d, dtype=F64)
    cos, sin = tables(s, r, layout, rotation=True)
    got = rotary.rotation_reference(x, cos, sin, layout, inverse)
    half = torch.arange(pairs)
    a, b = (half, half + pairs) if layout == "half_split" else (2 * half, 2 * half + 1)
    z = torch.complex(x[..., a], x[..., b]) * torch.complex(cos[:, a], -sin[:, a] if inverse else sin[:, a])
    want = x.clone()
    want[..., a], want[..., b] = z.real, z.imag
    torch.testing.assert_close(got, want, rtol=0, atol=1e-14)


BACKENDS = {
    "fused (the CPU loop)": rotary._rotate_fused,
    "whole complex": rotary._rotate_whole_complex,
    "blocks": rotary._rotate_blocks,
    "compiled form, called eagerly": rotary._rotate_compiled,
}
TOLERANCE = {F64: 1e-13, torch.float32: 3e-6, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotation", [True, False], ids=["rotation", "any tables"])
@pytest.mark.parametrize("dtype", [F64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("inverse", [False, True], ids=["R", "R^T"])
def test_every_backend_equals_the_reference(backend, layout, rotation, dtype, inverse):
    if backend.startswith("fused") and _native.kernels is None:
        pytest.skip("the compiled loops are not built here (no C compiler at install)")
    torch.manual_seed(0)
    for shape, r in (((2, 3, 9, 16), 16), ((3, 5, 12), 8)):  # all dims rotated; partial rotary
        x = torch.randn(*shape, dtype=F64).to(dtype)
        cos, sin = tables(shape[-2], r, layout, rotation=rotation)
        work = F64 if dtype == F64 else torch.float32
        cos_w, sin_w = cos.to(work), sin.to(work)
        pairs = rotary._pair_values(cos_w, sin_w, layout, rotation)  # per-pair views, or None: any tables
        out = BACKENDS[backend](x, cos_w, sin_w, layout, inverse, pairs)
        if out is None:  # a backend that does not serve this case says so; the next one in line serves
            assert backend in ("whole complex", "fused (the CPU loop)")
            continue
        want = rotary.rotation_reference(x.to(F64), cos, sin, layout, inverse)
        assert out.dtype == dtype and out.shape == x.shape
        torch.testing.assert_close(out.to(F64), want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])


def test_the_whole_complex_backend_serves_adjacent_rotations_when_no_loop_does(monkeypatch):
    """The choice is made in one place: without the CPU loop, adjacent rotation tables over a contiguous
    float32 ``x`` go to one complex multiply, anything else to the blocks."""
    monkeypatch.setattr(_native, "kernels", None)
    x = torch.randn(2, 4, 8)
    assert rotary._backends(x) == (rotary._rotate_whole_complex, rotary._rotate_blocks)
    cos, sin = (t.float() for t in tables(4, 8, "adjacent", rotation=True))
    pairs = rotary._pair_values(cos, sin, "adjacent", True)
    assert rotary._rotate_whole_complex(x, cos, sin, "adjacent", False, pairs) is not None
    assert rotary._rotate_whole_complex(x, cos, sin, "half_split", False, pairs) is None
