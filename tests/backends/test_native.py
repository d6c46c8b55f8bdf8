"""The compiled loops of ``posenc._kernels`` against the pure NumPy/PyTorch code they replace and
against float64 references: tables (the angle addition formula) and rotary (Su et al. 2021, eq. 34)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from posenc import _native, spectrum, tables

torch = pytest.importorskip("torch")
from posenc.backends import Environment, select, waves  # noqa: E402
from posenc.backends import rotate as rotation  # noqa: E402
from posenc.nn import functional, rotary  # noqa: E402

pytestmark = pytest.mark.usefixtures("native")


def looked_up(cos: torch.Tensor, sin: torch.Tensor, layout: str):
    """The tables' per-pair values where both columns of every pair are equal (else ``None``), found as
    :func:`posenc.nn.apply_rotary` finds them for tables it is given."""
    return rotation.pair_values(cos, sin, layout)


def rotate(x, cos, sin, layout, inverse, paired):
    """The rotation by the backend :func:`posenc.backends.select` picks for it here."""
    return rotation.rotate(x, cos, sin, layout, inverse, paired)


def loop(x, cos, sin, layout, inverse, paired):
    """The rotation by the compiled loop, chosen through :func:`posenc.backends.select`'s seam."""
    call = rotation.Rotation(x, cos, sin, layout, inverse, paired)
    backend = select(rotation.BACKENDS, call, Environment.of(x))
    assert backend.name == "loop"
    return backend.apply(call)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(9, 700),
    half_dim=st.integers(1, 40),
    start=st.sampled_from([0, 1, 977, 10**7 - 700]),
    layout=st.sampled_from(spectrum.LAYOUTS),
    dtype=st.sampled_from([np.float32, np.float64]),
)
def test_numpy_table_equals_the_pure_path(pure, n, half_dim, start, layout, dtype):
    positions = np.arange(start, start + n, dtype=np.float64)
    fast = tables.sinusoidal(positions, 2 * half_dim, layout=layout, dtype=dtype)
    slow = pure(tables.sinusoidal, positions, 2 * half_dim, layout=layout, dtype=dtype)
    if dtype is np.float32:
        np.testing.assert_array_equal(fast, slow)  # the float64 products round to the same float32
    else:  # NumPy's complex multiply may fuse a multiply-add: within one rounding (values ≤ 1)
        assert np.abs(fast - slow).max() <= 2**-52
    angles = np.multiply.outer(positions, spectrum.sinusoidal_frequencies(2 * half_dim))
    sin_cols, cos_cols = spectrum.layout_columns(2 * half_dim, layout)
    tol = 3.1e-8 if dtype is np.float32 else 1e-9  # float64: the direct angle t·w is off by ≤ 9.3e-10 at 1e7
    assert np.abs(fast[:, sin_cols] - np.sin(angles)).max() <= tol
    assert np.abs(fast[:, cos_cols] - np.cos(angles)).max() <= tol


def test_large_numpy_table_is_streamed_and_still_exact(pure):
    n = _native.STREAM_BYTES // (4 * 512) + 3  # float32 rows of 512: just past the streaming size
    fast = tables.sinusoidal(n, 512, dtype=np.float32)
    np.testing.assert_array_equal(fast, pure(tables.sinusoidal, n, 512, dtype=np.float32))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_torch_table_equals_the_pure_path(pure, threads, dtype):
    # the interleaved rows of posenc.nn.functional.waves: the compiled loop, chosen through select()'s seam,
    # against the torch complex multiplies the pure path runs
    w = torch.from_numpy(spectrum.geometric(128, 10000.0))
    columns = functional.layout_index(128)
    call = waves.Waves(5000, w, columns, columns, None, dtype, 10**7 - 5000, False)
    assert select(waves.BACKENDS, call, Environment.at(w.device, dtype)).name == "loop"
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        fast = waves.waves(call)
        slow = pure(waves.waves, call)
    finally:
        torch.set_num_threads(previous)
    assert (fast.double() - slow.double()).abs().max().item() <= (0 if dtype == torch.float32 else 2**-52)


