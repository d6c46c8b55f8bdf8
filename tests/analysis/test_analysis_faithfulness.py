"""Algorithm 1 (reconstruction), Fig. 2 and the faithfulness measures of seed ide-* (SPEC §4, §5)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from posenc import analysis, spectrum, tables


def algorithm1_by_fft(f: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Independent Algorithm 1: weighting a_k and b_k by g_k is multiplying the complex F_k by g_k."""
    out = np.fft.irfft(np.fft.rfft(f) * g, n=f.size)
    return out * np.linalg.norm(f) / np.linalg.norm(out)


@given(
    st.integers(2, 40).flatmap(
        lambda d: st.tuples(
            hnp.arrays(np.float64, d, elements=st.floats(-1, 1)),
            hnp.arrays(np.float64, d // 2 + 1, elements=st.floats(0.01, 1)),
        )
    )
)
def test_algorithm1_matches_an_fft_implementation(fg):
    f, g = fg
    if np.linalg.norm(f) < 1e-3:
        return
    np.testing.assert_allclose(analysis.reconstruct(f, g), algorithm1_by_fft(f, g), atol=1e-10)


def test_dft_encoding_reconstructs_the_one_hot_exactly():
    d = 256
    # Theorem 1: the inverse DFT of e(s) is the one-hot, for every s on the lattice
    inverse = tables.dft(d, d) @ analysis.dft_basis(d).T
    assert np.abs(inverse - np.eye(d)).max() < 1e-12
    for s in (5, 40, 75):
        assert (
            np.abs(analysis.reconstruct(analysis.one_hot(s, d), np.ones(d // 2 + 1)) - np.eye(d)[s]).max()
            < 1e-12
        )


def test_eq22_weights_in_algorithm1_leave_a_1_over_d_ripple():
    """Literal Algorithm 1 with eq. 22: a_0, b_0 get half the weight of a_k, b_k, so δ − (1+(−1)^(s−t))/(2d)."""
    d, s = 256, 40
    t = np.arange(d)
    expected = (t == s) - (1 + (-1.0) ** (s - t)) / (2 * d)
    expected /= np.linalg.norm(expected)
    got = analysis.reconstruct(analysis.one_hot(s, d), analysis.dft_distribution(d))
    np.testing.assert_allclose(got, expected, atol=1e-12)
    p = analysis.peak(got)
    assert p.position == s and p.width == pytest.approx(1.0)


def test_fig2_sinusoidal_gives_broad_bumps_at_the_right_place():
    d, S = 256, 80
    g = analysis.frequency_distribution(spectrum.geometric(d), dim=d)
    for s in (5, 40, 75):
        f = analysis.reconstruct(analysis.one_hot(s, d), g)
        p = analysis.peak(f[:S])
        assert p.position == s
        assert 8.0 < p.width < 40.0  # broad: many lattice steps at half height (a spike has width 1)
        assert p.height < 0.5 and p.energy_at_peak < 0.2


def test_peak_of_a_triangle():
    f = np.array([0, 0, 1, 2, 3, 4, 3, 2, 1, 0, 0], dtype=float)
    p = analysis.peak(f)
    assert (p.position, p.height, p.width) == (5, 4.0, 4.0)  # half height 2 reached at 3 and 7
    assert p.peak_to_rest == pytest.approx(4.0 / 2.0)  # outside (3, 7): the 2 at index 3 and 7
    assert p.energy_at_peak == pytest.approx(16 / float(f @ f))


def test_injectivity_and_decoding():
    E = tables.sinusoidal(50, 16)
    brute = min(np.linalg.norm(E[i] - E[j]) for i in range(50) for j in range(i + 1, 50))
    assert analysis.min_pairwise_distance(E) == pytest.approx(brute, rel=1e-12)
    assert analysis.nearest_neighbour_accuracy(E) == 1.0
    aliased = tables.dft(40, 20, alias=True)
    assert analysis.min_pairwise_distance(aliased) < 1e-12
    assert analysis.nearest_neighbour_accuracy(aliased) == 0.5  # rows 20..39 decode to 0..19
    D = tables.dft(64, 64)
    assert analysis.inverse_dft_accuracy(D) == 1.0
    assert analysis.inverse_dft_accuracy(D, noise=0.3) > 0.9
    assert analysis.nearest_neighbour_accuracy(D, noise=100.0) < 0.2


@given(st.integers(-1000, 1000), st.sampled_from([0.0, 0.3]), st.integers(0, 3))
def test_decoding_accuracy_does_not_depend_on_the_table_scale(exponent, noise, seed):
    """Scaling by 2^k is exact, so the decoded positions must be identical; entries near the float64
    limits (2^1000, 2^-1000) once overflowed in the noise's RMS or the distances."""
    E, D = tables.sinusoidal(30, 8), tables.dft(16, 16)
    scale = 2.0**exponent
    assert analysis.nearest_neighbour_accuracy(E * scale, noise=noise, seed=seed) == (
        analysis.nearest_neighbour_accuracy(E, noise=noise, seed=seed)
    )
    assert analysis.inverse_dft_accuracy(D * scale, noise=noise, seed=seed) == (
        analysis.inverse_dft_accuracy(D, noise=noise, seed=seed)
    )


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: analysis.reconstruct(np.ones(8), np.ones(4)), "floor"),
        (lambda: analysis.reconstruct(np.ones(8), -np.ones(5)), "non-negative"),
        (lambda: analysis.reconstruct([np.nan, 1.0], [1.0, 1.0]), "finite"),
        (lambda: analysis.one_hot(8, 8), "0…dim-1"),
        (lambda: analysis.min_pairwise_distance(np.ones((1, 3))), "at least 2 positions"),
        (lambda: analysis.nearest_neighbour_accuracy(np.ones((3, 3)), noise=-1.0), ">= 0"),
        (lambda: analysis.inverse_dft_accuracy(np.ones((9, 8))), "alias"),
        (lambda: analysis.peak(-np.ones(4)), "no positive peak"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
