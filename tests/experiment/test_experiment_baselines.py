"""Baselines without training: the matrix profile (stumpy AB-join) against a brute-force float64 formula."""

from __future__ import annotations

import numpy as np
import pytest

from posenc.experiment.baselines import ab_join, continuous_features, window_profile

pytestmark = pytest.mark.slow  # stumpy compiles its kernels (numba) on first use: ~20 s of CPU


def brute_force(q, r, w):
    out = np.zeros(len(q) - w + 1)
    for f in range(q.shape[1]):
        for i in range(len(q) - w + 1):
            a = q[i : i + w, f]
            best = np.inf
            for j in range(len(r) - w + 1):
                b = r[j : j + w, f]
                if np.isnan(a).any() or np.isnan(b).any():
                    continue
                best = min(best, float(np.sqrt(((a - b) ** 2).sum())))
            out[i] += best
    return out


def test_ab_join_is_the_nearest_subsequence_distance_per_feature_summed():
    rng = np.random.default_rng(0)
    q, r = rng.normal(size=(40, 2)), rng.normal(size=(50, 2))
    np.testing.assert_allclose(ab_join(q, r, 6), brute_force(q, r, 6), rtol=1e-6, atol=1e-6)
    r[10] = np.nan  # subsequences through a NaN never serve as neighbours
    np.testing.assert_allclose(ab_join(q, r, 6), brute_force(q, r, 6), rtol=1e-6, atol=1e-6)


def test_window_profile_scores_whole_windows_against_reference_windows():
    rng = np.random.default_rng(1)
    ref = rng.normal(size=(7, 5, 3)).astype(np.float32)
    windows = np.concatenate([ref[:2] + 0.01, rng.normal(size=(3, 5, 3)).astype(np.float32) + 4])
    expected = np.array(
        [
            sum(
                min(np.sqrt(((w[:, f] - v[:, f]).astype(np.float64) ** 2).sum()) for v in ref) for f in (0, 2)
            )
            for w in windows
        ]
    )
    np.testing.assert_allclose(window_profile(windows, ref, [0, 2]), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="at least window=6"):
        ab_join(np.zeros((5, 1)), np.zeros((9, 1)), 6)


def test_continuous_features_leave_binary_columns_out():
    X = np.zeros((4, 3, 3), dtype=np.float32)
    X[..., 0] = np.arange(12).reshape(4, 3)
    X[0, 0, 1] = 1.0
    assert continuous_features(X) == [0]
