"""Gram matrix, Toeplitz property and Su's long-range decay (SPEC §3; seed su-*)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given
from hypothesis import strategies as st

from posenc import analysis, spectrum, tables


def test_sinusoidal_gram_is_toeplitz_to_1e_10():
    G = analysis.gram(tables.sinusoidal(300, 128))
    assert analysis.toeplitz_deviation(G) < 1e-10
    # and equals Σ_i cos((m-n) w_i) written out (Su)
    w = 10000.0 ** (-2.0 * np.arange(64) / 128)
    m, n = 17, 203
    assert G[m, n] == pytest.approx(sum(math.cos((m - n) * wi) for wi in w), abs=1e-10)


def test_random_table_is_not_toeplitz():
    E = np.random.default_rng(0).standard_normal((50, 16))
    assert analysis.toeplitz_deviation(analysis.gram(E)) > 0.1


@given(st.lists(st.floats(-5, 5), min_size=2, max_size=20))
def test_kernel_by_distance_recovers_a_toeplitz_generator(col):
    row = [col[0]] + [v + 1.0 for v in col[1:]]
    M = scipy.linalg.toeplitz(col, row)  # M[m, n] depends on m - n
    x, k = analysis.kernel_by_distance(M)
    S = len(col)
    np.testing.assert_allclose(k[x >= 0], col, atol=1e-12)  # x = m - n >= 0: first column
    np.testing.assert_allclose(k[x <= 0][::-1], row, atol=1e-12)
    assert analysis.toeplitz_deviation(M) < 1e-12
    assert x.tolist() == list(range(-(S - 1), S))


def test_frequency_kernel_is_the_cosine_sum():
    w = np.array([1.0, 0.3, 0.01])
    x = np.array([0.0, 2.5, -7.0])
    expected = [sum(math.cos(xi * wi) for wi in w) for xi in x]
    np.testing.assert_allclose(analysis.frequency_kernel(w, x), expected, atol=1e-14)


def test_decay_integral_of_linear_theta_is_sinc():
    x = np.array([0.5, 3.0, 40.0, 128.0])
    d = 64
    np.testing.assert_allclose(
        analysis.decay_integral(lambda u: u, x, dim=d), d / 2 * np.sin(x) / x, atol=1e-8
    )


def test_decay_integral_matches_mpmath_for_the_papers_theta():
    for xi in (10.0, 100.0):
        ref = mpmath.quad(lambda u, xi=xi: mpmath.cos(xi * mpmath.power(10000, -u)), [0, 0.25, 0.5, 1])
        got = analysis.decay_integral(analysis.SU_SCHEDULES["10000^-x"], [xi], dim=2)[0]
        assert got == pytest.approx(float(ref), abs=1e-8)


@pytest.mark.parametrize("name", list(analysis.SU_SCHEDULES))
def test_su_sum_and_integral_agree(name):
    d = 512
    x = np.arange(0, 129)
    total, integral = analysis.su_decay(analysis.SU_SCHEDULES[name], x, dim=d)
    assert np.abs(total - integral).max() < 0.01 * d / 2


def test_paper_schedule_decays():
    x = np.array([0.0, 1000.0])
    _, integral = analysis.su_decay(analysis.SU_SCHEDULES["10000^-x"], x, dim=128)
    assert integral[1] < 0.25 * integral[0]


def test_bad_input():
    with pytest.raises(ValueError, match="at least 2 positions"):
        analysis.toeplitz_deviation(np.ones((1, 4)))
    with pytest.raises(ValueError, match="finite"):
        analysis.gram([[1.0, np.inf]])
    with pytest.raises(TypeError, match="theta must be a callable"):
        analysis.decay_integral(3.0, 5, dim=4)


def test_geometric_closed_form_matches_quadrature_and_is_fast():
    import time

    x = np.array([0.0, 0.3, 5.0, 87.0, 1000.0, 2.5e4, -40.0])
    for base in (10000.0, 1000.0, 0.5):  # 0.5: an increasing θ
        theta = analysis.Geometric(base)
        closed = analysis.decay_integral(theta, x, dim=2)
        quad = analysis.decay_integral(lambda u, b=base: b ** (-np.asarray(u)), x, dim=2)  # plain callable
        np.testing.assert_allclose(closed, quad, atol=1e-8)
    start = time.perf_counter()
    analysis.decay_integral(analysis.SU_SCHEDULES["10000^-x"], np.arange(10_000), dim=512)
    assert time.perf_counter() - start < 0.5
    with pytest.raises(ValueError, match="base must differ from 1"):
        analysis.Geometric(1.0)


@pytest.mark.parametrize("d", [7, 9, 33])
def test_odd_dim_integral_is_scaled_by_the_number_of_terms(d):
    # regression: the sum has ceil(d/2) terms but the integral was scaled by d/2
    total, integral = analysis.su_decay(analysis.SU_SCHEDULES["x"], [0.0], dim=d)
    assert total[0] == (d + 1) // 2
    assert integral[0] == pytest.approx(total[0], abs=1e-12)


def test_riemann_limit_is_pi_over_the_largest_neighbouring_step():
    w = spectrum.geometric(512)
    assert analysis.riemann_limit(w) == pytest.approx(math.pi / (1.0 - 10000.0 ** (-2 / 512)), rel=1e-12)
    assert 88 < analysis.riemann_limit(w) < 89
    assert analysis.riemann_limit([1.0]) == math.inf
    # below the limit the sum follows the integral, far beyond it it does not (d = 512)
    x_near, x_far = np.arange(0, 80), np.arange(20_000, 60_000)
    near = analysis.su_decay(analysis.SU_SCHEDULES["10000^-x"], x_near, dim=512)
    far = analysis.su_decay(analysis.SU_SCHEDULES["10000^-x"], x_far, dim=512)
    assert np.abs(near[0] - near[1]).max() < 0.01 * 256
    assert np.abs(far[0] - far[1]).max() > 0.1 * 256
