"""Paired statistics for comparing two encodings run on the same (split, seed) pairs.

Primary test: the **exact paired sign-flip (permutation) test** on the mean difference.
Under the null hypothesis the two encodings are exchangeable within each paired run (same
split, same seed, same initial input projection), so each difference is as likely to have
either sign; the p-value is the fraction of the ``2^n`` sign assignments whose mean is at
least as far from 0 as the observed one (exact for ``n ≤ 16``, Monte Carlo with 100 000 draws
above; sums equal but for their floating-point rounding count as ties: :func:`sign_flip_p`).
It uses the sizes of the differences, assumes no normality, and is exact at small ``n``.

Also reported: the **Wilcoxon signed-rank** test (``scipy.stats.wilcoxon``, exact). With
``n`` pairs and no ties the smallest two-sided p-value either test can give is ``2 / 2^n``:
0.0625 for 5 seeds — five seeds can never reach p < 0.05. Repeated splits (``K`` splits ×
``N`` seeds) give ``K·N`` pairs.

How both factors are accounted for: conditional on the splits, runs with different seeds
are independent, so flipping each pair's sign independently is a valid (stratified)
permutation of the null — the test is exact *for these splits*. Split-to-split variation
enters the **two-stage bootstrap** 95% CI of the mean difference: resample splits with
replacement, then seeds within each chosen split (percentile interval).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

EXACT_MAX_PAIRS = 16

#: One paragraph stating the tests, for result tables.
METHOD_NOTE = (
    "Paired test: exact sign-flip permutation test of the mean difference (two-sided; Monte Carlo with "
    "100000 flips above 16 pairs), Wilcoxon signed-rank alongside; with n pairs the smallest attainable "
    "p is 2/2^n (0.0625 for 5). Pairs share split and seed; flipping each pair independently is exact "
    "conditional on the splits; the 95% CI is a two-stage bootstrap (splits, then seeds within a split), "
    "so it also carries split-to-split variation."
)


def _diffs(differences: ArrayLike) -> np.ndarray:
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim != 1 or d.size == 0 or not np.isfinite(d).all():
        raise ValueError(f"differences must be a non-empty 1-D finite array, got shape {d.shape}")
    return d


def sign_flip_p(differences: ArrayLike, *, seed: int = 0) -> float:
    """Two-sided p-value of the paired sign-flip test of ``mean(differences) = 0``.

    The share of sign assignments ``s`` with ``|Σ s_i·d_i| ≥ |Σ d_i|``: all ``2^n`` of them (exact) for
    ``n ≤ 16``, otherwise 100 000 random ones, counted with the observed one, ``(k + 1)/(B + 1)``.
    Sums that are equal in exact arithmetic can differ in floating point by their rounding, at most
    ``n·ε·Σ|d_i|``; they count as ties within 4× that bound. (scipy's ``permutation_test`` allows
    ``100·ε·|observed|``, which a sum of cancelling terms exceeds: it gave 0.875 for an exact 1.0.)
    """
    d = _diffs(differences)
    n = d.size
    observed = abs(float(d.sum()))
    tie = 4.0 * n * np.finfo(np.float64).eps * float(np.abs(d).sum())
    if n <= EXACT_MAX_PAIRS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return float(np.mean(np.abs(signs @ d) >= observed - tie))
    rng = np.random.default_rng(seed)
    draws, at_least = 100_000, 0
    for start in range(0, draws, 10_000):  # [10 000, n] signs at a time
        signs = rng.choice((-1.0, 1.0), size=(min(10_000, draws - start), n))
        at_least += int(np.count_nonzero(np.abs(signs @ d) >= observed - tie))
    return (at_least + 1) / (draws + 1)


def wilcoxon_p(differences: ArrayLike) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test (``nan`` when every difference is 0)."""
    d = _diffs(differences)
    if not np.any(d != 0):
        return float("nan")
    return float(stats.wilcoxon(d, alternative="two-sided").pvalue)


def min_attainable_p(n_pairs: int) -> float:
    """The smallest two-sided p-value of an exact sign-flip or signed-rank test with ``n_pairs``: ``2 / 2^n``."""
    return min(1.0, 2.0 / 2.0**n_pairs)


def two_stage_bootstrap_ci(
    groups: Sequence[ArrayLike], *, level: float = 0.95, n_boot: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile CI of the mean of paired differences grouped by split.

    Each replicate draws ``K`` splits with replacement from the ``K`` groups, then within each
    drawn split its seeds' differences with replacement, and takes the mean of all drawn values.
    With one split this is the ordinary bootstrap over seeds. Replicates are drawn in blocks of
    arrays (a split's draws are uniform integers below its size), not one at a time.
    """
    arrays = [_diffs(g) for g in groups]
    if not arrays:
        raise ValueError("groups must hold at least one split's differences")
    rng = np.random.default_rng(seed)
    k = len(arrays)
    sizes = np.array([a.size for a in arrays])
    table = np.zeros((k, sizes.max()))  # group g's values in table[g, :sizes[g]]
    for g, a in enumerate(arrays):
        table[g, : a.size] = a
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // (k * sizes.max()))  # replicates per block: bounded memory
    for start in range(0, n_boot, chunk):
        b = min(chunk, n_boot - start)
        picked = rng.integers(k, size=(b, k))  # [b, K] splits drawn
        n = sizes[picked]  # [b, K] their sizes
        inner = (rng.random((b, k, sizes.max())) * n[..., None]).astype(np.int64)  # uniform in [0, n)
        drawn = table[picked[..., None], inner]
        used = np.arange(sizes.max()) < n[..., None]  # the first n draws of a split of n values
        means[start : start + b] = (drawn * used).sum(axis=(1, 2)) / used.sum(axis=(1, 2))
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)
