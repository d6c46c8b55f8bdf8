"""Baselines with no training, for both tasks: the matrix profile and the largest ``|value|``.

* **Matrix profile** (Yeh et al. 2016, ICDM, "Matrix profile I", its AB-join similarity join):
  the distance of each test subsequence of ``window`` steps to its nearest subsequence of a
  reference series — the channel's nominal training data. Computed with ``stumpy.aamp``
  (non-normalised Euclidean distance, so level shifts count; vectorised, no Python loop per
  subsequence), one feature at a time, and summed over the features used: it sees each feature's
  shape, not the timing between features.
* **Largest |value|**: the largest absolute normalised value in the window.

Detect task: step ``t`` is scored by the subsequence (window) that *ends* at ``t`` and, like a
detector, calibrated by the largest score on the held-out nominal tail. Classify task: each
window is scored as a whole (matrix profile: against every subsequence of the stretches of
series that the training windows without an anomalous step cover), the threshold is chosen on
validation as for the models. Both layouts lay windows out as the stretches of series they cover
(overlapping windows once, a ``NaN`` row between stretches), so the AB-join computes each
distance once instead of once per window that holds it.

stumpy compiles its kernels with numba on first use: 30 s of CPU (95 s of wall time at load 5 on 2
cores) for a new user, whose numba cache is empty. So a join of at most :data:`NUMPY_PAIRS`
subsequence pairs per feature (the built-in synthetic data, a telemetry channel) is computed with
NumPy instead (:func:`_nearest_numpy`: ``‖a − b‖² = ‖a‖² + ‖b‖² − 2a·b`` as one matrix product per
block of query subsequences, the nearest distance then recomputed directly, so that exact matches
are exactly 0); only larger joins pay for stumpy's kernels. For those, :func:`_stumpy` turns on
numba's on-disk cache (``Dispatcher.enable_caching``: numba's own ``__pycache__`` next to stumpy's
source, or ``NUMBA_CACHE_DIR``), so later processes load the compiled code instead.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_bench.data.nominal import DetectionData
from posenc_bench.experiment.metrics import best_f1_threshold, binary_metrics, family_auprc

NAMES = ("matrix-profile", "max-abs")
NUMPY_PAIRS = 2**28
"""The largest join (query × reference subsequences, per feature) computed with NumPy (module docstring)."""
_BLOCK = 2**22  # distances held at once by the NumPy join (32 MiB of float64)
_STUMPY_MODULES = ("stumpy.core", "stumpy.aamp")  # where the numba kernels of ``stumpy.aamp`` live


@functools.cache
def _stumpy() -> ModuleType:
    """stumpy, with numba's on-disk cache enabled for the compiled kernels of ``aamp`` (module docstring).

    Where numba finds no writable cache location it raises ``RuntimeError``; those kernels then
    stay uncached and are compiled in every process, as without this.
    """
    import stumpy
    from numba.core.registry import CPUDispatcher

    for module in _STUMPY_MODULES:
        for kernel in vars(sys.modules[module]).values():
            if isinstance(kernel, CPUDispatcher):
                with contextlib.suppress(RuntimeError):
                    kernel.enable_caching()
    return stumpy


def ab_join(query: NDArray[np.floating], reference: NDArray[np.floating], window: int) -> NDArray[np.float64]:
    """Nearest-subsequence Euclidean distance of every ``window``-step subsequence of ``query[T, F]`` in ``reference``.

    Returns ``[T - window + 1]``: for each start ``i``, ``Σ_f min_j ‖query[i:i+W, f] − reference[j:j+W, f]‖₂``
    (an AB-join per feature: NumPy or ``stumpy.aamp``, module docstring). Subsequences holding a ``NaN``
    (separators) get ``inf`` and never serve as neighbours.
    """
    import warnings

    q = np.asarray(query, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if q.ndim != 2 or r.ndim != 2 or q.shape[1] != r.shape[1]:
        raise ValueError(f"query and reference must be [T, F] with equal F, got {q.shape} and {r.shape}")
    if min(len(q), len(r)) < window:
        raise ValueError(
            f"query ({len(q)}) and reference ({len(r)}) must hold at least window={window} steps"
        )
    total = np.zeros(len(q) - window + 1)
    if (len(q) - window + 1) * (len(r) - window + 1) <= NUMPY_PAIRS:
        for f in range(q.shape[1]):
            total += _nearest_numpy(q[:, f], r[:, f], window)
        return total
    stumpy = _stumpy()
    with warnings.catch_warnings():  # exact matches (distance 0) are expected between nominal stretches
        warnings.filterwarnings("ignore", message="A large number of values in `P`", category=UserWarning)
        for f in range(q.shape[1]):
            total += stumpy.aamp(q[:, f], window, r[:, f], ignore_trivial=False)[:, 0].astype(np.float64)
    return total


def _nearest_numpy(q: NDArray[np.float64], r: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    """``min_j ‖q[i:i+W] − r[j:j+W]‖₂`` for every ``i`` (``inf`` where either side holds a ``NaN``):
    the expanded squared distance picks the nearest ``j`` per block of ``i``, which is then measured directly."""
    a = np.lib.stride_tricks.sliding_window_view(q, window)
    b = np.lib.stride_tricks.sliding_window_view(r, window)
    out = np.full(len(a), np.inf)
    usable_b = ~np.isnan(b).any(axis=1)
    if not usable_b.any():
        return out
    b_ok = b[usable_b]
    b_sq = (b_ok * b_ok).sum(axis=1)
    usable_a = np.flatnonzero(~np.isnan(a).any(axis=1))
    step = max(1, _BLOCK // len(b_ok))
    for lo in range(0, len(usable_a), step):
        rows = usable_a[lo : lo + step]
        block = a[rows]
        d2 = (block * block).sum(axis=1)[:, None] + b_sq[None, :] - 2.0 * (block @ b_ok.T)
        nearest = b_ok[np.argmin(d2, axis=1)]
        out[rows] = np.sqrt(((block - nearest) ** 2).sum(axis=1))
    return out


def _rolling_max(x: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    """``max(x[t - window + 1 … t])`` for ``t ≥ window − 1`` (``NaN`` before)."""
    out = np.full(len(x), np.nan)
    if len(x) >= window:
        out[window - 1 :] = np.lib.stride_tricks.sliding_window_view(x, window).max(axis=1)
    return out


def _ending_at(profile: NDArray[np.float64], n: int, window: int) -> NDArray[np.float64]:
    out = np.full(n, np.nan)
    out[window - 1 :] = profile
    return out


def detect_step_scores(name: str, data: DetectionData, *, window: int) -> tuple[list[NDArray], list[NDArray]]:
    """``(test, held-out)`` raw step scores per channel of baseline ``name`` on the target features."""
    targets = list(data.targets)
    tests, holds = [], []
    for c in data.channels:
        if name == "matrix-profile":
            tests.append(
                _ending_at(ab_join(c.test[:, targets], c.fit[:, targets], window), len(c.test), window)
            )
            holds.append(
                _ending_at(ab_join(c.holdout[:, targets], c.fit[:, targets], window), len(c.holdout), window)
            )
        elif name == "max-abs":
            for arr, out in ((c.test, tests), (c.holdout, holds)):
                out.append(_rolling_max(np.abs(arr[:, targets]).max(axis=1).astype(np.float64), window))
        else:
            raise ValueError(f"baseline must be one of {', '.join(NAMES)}, got {name!r}")
    return tests, holds


def stretches(
    windows: Any, keep: NDArray[np.bool_] | None = None
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The windows ``keep`` selects, laid out as the stretches of series they cover: ``(values, rows)``.

    ``windows`` has ``X[n, W, F]``, ``series[n]`` and ``start[n]`` (:class:`posenc_bench.data.WindowSet`).
    Windows of one series whose steps overlap or touch follow each other in one stretch (their
    common steps once); stretches are separated by a ``NaN`` row. ``values[T, F]`` (float64) holds
    them all, ``rows[k]`` is the first row of the ``k``-th selected window, so
    ``values[rows[k] : rows[k] + W] == X[selected[k]]``. A window whose overlap with the stretch
    so far holds other values (windows that are not cut from one series) starts a new stretch.
    """
    X = np.asarray(windows.X)
    n, w, n_features = X.shape
    chosen = np.arange(n) if keep is None else np.flatnonzero(keep)
    if chosen.size == 0:
        raise ValueError("no window selected: the matrix profile needs at least one window")
    series, start = np.asarray(windows.series), np.asarray(windows.start)
    ordered = chosen[np.lexsort((start[chosen], series[chosen]))]
    parts: list[NDArray] = []
    rows = np.empty(n, dtype=np.int64)
    length = 0  # rows laid out so far
    for k, i in enumerate(ordered):
        previous = ordered[k - 1]
        overlap = int(start[previous]) + w - int(start[i])  # steps shared with the previous window
        if (
            k
            and series[i] == series[previous]
            and 0 <= overlap <= w
            and np.array_equal(X[i, :overlap], X[previous, w - overlap :])
        ):
            rows[i] = length - overlap
            parts.append(X[i, overlap:])
            length += w - overlap
        else:
            if k:
                parts.append(np.full((1, n_features), np.nan, dtype=X.dtype))
                length += 1
            rows[i] = length
            parts.append(X[i])
            length += w
    return np.concatenate(parts).astype(np.float64), rows[chosen]


