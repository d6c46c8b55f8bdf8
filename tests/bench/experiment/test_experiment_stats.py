"""Paired tests against independent computations: full sign enumeration and scipy's Wilcoxon."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from scipy import stats as sps

from posenc_bench.experiment.stats import min_attainable_p, sign_flip_p, two_stage_bootstrap_ci, wilcoxon_p


def enumerated_sign_flip_p(d: np.ndarray) -> float:
    """Two-sided exact p: share of the 2^n sign vectors with |mean| ≥ |observed mean|."""
    observed = abs(d.mean())
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    return float(np.mean(np.abs((flips * d).mean(axis=1)) >= observed - 1e-12))


@given(st.lists(st.floats(-1, 1, allow_nan=False).map(lambda v: round(v, 3)), min_size=1, max_size=10))
@example(values=[0.0, 0.0, 0.0, 0.518, 0.515, -0.652, -0.379, 0.0])  # exact ties that rounding split apart
def test_sign_flip_matches_enumeration(values):
    d = np.array(values)
    assert sign_flip_p(d) == pytest.approx(enumerated_sign_flip_p(d), abs=1e-12)


def test_sign_flip_monte_carlo_above_exact_limit():
    d = np.random.default_rng(3).normal(0.05, 0.1, size=17)
    assert sign_flip_p(d) == pytest.approx(enumerated_sign_flip_p(d), abs=0.005)


def test_wilcoxon_matches_scipy_and_minimum_with_five_seeds():
    d = np.array([0.02, 0.031, -0.004, 0.012, 0.05, 0.007])
    assert wilcoxon_p(d) == sps.wilcoxon(d).pvalue
    five_positive = np.array([0.01, 0.02, 0.03, 0.04, 0.05])
    assert min_attainable_p(5) == 0.0625
    assert wilcoxon_p(five_positive) == pytest.approx(0.0625)
    assert sign_flip_p(five_positive) == pytest.approx(0.0625)
    assert np.isnan(wilcoxon_p(np.zeros(4)))


def test_bootstrap_ci_degenerate_and_split_variation():
    assert two_stage_bootstrap_ci([[0.1, 0.1, 0.1]]) == pytest.approx((0.1, 0.1))
    # within-split spread zero, between-split spread not: the CI must still be wide
    lo, hi = two_stage_bootstrap_ci([[0.0] * 5, [0.1] * 5, [0.2] * 5])
    assert -1e-12 <= lo < 0.1 < hi <= 0.2 + 1e-12
    assert hi - lo > 0.08


def test_bootstrap_ci_is_seeded_and_covers_mean():
    groups = [np.random.default_rng(k).normal(0.03, 0.02, 5) for k in range(3)]
    a = two_stage_bootstrap_ci(groups, seed=1)
    assert a == two_stage_bootstrap_ci(groups, seed=1)
    mean = np.concatenate(groups).mean()
    assert a[0] < mean < a[1]


@pytest.mark.parametrize("bad", [[], [np.nan, 1.0], [[1.0, 2.0]]])
def test_bad_differences(bad):
    with pytest.raises(ValueError, match="differences"):
        sign_flip_p(bad)


def test_bootstrap_of_unequal_groups_matches_a_replicate_at_a_time():
    """The block-drawn bootstrap has the distribution of the definition (one replicate at a time)."""
    groups = [np.array([0.0, 1.0]), np.array([2.0, 3.0, 10.0]), np.array([-1.0])]
    rng = np.random.default_rng(5)
    means = []
    for _ in range(20_000):
        picked = rng.integers(3, size=3)
        means.append(
            np.concatenate(
                [groups[k][rng.integers(groups[k].size, size=groups[k].size)] for k in picked]
            ).mean()
        )
    expected = np.quantile(means, [0.025, 0.975])
    assert two_stage_bootstrap_ci(groups, n_boot=20_000) == pytest.approx(tuple(expected), abs=0.15)
