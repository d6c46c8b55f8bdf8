"""NumPy tables (SPEC §1, §2, §4) against the formulas written out here in float64 or mpmath."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from peers import import_peer

import posenc
from posenc import spectrum, tables


def sinusoidal_formula(positions, dim, base=10000.0, layout="interleaved"):
    """SPEC §1 entry by entry: pair i has sin(t·w_i) and cos(t·w_i), w_i = base^(−2i/d), placed per layout."""
    n_sin, n_cos = (dim + 1) // 2, dim // 2
    out = np.empty((len(positions), dim))
    for r, t in enumerate(positions):
        for i in range(n_sin):
            w = base ** (-2.0 * i / dim)
            if layout == "interleaved":
                sin_col, cos_col = 2 * i, 2 * i + 1
            elif layout == "interleaved_cos_first":
                sin_col, cos_col = (2 * i + 1, 2 * i) if i < n_cos else (dim - 1, None)
            else:  # split
                sin_col, cos_col = i, n_sin + i
            out[r, sin_col] = math.sin(t * w)
            if i < n_cos:
                out[r, cos_col] = math.cos(t * w)
    return out


def dft_basis(dim):
    """SPEC §4's basis φ_l(t) as a matrix [l, t] (eq. 12), l in the order of e(s)."""
    n_k = (dim - 1) // 2
    rows = [[1 / math.sqrt(dim)] * dim]
    rows += [
        [math.sqrt(2 / dim) * math.cos(2 * math.pi * k * t / dim) for t in range(dim)]
        for k in range(1, n_k + 1)
    ]
    rows += [
        [math.sqrt(2 / dim) * math.sin(2 * math.pi * k * t / dim) for t in range(dim)]
        for k in range(1, n_k + 1)
    ]
    if dim % 2 == 0:
        rows.append([(-1) ** t / math.sqrt(dim) for t in range(dim)])
    return np.array(rows)


def dft_formula(positions, dim):
    """e(s) = (a_0, a_1 … a_K, b_1 … b_K, b_0) of SPEC §4, entry by entry."""
    n_k = (dim - 1) // 2
    out = []
    for s in positions:
        row = [1 / math.sqrt(dim)]
        row += [math.sqrt(2 / dim) * math.cos(2 * math.pi * k * s / dim) for k in range(1, n_k + 1)]
        row += [math.sqrt(2 / dim) * math.sin(2 * math.pi * k * s / dim) for k in range(1, n_k + 1)]
        if dim % 2 == 0:
            row.append(math.cos(math.pi * s) / math.sqrt(dim))
        out.append(row)
    return np.array(out)


# -- sinusoidal ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [1, 2, 7, 16, 33])
@pytest.mark.parametrize("layout", spectrum.LAYOUTS)
def test_sinusoidal_equals_the_formula(dim, layout):
    positions = [0, 1, 2.5, -3, 17, 99]
    got = posenc.sinusoidal(positions, dim, layout=layout)
    assert got.shape == (6, dim) and got.dtype == np.float64
    np.testing.assert_allclose(got, sinusoidal_formula(positions, dim, layout=layout), rtol=0, atol=1e-13)


def test_sinusoidal_int_positions_and_base():
    np.testing.assert_allclose(
        posenc.sinusoidal(80, 256, base=500.0), sinusoidal_formula(range(80), 256, 500.0), rtol=0, atol=1e-13
    )


@pytest.mark.parametrize("dim", [6, 7])
@pytest.mark.parametrize("layout", ["interleaved_cos_first", "split"])
def test_layouts_are_column_permutations(dim, layout):
    base = posenc.sinusoidal(50, dim)
    other = posenc.sinusoidal(50, dim, layout=layout)
    # each column of `other` is exactly one column of `base`, and every column is used once
    match = [int(np.flatnonzero((base == other[:, [c]]).all(axis=0))[0]) for c in range(dim)]
    assert sorted(match) == list(range(dim))
    np.testing.assert_array_equal(base[:, match], other)
    np.testing.assert_array_equal(base[:, spectrum.layout_permutation(dim, "interleaved", layout)], other)


def test_sinusoidal_custom_frequencies():
    w = spectrum.tensor2tensor(8)
    got = posenc.sinusoidal([0, 3, 10], 8, layout="split", frequencies=w)
    expected = [[math.sin(t * wi) for wi in w] + [math.cos(t * wi) for wi in w] for t in (0, 3, 10)]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="base"):
        posenc.sinusoidal(3, 8, base=100.0, frequencies=w)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_sinusoidal_dtype_is_the_float64_table_rounded(dtype):
    got = posenc.sinusoidal(100, 12, dtype=dtype)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, posenc.sinusoidal(100, 12).astype(dtype))


