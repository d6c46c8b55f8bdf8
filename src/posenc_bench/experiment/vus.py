"""VUS-PR: the volume under the range-precision/recall surface (Paparrizos et al. 2022, VLDB).

Inputs: one series' step labels ``y[T]`` (0/1) and step scores ``s[T]`` (higher = more anomalous).
For a buffer length ``ℓ`` (Paparrizos et al. 2022, §4; the form of TSB-AD, Liu & Paparrizos 2024):

* **Buffered labels.** Every anomalous range ``[a, b]`` of ``y`` is widened by ``h = ⌊ℓ/2⌋`` steps
  on each side; a step at distance ``d = 1 … h`` outside the range gets the weight
  ``√(1 − d/ℓ)``; weights of neighbouring ranges add and are clipped to 1; anomalous steps
  weigh 1. The widened ranges (merged where they overlap) are the *segments* ``𝓛_ℓ``.
* **At a threshold τ** (prediction ``p_t = [s_t ≥ τ]``): ``TP = Σ_t w_t p_t``; the buffer's
  predicted weight ``B = Σ_{t: y_t = 0} w_t p_t``; ``P' = P + B/2`` with ``P = Σ y_t``;
  range recall ``R = min(TP / P', 1) · (segments of 𝓛_ℓ holding a predicted step) / |𝓛_ℓ|``
  (the existence reward); range precision ``Pr = TP / Σ_t p_t``.
* **Range AP** at ``ℓ``: ``Σ_j (R_j − R_{j−1}) · Pr_j`` over thresholds ``τ_1 > τ_2 > …`` with
  ``R_0 = 0`` (TSB-AD's right-endpoint sum).
* **VUS-PR** ``= (1/(L+1)) Σ_{ℓ=0}^{L} AP_ℓ``: the mean over buffers ``0 … L``.

Thresholds: every distinct score (exact), or as TSB-AD does, ``n_thresholds`` scores taken at
evenly spaced ranks of the descending scores (``n_thresholds=250`` reproduces TSB-AD 1.5's
``get_metrics(...)["VUS-PR"]``). At ``ℓ = 0`` and one anomalous range the range AP equals the
point-wise average precision. A perfect score reaches 1 only at ``L = 0``: buffer steps count as
partly positive, so flagging them costs precision and missing them costs recall.

The computation sorts the scores once and, per buffer, takes cumulative sums in that order, so
each threshold's sums cost ``O(1)``: ``O(T log T + L·T)`` in all.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc_bench.data.containers import label_runs


def buffered_labels(labels: ArrayLike, buffer: int) -> NDArray[np.float64]:
    """Step weights ``w[T]`` of ``labels`` widened by ``buffer`` ``ℓ`` (module docstring, first point)."""
    y = _labels(labels)
    w = y.astype(np.float64)
    half = buffer // 2
    if half == 0:
        return w
    for a, b in label_runs(y):
        d = np.arange(1, half + 1)
        after, before = b + d, a - d
        keep_after, keep_before = after < y.size, before >= 0
        np.add.at(w, after[keep_after], np.sqrt(1.0 - d[keep_after] / buffer))
        np.add.at(w, before[keep_before], np.sqrt(1.0 - d[keep_before] / buffer))
    return np.minimum(w, 1.0)


def buffered_segments(labels: ArrayLike, buffer: int) -> list[tuple[int, int]]:
    """The anomalous ranges of ``labels`` widened by ``⌊buffer/2⌋`` each side (clipped), merged where they overlap."""
    y = _labels(labels)
    half = buffer // 2
    out: list[tuple[int, int]] = []
    for a, b in label_runs(y):
        lo, hi = max(a - half, 0), min(b + half, y.size - 1)
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _labels(labels: ArrayLike) -> NDArray[np.bool_]:
    y = np.asarray(labels)
    if y.ndim != 1 or not np.isin(y, (0, 1)).all():
        raise ValueError(f"labels must be a 1-D array of 0/1, got shape {y.shape}")
    return y.astype(bool)


def thresholds(scores: NDArray[np.float64], n_thresholds: int | None) -> NDArray[np.float64]:
    """Descending thresholds: every distinct score, or ``n_thresholds`` at evenly spaced ranks (TSB-AD)."""
    if n_thresholds is None:
        return np.unique(scores)[::-1]
    if n_thresholds < 1:
        raise ValueError(f"n_thresholds must be >= 1 or None, got {n_thresholds}")
    ranked = np.sort(scores)[::-1]
    return ranked[np.linspace(0, scores.size - 1, n_thresholds).astype(int)]


class _Ranked:
    """One series' labels and scores, sorted once, with the thresholds' prediction counts."""

    def __init__(self, labels: ArrayLike, scores: ArrayLike, n_thresholds: int | None) -> None:
        self.y = _labels(labels)
        self.s = np.asarray(scores, dtype=np.float64)
        if self.s.shape != self.y.shape:
            raise ValueError(f"scores must have the shape of labels {self.y.shape}, got {self.s.shape}")
        if not np.isfinite(self.s).all():
            raise ValueError("scores must be finite (fill unscored steps first)")
        if not self.y.any():
            raise ValueError("labels hold no anomalous step: VUS-PR is undefined")
        self.order = np.argsort(-self.s, kind="stable")
        self.taus = thresholds(self.s, n_thresholds)
        # steps predicted at τ_j: the first counts[j] steps of `order` (scores ≥ τ_j)
        self.counts = np.searchsorted(-self.s[self.order], -self.taus, side="right")

    def _at(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """``Σ_t values_t p_t`` at every threshold."""
        return np.concatenate(([0.0], np.cumsum(values[self.order])))[self.counts]

    def ap(self, buffer: int) -> float:
        """Range AP at buffer ``ℓ = buffer`` (module docstring)."""
        y, s = self.y, self.s
        w = buffered_labels(y, buffer)
        tp = self._at(w)
        extra = self._at(np.where(y, 0.0, w))
        segments = buffered_segments(y, buffer)
        tops = np.array([s[a : b + 1].max() for a, b in segments])
        found = (tops[None, :] >= self.taus[:, None]).sum(axis=1)
        recall = np.minimum(tp / (y.sum() + extra / 2), 1.0) * found / len(segments)
        precision = tp / self.counts
        return float(np.sum(np.diff(np.concatenate(([0.0], recall))) * precision))


def _check_buffer(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")


def range_ap(labels: ArrayLike, scores: ArrayLike, buffer: int, *, n_thresholds: int | None = None) -> float:
    """Range average precision at one buffer length ``ℓ = buffer`` (module docstring)."""
    _check_buffer("buffer", buffer)
    return _Ranked(labels, scores, n_thresholds).ap(buffer)


def vus_pr_curve(
    labels: ArrayLike, scores: ArrayLike, *, max_buffer: int, n_thresholds: int | None = None
) -> NDArray[np.float64]:
    """``AP_ℓ`` for ``ℓ = 0 … max_buffer`` (module docstring); their mean is :func:`vus_pr`."""
    _check_buffer("max_buffer", max_buffer)
    ranked = _Ranked(labels, scores, n_thresholds)
    return np.array([ranked.ap(ell) for ell in range(max_buffer + 1)])


def vus_pr(
    labels: ArrayLike, scores: ArrayLike, *, max_buffer: int, n_thresholds: int | None = None
) -> float:
    """VUS-PR of ``scores`` against ``labels``: the mean range AP over buffers ``0 … max_buffer`` (module docstring)."""
    return float(vus_pr_curve(labels, scores, max_buffer=max_buffer, n_thresholds=n_thresholds).mean())
