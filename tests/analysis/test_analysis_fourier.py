"""Eq. 15, eq. 16, eq. 22 and the low-pass count of seed ide-* §3 (SPEC §5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc import analysis, spectrum


def test_eq15_written_out():
    d = 32
    w = [10000.0 ** (-l / d) for l in range(0, d, 2)]
    sigma = 4 * 2 * math.pi / d
    raw = [
        sum(math.exp(-((2 * math.pi * k / d - wl) ** 2) / (2 * sigma**2)) for wl in w)
        for k in range(d // 2 + 1)
    ]
    expected = np.array(raw) / sum(raw)
    np.testing.assert_allclose(
        analysis.frequency_distribution(spectrum.geometric(d), dim=d), expected, rtol=1e-12
    )


def test_eq22_is_flat_except_the_end_points():
    d = 256
    expected = np.full(d // 2 + 1, 2 / d)
    expected[0] = expected[-1] = 1 / d
    np.testing.assert_allclose(analysis.dft_distribution(d), expected, atol=1e-15)
    odd = analysis.dft_distribution(9)  # no Nyquist term: 1/d then 2/d
    np.testing.assert_allclose(odd, [1 / 9] + [2 / 9] * 4, atol=1e-15)


@pytest.mark.parametrize("d, crossing, count", [(256, 103, 76), (512, 245, 133)])
def test_low_pass_count_and_crossing_index(d, crossing, count):
    assert round(analysis.crossing_index(d)) == crossing
    assert analysis.crossing_index(d) == pytest.approx(d / 4 * math.log10(d / (2 * math.pi)), rel=1e-12)
    # count by hand: column indices l = 0, 2, …, d-2 with 10000^(-l/d) < 2π/d
    by_hand = sum(1 for l in range(0, d, 2) if 10000.0 ** (-l / d) < 2 * math.pi / d)
    assert by_hand == count  # SPEC §5: 76 of 128 and 133 of 256
    assert analysis.low_pass_count(spectrum.geometric(d), dim=d) == count
    assert count == sum(1 for l in range(0, d, 2) if l > analysis.crossing_index(d))


@given(st.lists(st.floats(0.0, 3.2), min_size=1, max_size=30), st.integers(4, 200), st.floats(1e-3, 10.0))
def test_distribution_is_a_probability_vector(w, d, sigma):
    g = analysis.frequency_distribution(w, dim=d, bandwidth=sigma)
    assert g.shape == (d // 2 + 1,) and (g >= 0).all() and g.sum() == pytest.approx(1.0)


def test_table_spectrum_finds_a_pure_tone():
    d, k = 32, 5
    rows = np.cos(2 * math.pi * k * np.arange(d) / d + np.arange(10)[:, None])  # 10 rows, phase varies
    freq, power = analysis.table_spectrum(rows)
    assert freq[k] == pytest.approx(2 * math.pi * k / d) and power[k] == pytest.approx(1.0)
    # along positions: a sinusoidal column at a bin frequency lands in that bin
    S = 64
    col = np.sin(2 * math.pi * 3 * np.arange(S) / S)[:, None]
    _, power = analysis.table_spectrum(col, axis="positions")
    assert power[3] == pytest.approx(1.0)


def test_bad_input():
    with pytest.raises(ValueError, match="bandwidth must be a finite number > 0"):
        analysis.frequency_distribution([0.1], dim=8, bandwidth=0.0)
    with pytest.raises(ValueError, match="bandwidth"):
        analysis.frequency_distribution([0.1], dim=8, bandwidth=-1.0)
    with pytest.raises(ValueError, match="finite"):
        analysis.frequency_distribution([np.nan], dim=8)
    with pytest.raises(ValueError, match="axis must be one of"):
        analysis.table_spectrum(np.ones((3, 3)), axis="rows")
    with pytest.raises(ValueError, match="at least 2 positions"):
        analysis.table_spectrum(np.ones((1, 3)), axis="positions")


def test_tiny_bandwidth_is_refused_not_nan():
    # regression: σ = 1e-300 made σ² underflow to 0 and every weight NaN
    with pytest.raises(ValueError, match="bandwidth=1e-300 is too narrow"):
        analysis.frequency_distribution([0.1, 0.2], dim=8, bandwidth=1e-300)
    # a frequency exactly on a bin still has a defined, one-hot answer at any σ
    g = analysis.frequency_distribution([2 * math.pi / 8], dim=8, bandwidth=1e-300)
    assert g.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0]


def test_crossing_index_accepts_base_1_like_the_tables():
    # regression: base=1 was accepted by the tables and the scorecard but refused here
    assert analysis.crossing_index(64, base=1.0) == math.inf  # w_l = 1 ≥ 2π/64: none below
    assert analysis.low_pass_count(np.ones(32), dim=64) == 0
    assert analysis.crossing_index(4, base=1.0) == -math.inf  # w_l = 1 < 2π/4: all below
    assert analysis.low_pass_count(np.ones(2), dim=4) == 2
    # and the limit it stands for: ρ → 1⁺
    assert analysis.crossing_index(64, base=1.0 + 1e-12) > 1e12