def shift_operator(frequencies, k):
    """SPEC §2's T^(k): one 2×2 block Φ per (sin, cos) pair (interleaved layout), built here."""
    blocks = [
        np.array([[math.cos(w * k), math.sin(w * k)], [-math.sin(w * k), math.cos(w * k)]])
        for w in frequencies
    ]
    t = np.zeros((2 * len(blocks), 2 * len(blocks)))
    for m, block in enumerate(blocks):
        t[2 * m : 2 * m + 2, 2 * m : 2 * m + 2] = block
    return t


@given(t=st.integers(0, 1000), k=st.integers(-1000, 1000), half=st.integers(1, 64))
def test_shift_operator_moves_sinusoidal_rows(t, k, half):
    dim = 2 * half
    w = [10000.0 ** (-2.0 * i / dim) for i in range(half)]
    rows = posenc.sinusoidal([t, t + k], dim)
    np.testing.assert_allclose(shift_operator(w, k) @ rows[0], rows[1], rtol=0, atol=1e-12)


@given(data=st.data(), dim=st.integers(2, 96))
def test_shift_operator_moves_dft_rows(data, dim):
    t = data.draw(st.integers(0, dim - 1))
    k = data.draw(st.integers(0, dim - 1 - t))
    n_k = (dim - 1) // 2
    # (a_k, b_k) = (cos, sin) of ω_k s: the block is Φ with the pair order swapped
    shift = np.eye(dim)
    for j in range(1, n_k + 1):
        c, s = math.cos(2 * math.pi * j * k / dim), math.sin(2 * math.pi * j * k / dim)
        a, b = j, n_k + j
        shift[a, a], shift[a, b], shift[b, a], shift[b, b] = c, -s, s, c
    if dim % 2 == 0:
        shift[dim - 1, dim - 1] = (-1) ** k  # Nyquist term flips sign with odd k; a_0 stays fixed
    rows = posenc.dft([t, t + k], dim)
    np.testing.assert_allclose(shift @ rows[0], rows[1], rtol=0, atol=1e-12)


def test_sines_alone_admit_no_linear_shift():
    # SPEC §2: least-squares map between sine-only rows leaves a large residual (≈0.44 relative)
    dim, k = 64, 7
    w = spectrum.geometric(2 * dim)
    sines = np.sin(np.multiply.outer(np.arange(200 + k, dtype=float), w))
    x, y = sines[:200], sines[k:]
    m, *_ = np.linalg.lstsq(x, y, rcond=None)
    assert np.linalg.norm(x @ m - y) / np.linalg.norm(y) > 0.1


# -- DFT ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [1, 2, 3, 8, 9, 64])
def test_dft_equals_the_formula(dim):
    positions = list(range(dim))
    got = posenc.dft(dim, dim)
    np.testing.assert_allclose(got, dft_formula(positions, dim), rtol=0, atol=1e-15)


@given(dim=st.integers(1, 80))
def test_dft_basis_is_orthonormal_and_inverts_the_encoding(dim):
    phi = dft_basis(dim)
    np.testing.assert_allclose(phi @ phi.T, np.eye(dim), rtol=0, atol=1e-12)  # eq. 12
    e = posenc.dft(dim, dim)  # row s = e(s)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, rtol=0, atol=1e-13)
    # Theorem 1: the inverse DFT Σ_l e_l(s) φ_l(t) is the one-hot at s, for every s < d
    np.testing.assert_allclose(e @ phi, np.eye(dim), rtol=0, atol=1e-12)


def test_dft_refuses_positions_off_the_lattice():
    with pytest.raises(ValueError, match=r"positions must lie in 0…dim-1 = 0…7.*got 8"):
        posenc.dft(9, 8)
    with pytest.raises(ValueError, match="positions.*-1"):
        posenc.dft([-1], 8)
    with pytest.raises(ValueError, match="positions must be integers.*2.5"):
        posenc.dft([2.5], 8)


def test_dft_alias_wraps_positions():
    np.testing.assert_array_equal(posenc.dft([11, -1], 8, alias=True), posenc.dft([3, 7], 8))


# -- precision ----------------------------------------------------------------------------------


