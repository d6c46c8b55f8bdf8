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
window is scored as a whole (matrix profile: against every training window without an
anomalous step), the threshold is chosen on validation as for the models.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from posenc.data.nominal import DetectionData
from posenc.experiment.metrics import best_f1_threshold, binary_metrics, family_auprc

NAMES = ("matrix-profile", "max-abs")


def ab_join(query: NDArray[np.floating], reference: NDArray[np.floating], window: int) -> NDArray[np.float64]:
    """Nearest-subsequence Euclidean distance of every ``window``-step subsequence of ``query[T, F]`` in ``reference``.

    Returns ``[T - window + 1]``: for each start ``i``, ``Σ_f min_j ‖query[i:i+W, f] − reference[j:j+W, f]‖₂``
    (``stumpy.aamp`` AB-join per feature). Subsequences holding a ``NaN`` (separators) get ``inf``
    and never serve as neighbours.
    """
    import warnings

    import stumpy

    q = np.asarray(query, dtype=np.float64)
    r = np.asarray(reference, dtype=np.float64)
    if q.ndim != 2 or r.ndim != 2 or q.shape[1] != r.shape[1]:
        raise ValueError(f"query and reference must be [T, F] with equal F, got {q.shape} and {r.shape}")
    if min(len(q), len(r)) < window:
        raise ValueError(
            f"query ({len(q)}) and reference ({len(r)}) must hold at least window={window} steps"
        )
    total = np.zeros(len(q) - window + 1)
    with warnings.catch_warnings():  # exact matches (distance 0) are expected between nominal stretches
        warnings.filterwarnings("ignore", message="A large number of values in `P`", category=UserWarning)
        for f in range(q.shape[1]):
            total += stumpy.aamp(q[:, f], window, r[:, f], ignore_trivial=False)[:, 0].astype(np.float64)
    return total


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


def _separated(windows: NDArray[np.float32], f: int) -> NDArray[np.float64]:
    """Windows ``[n, W, F]``'s feature ``f`` laid end to end with a ``NaN`` after each window."""
    n, w, _ = windows.shape
    out = np.full((n, w + 1), np.nan)
    out[:, :w] = windows[:, :, f]
    return out.ravel()


def window_profile(
    windows: NDArray[np.float32], reference: NDArray[np.float32], features: list[int]
) -> NDArray[np.float64]:
    """Matrix profile of whole windows ``[n, W, F]`` against reference windows: ``[n]`` (module docstring)."""
    n, w, _ = windows.shape
    total = np.zeros(n)
    for f in features:
        q = _separated(windows, f)[:, None]
        r = _separated(reference, f)[:, None]
        total += ab_join(q, r, w)[:: w + 1]
    return total


def continuous_features(X: NDArray[np.float32]) -> list[int]:
    """Features with more than two distinct values in ``X[n, W, F]`` (binary command columns left out)."""
    flat = X.reshape(-1, X.shape[-1])
    return [f for f in range(flat.shape[1]) if np.unique(flat[:, f]).size > 2] or list(range(flat.shape[1]))


def classify_window_scores(name: str, splits: object) -> Callable[[NDArray[np.float32]], NDArray[np.float64]]:
    """A scoring function of windows ``[n, W, F]`` for baseline ``name`` on :class:`posenc.data.Splits`."""
    train = splits.train  # type: ignore[attr-defined]
    if name == "max-abs":
        return lambda X: np.abs(X).max(axis=(1, 2)).astype(np.float64)
    if name == "matrix-profile":
        nominal = train.X[train.y == 0]
        features = continuous_features(train.X)
        return lambda X: window_profile(X, nominal, features)
    raise ValueError(f"baseline must be one of {', '.join(NAMES)}, got {name!r}")


def classify_baseline(name: str, splits: object, *, families: NDArray | None = None) -> dict[str, float]:
    """Metrics on test of baseline ``name``, thresholded at the F1-best validation score (as the models)."""
    score = classify_window_scores(name, splits)
    val, test = splits.val, splits.test  # type: ignore[attr-defined]
    threshold = best_f1_threshold(val.y, score(val.X))
    scores = score(test.X)
    by_family = family_auprc(test.y, scores, families) if families is not None else {}
    return {**binary_metrics(test.y, scores, threshold=threshold), **by_family, "threshold": threshold}