def window_profile(
    windows: Any, reference: Any, features: list[int], *, keep: NDArray[np.bool_] | None = None
) -> NDArray[np.float64]:
    """Matrix profile ``[n]`` of whole windows against the stretches the ``keep`` reference windows cover.

    ``windows`` and ``reference`` have ``X[n, W, F]``, ``series[n]``, ``start[n]`` (:func:`stretches`);
    window ``k``'s score is the :func:`ab_join` value of its first step in the query stretches.
    """
    query, rows = stretches(windows)
    ref, _ = stretches(reference, keep)
    return ab_join(query[:, features], ref[:, features], np.asarray(windows.X).shape[1])[rows]


def continuous_features(X: NDArray[np.float32]) -> list[int]:
    """Features with more than two distinct values in ``X[n, W, F]`` (binary command columns left out)."""
    flat = X.reshape(-1, X.shape[-1])
    return [f for f in range(flat.shape[1]) if np.unique(flat[:, f]).size > 2] or list(range(flat.shape[1]))


def classify_window_scores(name: str, splits: object) -> Callable[[Any], NDArray[np.float64]]:
    """A scoring function of window sets (``X[n, W, F]``, ``series``, ``start``) for baseline ``name`` on :class:`posenc_bench.data.Splits`."""
    train = splits.train  # type: ignore[attr-defined]
    if name == "max-abs":
        return lambda windows: np.abs(windows.X).max(axis=(1, 2)).astype(np.float64)
    if name == "matrix-profile":
        features = continuous_features(train.X)
        return lambda windows: window_profile(windows, train, features, keep=train.y == 0)
    raise ValueError(f"baseline must be one of {', '.join(NAMES)}, got {name!r}")


WindowScorer = Callable[[Any], NDArray[np.float64]]
"""Scores ``[n]`` of a window set (``X[n, W, F]``, ``series``, ``start``; higher = more anomalous)."""


def scorer_metrics(
    score: WindowScorer, splits: object, *, families: NDArray | None = None
) -> tuple[dict[str, float], NDArray[np.float64]]:
    """``(metrics on test, test scores)`` of a window scorer, thresholded at the F1-best validation score (as the models)."""
    val, test = splits.val, splits.test  # type: ignore[attr-defined]
    threshold = best_f1_threshold(val.y, score(val))
    scores = score(test)
    by_family = family_auprc(test.y, scores, families) if families is not None else {}
    return {
        **binary_metrics(test.y, scores, threshold=threshold),
        **by_family,
        "threshold": threshold,
    }, scores


def classify_baseline(name: str, splits: object, *, families: NDArray | None = None) -> dict[str, float]:
    """Metrics on test of baseline ``name`` (:func:`scorer_metrics`)."""
    return scorer_metrics(classify_window_scores(name, splits), splits, families=families)[0]
