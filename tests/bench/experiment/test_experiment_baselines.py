"""Baselines without training: the matrix profile (NumPy or stumpy AB-join) against a brute-force float64 formula."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from posenc_bench.experiment.baselines import ab_join, continuous_features, stretches, window_profile


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


@pytest.mark.slow  # stumpy compiles its kernels (numba) on first use: ~30 s of CPU with a cold cache
def test_the_numpy_join_agrees_with_stumpys(monkeypatch):
    """Joins larger than NUMPY_PAIRS go to stumpy.aamp: both paths give the same distances."""
    from posenc_bench.experiment import baselines

    rng = np.random.default_rng(1)
    q, r = rng.normal(size=(300, 2)), rng.normal(size=(400, 2))
    r[50] = np.nan
    q[7] = np.nan
    small = ab_join(q, r, 16)
    monkeypatch.setattr(baselines, "NUMPY_PAIRS", 0)
    np.testing.assert_allclose(ab_join(q, r, 16), small, rtol=1e-9, atol=1e-9)


def test_an_exact_match_is_distance_zero_and_a_small_join_compiles_nothing():
    """Exact matches between nominal stretches are 0, not a rounding of the expanded formula; and the
    default data's join imports neither stumpy nor numba (a new user's cold numba cache cost 30 s of CPU)."""
    rng = np.random.default_rng(2)
    r = rng.normal(size=(200, 1)) * 1e3
    q = r[40:90].copy()
    assert np.all(ab_join(q, r, 8) == 0.0)
    code = (
        "import sys, numpy as np; from posenc_bench.experiment.baselines import ab_join; "
        "ab_join(np.random.default_rng(0).normal(size=(3000, 4)), np.random.default_rng(1).normal(size=(9000, 4)), 32); "
        "print(sorted(m for m in ('stumpy', 'numba') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def window_set(X, series, start):
    return SimpleNamespace(
        X=np.asarray(X, dtype=np.float32), series=np.asarray(series), start=np.asarray(start)
    )


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
    # every window from its own series: nothing to join, each reference window is one stretch
    got = window_profile(window_set(windows, range(5), [0] * 5), window_set(ref, range(7), [0] * 7), [0, 2])
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    with pytest.raises(ValueError, match="at least window=6"):
        ab_join(np.zeros((5, 1)), np.zeros((9, 1)), 6)


def test_window_profile_searches_every_subsequence_of_the_covered_stretches():
    rng = np.random.default_rng(2)
    w, series = 6, rng.normal(size=(2, 40, 2))
    starts = [0, 3, 6, 9, 20, 24, 27]  # stride 3 (overlapping), a gap, then stride 4 and 3
    ref = window_set([series[0, b : b + w] for b in starts], [0] * 7, starts)
    keep = np.array([True, True, True, True, False, True, True])  # window 4 held an anomaly
    query = window_set(
        [series[1, b : b + w] for b in (0, 2, 30)] + [series[0, 1 : 1 + w]], [1, 1, 1, 0], [0, 2, 30, 1]
    )
    covered = np.full(40, False)
    for b, k in zip(starts, keep):
        covered[b : b + w] |= k
    reference = np.where(covered[:, None], series[0], np.nan)  # steps 0-14 and 24-32
    expected = brute_force(np.asarray(query.X, dtype=np.float64).reshape(-1, 2), reference, w)[::w]
    got = window_profile(query, ref, [0, 1], keep=keep)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert got[3] == pytest.approx(0.0, abs=1e-3)  # series 0, step 1: between two reference windows' starts


def test_stretches_lay_out_overlapping_windows_once_and_split_where_values_disagree():
    x = np.arange(20, dtype=np.float32)[:, None]
    windows = window_set([x[0:4], x[2:6], x[4:8], x[10:14], x[12:16] + 100], [0] * 5, [0, 2, 4, 10, 12])
    values, rows = stretches(windows)
    np.testing.assert_array_equal(values[:8, 0], np.arange(8))  # windows 0-2: steps 0-7 once
    assert np.isnan(values[8, 0]) and np.isnan(values[13, 0])
    np.testing.assert_array_equal(rows, [0, 2, 4, 9, 14])  # the last window disagrees: its own stretch
    for k, r in enumerate(rows):
        np.testing.assert_array_equal(values[r : r + 4], windows.X[k])


def test_continuous_features_leave_binary_columns_out():
    X = np.zeros((4, 3, 3), dtype=np.float32)
    X[..., 0] = np.arange(12).reshape(4, 3)
    X[0, 0, 1] = 1.0
    assert continuous_features(X) == [0]
