"""Time-shuffle control and the order-free baseline."""

from __future__ import annotations

import numpy as np
import pytest

from posenc_bench.data.containers import Splits, WindowSet
from posenc_bench.experiment.baselines import scorer_metrics
from posenc_bench.experiment.controls import hgb_scorer, shuffle_time, window_summary


def test_shuffle_time_permutes_each_window_independently_and_is_seeded():
    X = np.arange(4 * 6 * 2, dtype=np.float32).reshape(4, 6, 2)
    S = shuffle_time(X, seed=0)
    assert S.shape == X.shape
    for w in range(4):  # same rows, reordered; a row (time step) keeps its features together
        assert sorted(map(tuple, S[w])) == sorted(map(tuple, X[w]))
    assert not np.array_equal(S, X)
    orders = {tuple(S[w, :, 0] - X[w, 0, 0]) for w in range(4)}
    assert len(orders) > 1  # not one permutation shared by all windows
    np.testing.assert_array_equal(S, shuffle_time(X, seed=0))
    assert not np.array_equal(S, shuffle_time(X, seed=1))


def test_window_summary_hand_computed():
    X = np.array([[[1.0, 10.0], [3.0, 10.0], [2.0, 4.0]]])  # one window, 3 steps, 2 features
    expected = [2.0, 8.0, np.std([1, 3, 2]), np.std([10, 10, 4]), 1.0, 4.0, 3.0, 10.0, 1.0, -6.0]
    np.testing.assert_allclose(window_summary(X)[0], expected)


def _windows(rng: np.random.Generator, n: int) -> WindowSet:
    X = rng.normal(size=(n, 8, 2)).astype(np.float32)
    y = (rng.random(n) < 0.3).astype(np.int64)
    y[:2] = 1
    X[y == 1, 3, 0] += 20.0  # a spike: visible to the max statistic, order-free
    zeros = np.zeros(n, dtype=np.int64)
    return WindowSet(X, y, zeros, zeros, np.where(y == 1, 0, -1).astype(np.int64))


def test_order_free_baseline_finds_an_order_free_anomaly():
    rng = np.random.default_rng(0)
    splits = Splits(_windows(rng, 200), _windows(rng, 80), _windows(rng, 80), summary={})
    result = scorer_metrics(hgb_scorer(window_summary, splits), splits)[0]
    assert result["f1"] == pytest.approx(1.0)
    assert result["auprc"] == pytest.approx(1.0)
    assert result == scorer_metrics(hgb_scorer(window_summary, splits), splits)[0]  # deterministic
