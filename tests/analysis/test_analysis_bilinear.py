"""Su's general bilinear form p_mᵀ diag(h) p_n: relative and absolute parts (Su, 2021)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from posenc import analysis, spectrum, tables


@settings(max_examples=40, deadline=None)
@given(
    dim=st.integers(1, 24),
    layout=st.sampled_from(spectrum.LAYOUTS),
    seed=st.integers(0, 10_000),
    m=st.integers(-300, 300),
    n=st.integers(-300, 300),
)
def test_parts_sum_to_the_direct_bilinear_form(dim, layout, seed, m, n):
    h = np.random.default_rng(seed).standard_normal(dim)
    P = tables.sinusoidal(np.array([m, n], dtype=float), dim, layout=layout)
    direct = float(P[0] @ np.diag(h) @ P[1])
    rel, ab = analysis.bilinear_parts(h, m, n, dim=dim, layout=layout)
    assert float(rel + ab) == pytest.approx(direct, abs=1e-10 * (1 + np.abs(h).sum()))


def test_relative_part_depends_on_m_minus_n_only():
    h = np.random.default_rng(0).standard_normal(32)
    m = np.arange(50)
    rel, ab = analysis.bilinear_parts(h, m[:, None], m[None, :], dim=32)
    assert rel.shape == (50, 50)
    assert analysis.toeplitz_deviation(rel) < 1e-12
    assert analysis.toeplitz_deviation(ab) > 0.1  # the absolute part is not (it depends on m + n)


def test_sin_first_coefficient_is_half_h_odd_minus_h_even_and_cos_first_the_opposite():
    # one pair (d = 2), θ = 1: written out by hand
    h = np.array([3.0, 5.0])
    m, n = 4.0, 1.5
    _, ab_sin_first = analysis.bilinear_parts(h, m, n, dim=2, layout="interleaved")
    _, ab_cos_first = analysis.bilinear_parts(h, m, n, dim=2, layout="interleaved_cos_first")
    assert float(ab_sin_first) == pytest.approx(0.5 * (5.0 - 3.0) * math.cos(m + n), abs=1e-14)
    assert float(ab_cos_first) == pytest.approx(0.5 * (3.0 - 5.0) * math.cos(m + n), abs=1e-14)  # Su's form


def test_equal_pair_weights_leave_no_absolute_part():
    h = np.repeat(np.linspace(0.5, 2.0, 8), 2)  # H_2i = H_2i+1
    rel, ab = analysis.bilinear_parts(h, np.arange(20), 3, dim=16)
    np.testing.assert_allclose(ab, 0.0, atol=1e-14)
    w = spectrum.geometric(16)
    expected = [sum(h[2 * i] * math.cos((t - 3) * w[i]) for i in range(8)) for t in range(20)]
    np.testing.assert_allclose(rel, expected, atol=1e-12)


def test_trained_frequencies_are_used():
    w = np.array([0.7, 0.02])
    h = np.array([1.0, 2.0, 3.0, 4.0])
    rel, ab = analysis.bilinear_parts(h, 5, 2, dim=4, frequencies=w)
    P = tables.sinusoidal(np.array([5.0, 2.0]), 4, frequencies=w)
    assert float(rel + ab) == pytest.approx(float(P[0] @ (h * P[1])), abs=1e-13)


def test_weighted_integral_is_the_quadrature_of_the_interpolated_weights():
    d = 64
    h = np.random.default_rng(3).standard_normal(d)
    rel_coef, _ = analysis.pair_coefficients(h, dim=d)
    nodes = 2.0 * np.arange(d // 2) / d
    x = np.array([0.0, 3.0, 17.5, 200.0])
    got = analysis.weighted_decay_integral(h, x, dim=d)
    for xi, g in zip(x, got):
        ref, _ = integrate.quad(
            lambda u, xi=xi: np.interp(u, nodes, rel_coef) * math.cos(xi * 10000.0 ** (-u)),
            0.0,
            1.0,
            limit=500,
            points=list(nodes[1:]),
        )
        assert g == pytest.approx(d / 2 * ref, abs=1e-7)


def test_weighted_integral_follows_the_relative_part_for_smooth_weights():
    d = 512
    h = np.repeat(1.0 + 0.5 * np.cos(np.linspace(0, 3, d // 2)), 2)  # smooth in i
    x = np.arange(0, 41)
    rel, _ = analysis.bilinear_parts(h, x, 0, dim=d)
    integral = analysis.weighted_decay_integral(h, x, dim=d)
    assert np.abs(rel - integral).max() < 0.02 * d / 2


def test_bad_input():
    with pytest.raises(ValueError, match="h must hold the d = 8 diagonal entries"):
        analysis.bilinear_parts(np.ones(7), 0, 1, dim=8)
    with pytest.raises(ValueError, match="m must hold finite positions"):
        analysis.bilinear_parts(np.ones(8), np.nan, 1, dim=8)
    with pytest.raises(ValueError, match="m and n must broadcast"):
        analysis.bilinear_parts(np.ones(8), np.arange(3), np.arange(4), dim=8)
    with pytest.raises(ValueError, match="layout"):
        analysis.bilinear_parts(np.ones(8), 0, 1, dim=8, layout="sideways")
