"""Per-series scores: each series (a channel, a machine, a file) scored on its own, threshold-free.

For every series with at least one anomalous point:

* ``auprc`` — scikit-learn's average precision ``Σ_n (R_n − R_{n−1}) P_n`` of the series' points;
* ``vus_pr`` — the volume under the range-PR surface over buffers ``0 … max_buffer``
  (Paparrizos et al. 2022; :mod:`posenc_bench.experiment.vus`).

The points are the test **steps** of a channel in the detect task (unscored steps — a
forecaster's first ``window`` — get the series' lowest score, so they rank last, and ``+inf`` ranks
first; ``max_buffer``
is the detector's window), and the test **windows** of a series in time order in the classify
task (a run of positive windows is one range; ``max_buffer`` is the number of windows that
share a step, ``⌈window / stride⌉``). A series without an anomalous point has no value (it is
left out, not scored 0). A constant score (``flag-all``) gets AUPRC = the series' prevalence.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.metrics import average_precision_score

from posenc_bench.experiment.events import ScoredChannel
from posenc_bench.experiment.vus import vus_pr

#: The per-series metrics, in table order.
SERIES_METRICS = ("auprc", "vus_pr")

SeriesScores = dict[str, dict[str, float]]
"""Series name → metric (:data:`SERIES_METRICS`) → value."""


def _filled(score: ArrayLike) -> NDArray[np.float64]:
    """``score`` with unscored (``NaN``) points set to the lowest finite value and ``±inf`` kept in rank.

    ``+inf`` (a calibrated score over a held-out maximum of 0) becomes one above the largest finite
    value, ``−inf`` the lowest finite value: the order of the points is unchanged.
    """
    s = np.asarray(score, dtype=np.float64)
    finite = np.isfinite(s)
    low = float(s[finite].min()) if finite.any() else 0.0
    high = float(s[finite].max()) + 1.0 if finite.any() else 1.0
    return np.where(finite, s, np.where(s == np.inf, high, low))


def score_one(labels: ArrayLike, score: ArrayLike, *, max_buffer: int) -> dict[str, float] | None:
    """``{"auprc", "vus_pr"}`` of one series' points (module docstring); ``None`` without an anomalous point."""
    y = np.asarray(labels).astype(bool)
    if not y.any():
        return None
    s = _filled(score)
    return {
        "auprc": float(average_precision_score(y, s)) if not y.all() else 1.0,
        "vus_pr": vus_pr(y, s, max_buffer=max_buffer),
    }


def detect_series(
    channels: Sequence[ScoredChannel], *, max_buffer: int, flag_all: bool = False
) -> SeriesScores:
    """Per-channel scores of step scores (``flag_all``: a constant score, the no-skill row)."""
    out: SeriesScores = {}
    for ch in channels:
        score = np.ones(len(ch.score)) if flag_all else ch.score
        value = score_one(ch.labels, score, max_buffer=max_buffer)
        if value is not None:
            out[ch.name] = value
    return out


def window_series(
    series: ArrayLike,
    start: ArrayLike,
    labels: ArrayLike,
    score: ArrayLike,
    names: Sequence[str],
    *,
    max_buffer: int,
) -> SeriesScores:
    """Per-series scores of window scores: ``series[n]`` indexes ``names``, ``start[n]`` orders a series' windows."""
    idx, first = np.asarray(series), np.asarray(start)
    y, s = np.asarray(labels), np.asarray(score, dtype=np.float64)
    out: SeriesScores = {}
    for k in np.unique(idx):
        mine = np.flatnonzero(idx == k)
        mine = mine[np.argsort(first[mine], kind="stable")]
        value = score_one(y[mine], s[mine], max_buffer=max_buffer)
        if value is not None:
            out[str(names[int(k)])] = value
    return out