def _tables(s: int, r: int, layout: str, dtype: torch.dtype, general: bool):
    theta = torch.rand(r // 2, dtype=torch.float64)
    sin, cos = functional.sincos(s, theta, dtype=torch.float64, offset=1000)
    cos, sin = rotation.layout_table(cos, layout), rotation.layout_table(sin, layout)
    if general:  # the two columns of a pair differ: the loop reads full [s, r] tables
        cos, sin = cos + 0.1 * torch.rand_like(cos), sin + 0.1 * torch.rand_like(sin)
    return cos.to(dtype), sin.to(dtype)


def _reference(x, cos, sin, layout, inverse):
    r = cos.shape[-1]
    rotated = rotation.rotation_reference(x.double()[..., :r], cos.double(), sin.double(), layout, inverse)
    return torch.cat([rotated, x.double()[..., r:]], dim=-1)


CASES = [  # shape, rotary dims, how x is laid out
    ((2, 3, 17, 8), 8, "contiguous"),
    ((2, 3, 17, 10), 6, "contiguous"),  # partial rotary: dims 6 … 9 copied
    ((2, 3, 17, 8), 8, "transposed"),  # [b, s, h, d] storage seen as [b, h, s, d]
    ((5, 16), 16, "contiguous"),
    ((2, 2, 2, 7, 12), 8, "contiguous"),  # five dims, merged
    ((2, 2, 2, 7, 12), 8, "unmergeable"),  # five dims that cannot be merged: falls back
    ((2, 3, 17, 8), 8, "sliced"),
]


def _x(shape, how, dtype):
    if how == "transposed":
        b, h, s, d = shape
        return torch.randn(b, s, h, d, dtype=torch.float64).transpose(1, 2).to(dtype)
    if how == "unmergeable":
        return (
            torch.randn(*shape[:2], shape[3], shape[2], shape[4], dtype=torch.float64)
            .transpose(2, 3)
            .to(dtype)
        )
    if how == "sliced":
        return torch.randn(*shape[:-2], shape[-2] + 5, shape[-1], dtype=torch.float64)[..., 2:-3, :].to(dtype)
    return torch.randn(shape, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("shape,r,how", CASES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("layout", rotation.LAYOUTS)
@pytest.mark.parametrize("general", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
def test_rotation_matches_float64_and_the_pure_path(pure, shape, r, how, dtype, layout, general, inverse):
    torch.manual_seed(hash((shape, how, layout, general, inverse)) % 2**31)
    x = _x(shape, how, dtype)
    cos, sin = _tables(shape[-2], r, layout, dtype, general)
    fast = rotate(x, cos, sin, layout, inverse, looked_up(cos, sin, layout))
    slow = pure(rotate, x, cos, sin, layout, inverse, looked_up(cos, sin, layout))
    assert fast.shape == x.shape and fast.dtype == x.dtype and fast.stride() == slow.stride()
    reference = _reference(x, cos, sin, layout, inverse)
    eps = torch.finfo(dtype).eps
    bound = 2 * eps * reference.abs().max().item()  # a product, a sum, one rounding to dtype
    assert (fast.double() - reference).abs().max().item() <= bound
    # The pure path (complex multiply, or addcmul, which may fuse a multiply-add): within one rounding.
    # Bit-for-bit agreement where it matters (a slice rotates like the whole) is in test_rotary.py.
    assert (fast.double() - slow.double()).abs().max().item() <= bound


def test_bfloat16_keeps_nan_and_inf_and_rounds_to_nearest_even(pure):
    cos, sin = torch.ones(1, 4, dtype=torch.bfloat16), torch.zeros(1, 4, dtype=torch.bfloat16)
    x = torch.tensor([[float("nan"), 2.0, float("inf"), 1.0 + 2**-7]]).to(torch.bfloat16)
    out = rotate(
        x, cos, sin, "adjacent", False, looked_up(cos, sin, "adjacent")
    )  # identity angle; inf·0 = nan reaches the partner
    assert torch.isnan(out[0, 0]) and out[0, 2] == float("inf")
    torch.testing.assert_close(
        out,
        pure(rotate, x, cos, sin, "adjacent", False, looked_up(cos, sin, "adjacent")),
        rtol=0,
        atol=0,
        equal_nan=True,
    )
    # 1·(1 + 2^-8) lies halfway between the bfloat16 neighbours 1 and 1 + 2^-7: rounds to the even, 1
    halfway = torch.full((1, 2), 1.0 + 2**-8)
    out = rotate(torch.ones(1, 2, dtype=torch.bfloat16), halfway, torch.zeros(1, 2), "adjacent", False, None)
    assert out[0, 0].item() == 1.0
    # (1 + 2^-7)·(1 + 2^-8) lies just above the halfway point 1 + 2^-7 + 2^-8: rounds up
    above = torch.tensor([[0.0, 1.0 + 2**-7]], dtype=torch.bfloat16)
    out = rotate(above, halfway, torch.zeros(1, 2), "adjacent", False, None)
    assert out[0, 1].item() == 1.0 + 2**-6


def test_gradient_through_the_native_loop():
    cos, sin = _tables(6, 8, "half_split", torch.float64, False)
    x = torch.randn(2, 3, 6, 8, dtype=torch.float64, requires_grad=True)
    assert (
        select(
            rotation.BACKENDS, rotation.Rotation(x, cos, sin, "half_split", False, None), Environment.of(x)
        ).name
        == "loop"
    )
    assert torch.autograd.gradcheck(lambda t: rotary.apply_rotary(t, cos, sin, layout="half_split"), (x,))


def test_env_switch_turns_the_loops_off():
    code = "import posenc._native as n; print(n.kernels is None)"
    env = {**os.environ, "POSENC_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# Every loop promises the IEEE operations its formula names, each rounded once: no fused multiply-add
# (the build passes -ffp-contract=off; GCC 12's vectorizer fuses the alternating −/+ of a complex product
# into vfmaddsub regardless, so the loops are written in a form it leaves alone). The references here are
# separate elementwise operations, never fused.


def _doubled(first: np.ndarray, factor: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``r < n`` (real, imaginary parts) of ``first · factor^r`` by doubling, each operation separate:
    rows ``m … 2m−1`` are rows ``0 … m−1`` times the factor, which is then squared."""
    re, im = [first.real.copy()], [first.imag.copy()]
    fr, fm = factor.real.copy(), factor.imag.copy()
    while len(re) < n:
        m = len(re)
        for r in range(min(m, n - m)):
            re.append(np.subtract(np.multiply(re[r], fr), np.multiply(im[r], fm)))
            im.append(np.add(np.multiply(re[r], fm), np.multiply(im[r], fr)))
        fr, fm = (
            np.subtract(np.multiply(fr, fr), np.multiply(fm, fm)),
            np.add(np.multiply(fr, fm), np.multiply(fm, fr)),
        )
    return np.array(re), np.array(im)


def _unit(angles: np.ndarray) -> np.ndarray:
    """``cos + i·sin`` of float64 angles by the C library (:mod:`math`), element by element."""
    return np.array([complex(math.cos(a), math.sin(a)) for a in angles])


@pytest.mark.parametrize("layout", sorted(_native.ROW_LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("b,n", [(8, 40), (7, 45), (1, 3), (5, 1)])  # whole and partial last blocks
def test_table_rows_round_each_product_once(layout, dtype, b, n):
    rng = np.random.default_rng(0)
    w, start, step = rng.uniform(0, 2, 37), 977.0, 1.5
    out = np.zeros((n, 2 * w.size), dtype=dtype)
    _native.expi_rows(out, layout, w, start, step, b)
    # fine rows i·conj(e^(iθ)) from θ = 0·w, factor conj(e^(i·step·w)); coarse conj(e^(iθ)) from start·w,
    # factor conj(e^(i·step·b·w))
    fine_re, fine_im = _doubled(1j * np.conj(_unit(0.0 * w)), np.conj(_unit(step * w)), b)
    coarse_re, coarse_im = _doubled(np.conj(_unit(start * w)), np.conj(_unit((step * b) * w)), -(-n // b))
    rows = np.arange(n)
    fr, fm = fine_re[rows % b], fine_im[rows % b]
    cr, cm = coarse_re[rows // b], coarse_im[rows // b]
    re = np.subtract(np.multiply(fr, cr), np.multiply(fm, cm)).astype(dtype)
    im = np.add(np.multiply(fr, cm), np.multiply(fm, cr)).astype(dtype)
    expected = {
        "interleaved": np.stack([re, im], -1).reshape(n, 2 * w.size),
        "interleaved_cos_first": np.stack([im, re], -1).reshape(n, 2 * w.size),
        "split": np.concatenate([re, im], -1),
    }[layout]
    np.testing.assert_array_equal(out, expected)


# x and table dtypes: bfloat16 x reads bfloat16 tables as they are, float32 tables as float32
@pytest.mark.parametrize(
    "dtype,table_dtype",
    [
        (torch.float32, torch.float32),
        (torch.float64, torch.float64),
        (torch.bfloat16, torch.bfloat16),
        (torch.bfloat16, torch.float32),
    ],
)
@pytest.mark.parametrize("layout", rotation.LAYOUTS)
@pytest.mark.parametrize("general", [False, True])
@pytest.mark.parametrize("inverse", [False, True])
# 16, 32 and 64 pairs: the counts the loops unroll as constants; 29: the general loop and its remainders
@pytest.mark.parametrize("r", [32, 64, 128, 58])
@pytest.mark.parametrize("scale", [1.0, 2.0**-126])  # results float32 subnormals in places, or none
def test_rotation_rounds_each_product_once(dtype, table_dtype, layout, general, inverse, r, scale):
    torch.manual_seed(1)
    x = (torch.randn(2, 3, 33, max(r, 64), dtype=torch.float64) * scale).to(dtype)
    x[0, 0, 0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])
    cos, sin = _tables(33, r, layout, table_dtype, general)
    out = loop(x, cos, sin, layout, inverse, looked_up(cos, sin, layout))
    assert out is not None
    work = torch.float64 if dtype == torch.float64 else torch.float32
    # torch's eager elementwise multiplies and adds, one rounding each; dims r … d − 1 copied
    rotated = rotation.rotation_reference(x[..., :r].to(work), cos.to(work), sin.to(work), layout, inverse)
    expected = torch.cat([rotated, x[..., r:].to(work)], dim=-1)
    if scale < 1:  # some results are float32 subnormals: what the AVX512-BF16 rows must redo
        assert (expected[1:].abs() < torch.finfo(torch.float32).tiny).any() and (expected[1:] != 0).any()
    torch.testing.assert_close(out, expected.to(dtype), rtol=0, atol=0, equal_nan=True)
