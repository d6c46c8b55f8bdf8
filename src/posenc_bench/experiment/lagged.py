"""An order-aware baseline with no positional learning: gradient boosting on lagged cross-channel products.

A Transformer that learns "the response follows the command by 4 steps" compares feature ``j``
at step ``t + k`` with feature ``i`` at step ``t``. This baseline hands that comparison to
gradient boosting ready-made, with no position learned: for every ordered pair of channels
``(i, j)`` (``i = j`` included) and lag ``k ∈ {−K, …, K}`` of a window ``x[W, F]``,

    m_{ijk} = max_t x_i[t] · x_j[t + k],     a_{ijk} = mean_t x_i[t] · x_j[t + k]

over the steps ``t`` where both exist — the peak and the mean of the lagged cross-products
(the sample cross-correlation at lag ``k`` up to centring, Box & Jenkins 1976, §11.1) — plus
the order-free summaries of :func:`posenc_bench.experiment.controls.window_summary`.
``K = min(W − 1, 8)``; channels: at most ``MAX_CHANNELS`` (8), those with the largest variance
on the training windows (all of them when there are no more), so the features stay
``2·C²·(2K + 1)``. Fitted as :func:`posenc_bench.experiment.controls.hgb_scorer` (balanced
classes, no early stopping) and thresholded on validation like every row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_bench.experiment.baselines import WindowScorer
from posenc_bench.experiment.controls import hgb_scorer, window_summary

NAME = "hgb-lagged"
MAX_CHANNELS = 8
MAX_LAG = 8


def lagged_products(X: NDArray[np.floating], channels: list[int], max_lag: int) -> NDArray[np.float64]:
    """``[n, 2·C²·(2K+1)]``: the peak and mean of ``x_i[t]·x_j[t+k]`` per pair and lag (module docstring)."""
    x = np.asarray(X, dtype=np.float64)[:, :, channels]
    n, w, c = x.shape
    if not 0 <= max_lag < w:
        raise ValueError(f"max_lag must be in [0, {w - 1}] for windows of {w} steps, got {max_lag}")
    peaks, means = [], []
    for k in range(-max_lag, max_lag + 1):
        a, b = (x[:, : w - k], x[:, k:]) if k >= 0 else (x[:, -k:], x[:, : w + k])
        prod = a[:, :, :, None] * b[:, :, None, :]  # [n, t, i, j]
        peaks.append(prod.max(axis=1).reshape(n, c * c))
        means.append(prod.mean(axis=1).reshape(n, c * c))
    return np.concatenate(peaks + means, axis=1)


def busiest_channels(X: NDArray[np.floating], most: int = MAX_CHANNELS) -> list[int]:
    """The ``most`` features of ``X[n, W, F]`` with the largest variance, in feature order (ties: lower index)."""
    var = np.asarray(X, dtype=np.float64).reshape(-1, X.shape[-1]).var(axis=0)
    return sorted(np.argsort(-var, kind="stable")[:most].tolist())


def lagged_scorer(splits: Any, *, seed: int = 0) -> WindowScorer:
    """The fitted baseline (module docstring) as a scorer of window sets."""
    train = splits.train.X
    channels = busiest_channels(train)
    lag = min(train.shape[1] - 1, MAX_LAG)

    def features(X: NDArray[np.floating]) -> NDArray[np.float64]:
        return np.concatenate([window_summary(X), lagged_products(X, channels, lag)], axis=1)

    return hgb_scorer(features, splits, seed=seed)
