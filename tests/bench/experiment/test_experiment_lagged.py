"""The order-aware baselines of the classify task: lagged cross-channel products and the synthetic oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from posenc_bench.data import make_splits, make_synthetic
from posenc_bench.experiment.controls import hgb_scorer, window_summary
from posenc_bench.experiment.lagged import busiest_channels, lagged_products, lagged_scorer
from posenc_bench.experiment.oracle import synthetic_oracle


@given(st.integers(1, 3), st.integers(2, 7), st.integers(1, 3), st.data())
def test_lagged_products_equal_a_loop_over_pairs_and_lags(n, w, c, data):
    K = data.draw(st.integers(0, w - 1))
    X = np.asarray(data.draw(st.lists(st.floats(-3, 3), min_size=n * w * c, max_size=n * w * c))).reshape(
        n, w, c
    )
    got = lagged_products(X, list(range(c)), K)
    lags = range(-K, K + 1)
    for row in range(n):
        peaks, means = [], []
        for k in lags:
            for i in range(c):
                for j in range(c):
                    prods = [X[row, t, i] * X[row, t + k, j] for t in range(w) if 0 <= t + k < w]
                    peaks.append(max(prods))
                    means.append(sum(prods) / len(prods))
        np.testing.assert_allclose(got[row], peaks + means, rtol=1e-12, atol=1e-12)


def test_lagged_products_refuse_a_lag_beyond_the_window():
    with pytest.raises(ValueError, match="max_lag must be in"):
        lagged_products(np.zeros((1, 4, 2)), [0, 1], 4)


def test_busiest_channels_are_the_most_variable():
    X = np.zeros((2, 5, 4))
    X[..., 1] = np.arange(5)
    X[..., 3] = 10 * np.arange(5)
    assert busiest_channels(X, 2) == [1, 3]


def _splits():
    return make_splits(make_synthetic(n_series=3, length=1024), window=16, stride=8, seed=0)


def test_the_order_aware_baselines_see_what_an_order_free_one_cannot():
    """The lagged products and the rule beat the order-free summaries on the synthetic test windows."""
    splits = _splits()
    test = splits.test
    lag_scores = lagged_scorer(splits)(test)
    oracle_scores = synthetic_oracle(splits)(test)
    free = hgb_scorer(window_summary, splits)(test)
    assert average_precision_score(test.y, oracle_scores) > average_precision_score(test.y, free)
    assert average_precision_score(test.y, lag_scores) > average_precision_score(test.y, free)


def test_the_oracle_counts_rule_violations():
    """A window with a command and its response peak 5 steps later scores below one with the peak moved."""

    class W:
        def __init__(self, X):
            self.X = X

    nominal = np.zeros((1, 12, 3))
    nominal[0, 2, 1] = 1.0  # command at 2
    nominal[0, 6:9, 2] = (0.5, 1.0, 0.5)  # response from 2 + 4, peak at 7
    moved = nominal.copy()
    moved[0, 6:9, 2] = 0.0
    moved[0, 3:6, 2] = (0.5, 1.0, 0.5)  # timing anomaly: peak at 4
    train = np.concatenate([nominal, moved])
    score = synthetic_oracle(type("S", (), {"train": W(train)})())
    assert score(W(nominal))[0] < 1 <= score(W(moved))[0]
