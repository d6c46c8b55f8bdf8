"""Positional probes: the label depends only on the order / lag of two pulses."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.data import ProbeSuite, load_dataset, make_probe, max_distance


@given(st.sampled_from(["order", "lag"]), st.integers(3, 40), st.data())
def test_label_is_the_order_or_lag_of_the_pulses(task, window, data):
    k = data.draw(st.integers(1, window - 1 if task == "order" else window - 2))
    w = make_probe(task, k, window=window, n=16, seed=data.draw(st.integers(0, 99)))
    pos_a, pos_b = w.X[:, :, 0].argmax(axis=1), w.X[:, :, 1].argmax(axis=1)
    lag = pos_b - pos_a
    if task == "order":
        assert (lag[w.y == 1] == k).all() and (lag[w.y == 0] == -k).all()
    else:
        assert (lag[w.y == 1] == k).all() and (lag[w.y == 0] == k + 1).all()
    assert w.y.sum() == 8 and w.X.shape == (16, window, 2) and w.X.dtype == np.float32


@pytest.mark.parametrize("task", ["order", "lag"])
def test_classes_have_identical_multisets_pair_by_pair(task):
    w = make_probe(task, 5, window=32, n=64, seed=1)
    for pair in range(32):
        pos, neg = w.X[(w.series == pair) & (w.y == 1)][0], w.X[(w.series == pair) & (w.y == 0)][0]
        assert not np.array_equal(pos, neg)  # the order differs …
        # … but shuffling the time axis makes them indistinguishable: same per-feature multisets
        np.testing.assert_array_equal(np.sort(pos, axis=0), np.sort(neg, axis=0))
        # and the same multiset of whole rows
        assert sorted(map(tuple, pos)) == sorted(map(tuple, neg))
    # so every order-free statistic is equal between the classes (here: means of sorted values)
    sorted_pos = np.sort(w.X[w.y == 1], axis=1)[np.argsort(w.series[w.y == 1])]
    sorted_neg = np.sort(w.X[w.y == 0], axis=1)[np.argsort(w.series[w.y == 0])]
    np.testing.assert_array_equal(sorted_pos, sorted_neg)


def test_positions_spread_over_the_window():
    w = make_probe("order", 3, window=16, n=2000, seed=0)
    first = np.minimum(w.X[:, :, 0].argmax(axis=1), w.X[:, :, 1].argmax(axis=1))
    assert set(first.tolist()) == set(range(0, 16 - 3))


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        (("order", 16), {"window": 16}, ValueError, "k=16 does not fit a window of 16 steps .* k <= 15"),
        (("lag", 15), {"window": 16}, ValueError, r"k \+ 1 <= window - 1, so k <= 14"),
        (("order", 0), {}, ValueError, "k must be a positive int"),
        (("order", 2), {"n": 7}, ValueError, "n must be even"),
        (("shape", 2), {}, ValueError, "task must be one of 'order', 'lag'"),
        (("order", 1), {"window": 2}, ValueError, "window must be at least 3"),
    ],
)
def test_bad_probe_arguments(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        make_probe(*args, **kwargs)


def test_suite_distances_and_independent_splits():
    suite = load_dataset("probes", task="lag", window=12, n_train=40, n_eval=20, seed=3)
    assert isinstance(suite, ProbeSuite) and suite.distances == list(range(1, 11)) == list(
        range(1, max_distance("lag", 12) + 1)
    )
    assert suite.n_features == 2 and suite.name == "probes-lag"
    sp = suite.splits(4)
    assert [len(sp.train), len(sp.val), len(sp.test)] == [40, 20, 20]
    assert sp.summary["test"] == {"windows": 20, "positives": 10, "events": 0}
    train_rows = {w.tobytes() for w in sp.train.X}
    assert not train_rows & {w.tobytes() for w in sp.test.X}
    again = suite.splits(4)
    np.testing.assert_array_equal(again.test.X, sp.test.X)
    with pytest.raises(ValueError, match="k=11 does not fit"):
        suite.splits(11)
    with pytest.raises(ValueError, match="k=12 does not fit"):
        ProbeSuite(task="order", window=12, distances=[1, 12])
