"""Every backend of the rotation (:data:`posenc.backends.rotate.BACKENDS`), chosen through
:func:`posenc.backends.select`'s seam, against the one reference ``rotation_reference``, which is itself
checked against the rotation written as complex numbers.

The Triton kernel is this file's GPU twin in tests/test_cuda.py (it needs a CUDA device)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import _native
from posenc.backends import Environment, select
from posenc.backends import rotate as rotary

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


CPU_BACKENDS = [b.name for b in rotary.BACKENDS if b.devices is None or "cpu" in b.devices]
TOLERANCE = {F64: 1e-13, torch.float32: 3e-6, torch.bfloat16: 3e-2}


def setting(backend: rotary.Backend, x: torch.Tensor) -> Environment:
    """The setting ``backend`` is declared for on the CPU: eager, or compiling if only that."""
    env = Environment.of(x)
    return dataclasses.replace(
        env, compiling=not backend.eager, exporting=not backend.eager and not backend.compiled
    )


@pytest.mark.parametrize("name", CPU_BACKENDS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("rotation", [True, False], ids=["rotation", "any tables"])
@pytest.mark.parametrize("dtype", [F64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("inverse", [False, True], ids=["R", "R^T"])
def test_every_backend_equals_the_reference(name, layout, rotation, dtype, inverse):
    index = [b.name for b in rotary.BACKENDS].index(name)
    backend = rotary.BACKENDS[index]
    if backend.needs == "native" and _native.kernels is None:
        pytest.skip("the compiled loops are not built here (no C compiler at install)")
    torch.manual_seed(0)
    served = 0
    for shape, r in (((2, 3, 9, 16), 16), ((3, 5, 12), 8)):  # all dims rotated; partial rotary
        x = torch.randn(*shape, dtype=F64).to(dtype)
        cos, sin = tables(shape[-2], r, layout, rotation=rotation)
        work = F64 if dtype == F64 else torch.float32
        cos_w, sin_w = cos.to(work), sin.to(work)
        for paired in [rotary.pair_values(cos_w, sin_w, layout)] if rotation else [None]:
            call = rotary.Rotation(x, cos_w, sin_w, layout, inverse, paired)
            chosen = select(rotary.BACKENDS[index:], call, setting(backend, x))
            if chosen is not backend:  # it does not serve this call: the next one in line does
                assert not backend.admits(setting(backend, x)) or not backend.supports(call)
                continue
            served += 1
            out = chosen.apply(call)
            want = rotary.rotation_reference(x.to(F64), cos, sin, layout, inverse)
            assert out.dtype == dtype and out.shape == x.shape
            torch.testing.assert_close(out.to(F64), want, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype])
    if name in ("loop", "pairs", "reference", "operator (loop)"):
        assert served  # these serve every call of their dtypes


def test_the_complex_backend_serves_adjacent_rotations_when_no_loop_does(monkeypatch):
    """Without the CPU loop, adjacent rotation tables over a contiguous float32 ``x`` go to one complex
    multiply; half_split, or tables not known to be rotations, to the pair arithmetic."""
    monkeypatch.setattr(_native, "kernels", None)
    x = torch.randn(2, 4, 8)
    cos, sin = (t.float() for t in tables(4, 8, "adjacent", rotation=True))
    paired = rotary.pair_values(cos, sin, "adjacent")
    env = Environment.of(x)
    assert (
        select(rotary.BACKENDS, rotary.Rotation(x, cos, sin, "adjacent", False, paired), env).name
        == "complex"
    )
    assert (
        select(rotary.BACKENDS, rotary.Rotation(x, cos, sin, "half_split", False, paired), env).name
        == "pairs"
    )
    assert select(rotary.BACKENDS, rotary.Rotation(x, cos, sin, "adjacent", False, None), env).name == "pairs"


def test_compiling_and_exporting_choose_the_operator_or_the_reference():
    x = torch.randn(2, 4, 8)
    cos, sin = (t.float() for t in tables(4, 8, "half_split", rotation=True))
    call = rotary.Rotation(x, cos, sin, "half_split", False, None)
    env = Environment.of(x)
    compiling = dataclasses.replace(env, compiling=True)
    exporting = dataclasses.replace(env, compiling=True, exporting=True)
    assert (
        select(rotary.BACKENDS, call, dataclasses.replace(compiling, native=True)).name == "operator (loop)"
    )
    assert select(rotary.BACKENDS, call, dataclasses.replace(compiling, native=False)).name == "reference"
    assert (
        select(
            rotary.BACKENDS, call._replace(layout="adjacent"), dataclasses.replace(compiling, native=False)
        ).name
        == "operator (complex)"
    )
    assert select(rotary.BACKENDS, call, exporting).name == "reference"
