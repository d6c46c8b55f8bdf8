"""Shift operator T^(k) (SPEC §2; seeds denk-*, notes-*) and the least-squares shift residual."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import analysis, tables


def sinusoidal_by_hand(n: int, d: int, base: float = 10000.0) -> np.ndarray:
    """PE[t, 2i] = sin(t ρ^(-2i/d)), PE[t, 2i+1] = cos(...) written out (Vaswani §3.5)."""
    out = np.empty((n, d))
    for t in range(n):
        for i in range(d // 2):
            w = base ** (-2.0 * i / d)
            out[t, 2 * i], out[t, 2 * i + 1] = math.sin(t * w), math.cos(t * w)
    return out


def dft_by_hand(n: int, d: int) -> np.ndarray:
    """e(s) = (a_0, a_1..a_K, b_1..b_K, b_0) of seed ide-* eqs. 17-21, even d."""
    K = d // 2 - 1
    out = np.empty((n, d))
    for s in range(n):
        out[s, 0] = 1 / math.sqrt(d)
        for k in range(1, K + 1):
            out[s, k] = math.sqrt(2 / d) * math.cos(2 * math.pi * k * s / d)
            out[s, K + k] = math.sqrt(2 / d) * math.sin(2 * math.pi * k * s / d)
        out[s, d - 1] = math.cos(math.pi * s) / math.sqrt(d)
    return out


def test_operator_is_denk_block_diagonal():
    d, k = 8, 3
    expected = np.zeros((d, d))
    for m in range(d // 2):
        w = 10000.0 ** (-2.0 * m / d)
        expected[2 * m : 2 * m + 2, 2 * m : 2 * m + 2] = [
            [math.cos(w * k), math.sin(w * k)],
            [-math.sin(w * k), math.cos(w * k)],
        ]
    np.testing.assert_allclose(analysis.shift_operator(k, dim=d), expected, atol=1e-15)


def test_sinusoidal_shift_residual_below_1e_12():
    E = sinusoidal_by_hand(200, 64)
    for k in (1, 7, 50):
        T = analysis.shift_operator(k, dim=64)
        assert np.abs(E[:-k] @ T.T - E[k:]).max() < 1e-12
        assert analysis.operator_residual(E, T, k) < 1e-12
        assert analysis.linear_shift_residual(E, k) < 1e-12


def test_dft_shift_residual_below_1e_12_with_nyquist_flip():
    d = 32
    E = dft_by_hand(d, d)
    for k in (1, 2, 7):
        T = analysis.dft_shift_operator(k, dim=d)
        assert T[0, 0] == 1.0 and T[d - 1, d - 1] == (-1.0) ** k
        assert analysis.operator_residual(E, T, k) < 1e-12
    # the table of the library agrees with the hand-written eq. 21
    np.testing.assert_allclose(tables.dft(d, d), E, atol=1e-15)


def test_sine_only_table_has_no_linear_shift():
    E = sinusoidal_by_hand(200, 64)[:, 0::2]  # sines only
    assert analysis.linear_shift_residual(E, 7) == pytest.approx(0.44, abs=0.01)  # SPEC §2


@given(
    k=st.integers(-300, 300),
    half=st.integers(1, 24),
    base=st.floats(2.0, 1e6),
    layout=st.sampled_from(["interleaved", "interleaved_cos_first", "split"]),
)
def test_operator_shifts_any_layout_and_is_orthogonal(k, half, base, layout):
    d = 2 * half
    E = tables.sinusoidal(np.arange(-20, 40), d, base=base, layout=layout)
    T = analysis.shift_operator(k, dim=d, base=base, layout=layout)
    target = tables.sinusoidal(np.arange(-20, 40) + k, d, base=base, layout=layout)
    assert np.abs(E @ T.T - target).max() < 1e-9
    np.testing.assert_allclose(T @ T.T, np.eye(d), atol=1e-12)


@given(a=st.integers(0, 64), b=st.integers(0, 64))
def test_dft_operator_composes_and_has_period_d(a, b):
    d = 16
    Ta, Tb = analysis.dft_shift_operator(a, dim=d), analysis.dft_shift_operator(b, dim=d)
    np.testing.assert_allclose(Ta @ Tb, analysis.dft_shift_operator(a + b, dim=d), atol=1e-12)
    np.testing.assert_allclose(analysis.dft_shift_operator(d, dim=d), np.eye(d), atol=1e-12)


def test_odd_dft_has_no_nyquist_term():
    E = tables.dft(7, 7)
    assert analysis.operator_residual(E, analysis.dft_shift_operator(2, dim=7), 2) < 1e-12


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: analysis.linear_shift_residual([[0.0, np.nan], [1.0, 2.0]], 1), "finite"),
        (lambda: analysis.linear_shift_residual(np.ones((1, 3)), 1), "at least 2 positions"),
        (lambda: analysis.linear_shift_residual(np.ones((10, 2)), 10), r"k must lie in 1…9"),
        (lambda: analysis.linear_shift_residual(np.ones((10, 2)), 0), r"k must lie in 1…9"),
        (lambda: analysis.linear_shift_residual(np.ones((10, 4)), 7), "more row pairs"),
        (lambda: analysis.linear_shift_residual(np.ones(10), 1), "2-D"),
        (lambda: analysis.shift_operator(1, dim=7), "dim must be even"),
        (lambda: analysis.shift_operator(np.inf, dim=8), "finite real"),
        (lambda: analysis.operator_residual(np.ones((5, 4)), np.eye(3), 1), r"\[d, d\]"),
    ],
)
def test_bad_input_is_a_clear_error(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_dft_operator_wants_integer_k():
    with pytest.raises(TypeError, match="k must be an int"):
        analysis.dft_shift_operator(1.5, dim=8)
    with pytest.raises(TypeError, match="k must be an int offset"):
        analysis.linear_shift_residual(np.ones((10, 2)), 1.0)