def exact_row(t, frequencies, layout_dim):
    """mpmath reference (40 digits) of the interleaved sinusoidal row at integer t, for float64 frequencies."""
    mpmath.mp.dps = 40
    row = []
    for w in frequencies:
        a = mpmath.mpf(t) * mpmath.mpf(float(w))
        row += [float(mpmath.sin(a)), float(mpmath.cos(a))]
    return np.array(row[:layout_dim])


@pytest.mark.parametrize("t", [10**6, 10**7, 10**7 + 12345])
def test_float32_table_is_exact_at_large_positions(t):
    dim = 64
    got = posenc.sinusoidal([t], dim, dtype=np.float32)[0].astype(np.float64)
    ref = exact_row(t, spectrum.geometric(dim), dim)
    assert np.abs(got - ref).max() < 1e-7  # correctly rounded float32: ≤ 3e-8 (the issue asks < 1e-6)


def sinusoidal_float64(positions, dim, layout="interleaved"):
    """The table with every angle t·w formed directly in float64 (vectorised formula, independent of posenc)."""
    half = (dim + 1) // 2
    w = 10000.0 ** (-2.0 * np.arange(half) / dim)
    a = np.multiply.outer(np.asarray(positions, dtype=np.float64), w)
    out = np.empty((a.shape[0], dim))
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = np.sin(a), np.cos(a[:, : dim // 2])
    elif layout == "split":
        out[:, :half], out[:, half:] = np.sin(a), np.cos(a[:, : dim // 2])
    else:  # interleaved_cos_first
        out[:, 0 : 2 * (dim // 2) : 2], out[:, 1::2][:, : dim // 2] = (
            np.cos(a[:, : dim // 2]),
            np.sin(a[:, : dim // 2]),
        )
        if dim % 2:
            out[:, dim - 1] = np.sin(a[:, -1])
    return out


@pytest.mark.parametrize("layout", spectrum.LAYOUTS)
@pytest.mark.parametrize(
    ("positions", "dim"),
    [(2048, 512), (1000, 33), (9, 4), (np.arange(-700, 300), 66), (np.arange(4096, 7000), 17)],
)
def test_ranges_of_positions_match_direct_float64_angles(positions, dim, layout):
    # integer ranges are built by the angle addition formula; they must agree with direct float64 angles
    # to within the float64 rounding of the angle t·w itself (|t·w| < 7000 → ulp ≤ 1e-12)
    t = np.arange(positions) if isinstance(positions, int) else positions
    got = posenc.sinusoidal(positions, dim, layout=layout)
    np.testing.assert_allclose(got, sinusoidal_float64(t, dim, layout), rtol=0, atol=2e-12)
    shuffled = np.random.default_rng(0).permutation(t)  # not a range: every angle formed directly
    order = np.argsort(shuffled)
    np.testing.assert_allclose(
        posenc.sinusoidal(shuffled, dim, layout=layout)[order], got, rtol=0, atol=2e-12
    )


@pytest.mark.parametrize("dim", [512, 63])
def test_float32_range_is_correctly_rounded_up_to_ten_million(dim):
    # 4096 positions just below 1e7, built by the angle addition formula, against mpmath on a sample of
    # rows (every column): ≤ 3.1e-8 (half a float32 ulp is 2.98e-8); and on all rows against direct
    # float64 angles, which are themselves off by up to half an ulp of 1e7 (9.3e-10)
    t = np.arange(10**7 - 4096, 10**7)
    got = posenc.sinusoidal(t, dim, dtype=np.float32)
    w = spectrum.geometric(dim)
    ref64 = sinusoidal_float64(t, dim)
    assert np.abs(got - ref64).max() <= 3.1e-8 + 9.3e-10
    for r in range(0, t.size, 257):
        exact = exact_row(int(t[r]), w, dim)
        assert np.abs(got[r].astype(np.float64) - exact).max() <= 3.1e-8


def test_float32_table_needs_no_full_size_float64_temporaries():
    import tracemalloc

    for shape in [(2048, 512), (3000, 130)]:
        tracemalloc.start()
        try:
            out = posenc.sinusoidal(*shape, dtype=np.float32)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= 1.3 * out.nbytes, (shape, peak / out.nbytes)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [posenc.sinusoidal, posenc.dft])
def test_bad_dim(fn):
    with pytest.raises(TypeError, match="dim.*4.0"):
        fn(4, 4.0)
    with pytest.raises(ValueError, match="dim.*0"):
        fn(4, 0)


@pytest.mark.parametrize("fn", [posenc.sinusoidal, posenc.dft])
def test_bad_positions(fn):
    with pytest.raises(ValueError, match=r"positions must be 1-D.*\(2, 2\)"):
        fn([[0, 1], [2, 3]], 8)
    with pytest.raises(ValueError, match="positions must be finite.*nan"):
        fn([0, float("nan")], 8)
    with pytest.raises(ValueError, match="positions must be finite.*inf"):
        fn([float("inf")], 8)
    with pytest.raises(TypeError, match="positions"):
        fn(2.0, 8)
    with pytest.raises(ValueError, match="positions.*empty"):
        fn([], 8)


@pytest.mark.parametrize(
    "fn", [posenc.sinusoidal, lambda t, d: posenc.dft(t, d, alias=True), tables.tensor2tensor]
)
@pytest.mark.parametrize(
    "positions",
    [
        [2**53],
        [0, 2**53 + 1],
        np.array([5, 2**60], dtype=np.int64),
        np.array([2**64 - 1], dtype=np.uint64),
        [-(2.0**53)],
        [3.0, 1e300],
    ],
)
def test_tables_refuse_positions_float64_cannot_tell_apart(fn, positions):
    """At 2^53 and beyond float64 rounds neighbouring integers together (rows 2^53 and 2^53+1 were
    identical): refused as the modules refuse them, naming the value as given."""
    with pytest.raises(ValueError, match=r"positions must be < 2\^53 in magnitude.*at index"):
        fn(positions, 8)


def test_tables_accept_the_largest_exact_position():
    t = 2**53 - 1
    row = posenc.sinusoidal([t], 2, frequencies=[1.0])
    exact = mpmath.mpf(t)
    assert row[0, 0] == pytest.approx(float(mpmath.sin(exact)), abs=1e-15)


@pytest.mark.parametrize(
    ("positions", "match"),
    [
        (np.array([1 + 2j, 3]), "positions must hold real numbers, got complex128"),
        (np.array(["1", "2"]), "positions must hold real numbers"),
        (np.array([True, False]), "positions must hold numbers, got booleans"),
        ([10**400], "positions must be finite, got an integer too large"),
    ],
)
def test_tables_refuse_positions_a_cast_would_change(positions, match):
    """Complex (imaginary part dropped), text (parsed), booleans and huge Python ints (OverflowError)."""
    with pytest.raises((TypeError, ValueError), match=match):
        posenc.sinusoidal(positions, 4)


def test_bad_layout_and_dtype():
    with pytest.raises(ValueError, match="layout.*'split'.*got 'cos_sin'"):
        posenc.sinusoidal(4, 8, layout="cos_sin")
    with pytest.raises(TypeError, match="dtype"):
        posenc.sinusoidal(4, 8, dtype=np.int32)


def timing_signal_1d(
    length: int, channels: int, min_timescale: float = 1.0, max_timescale: float = 1e4
) -> np.ndarray:
    """tensor2tensor's ``get_timing_signal_1d`` transcribed to NumPy float64 (tensorflow is not a test peer)."""
    position = np.arange(length, dtype=np.float64)
    num_timescales = channels // 2
    log_timescale_increment = math.log(float(max_timescale) / float(min_timescale)) / max(
        num_timescales - 1, 1
    )
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment
    )
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


@pytest.mark.parametrize("dim", [1, 2, 7, 8, 33])
@pytest.mark.parametrize(("lo", "hi"), [(1.0, 1e4), (2.0, 500.0)])
def test_tensor2tensor_table_matches_its_code_with_a_zero_column_for_odd_d(dim, lo, hi):
    got = tables.tensor2tensor(50, dim, min_timescale=lo, max_timescale=hi)
    np.testing.assert_allclose(got, timing_signal_1d(50, dim, lo, hi), rtol=0, atol=1e-12)
    if dim % 2:
        assert np.all(got[:, -1] == 0.0)
        # the default table keeps ⌈d/2⌉ sines instead: a different table, by design
        assert not np.allclose(
            tables.sinusoidal(50, dim, layout="split", frequencies=spectrum.tensor2tensor(dim)), got
        )


@pytest.mark.parametrize("dim", [8, 9])
def test_tensor2tensor_table_matches_fairseq_m2m100(dim):
    m2m = import_peer("transformers.models.m2m_100.modeling_m2m_100", "fairseq's table via M2M100")
    theirs = m2m.M2M100SinusoidalPositionalEmbedding.get_embedding(40, dim).double().numpy()
    np.testing.assert_allclose(tables.tensor2tensor(40, dim), theirs, rtol=0, atol=2e-6)  # float32 peer
