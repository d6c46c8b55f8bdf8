"""Detection metrics over time steps and events: smoothing, event-wise P/R/F1, window AUPRC, point-adjust.

Inputs per channel: a step score ``score[T]`` (higher = more anomalous; ``NaN`` = not scored),
the channel's inclusive events ``[(start, end), …]`` and the flags ``score > threshold``.

* **Smoothing** (:func:`ewma`): the exponentially weighted moving average telemanom applies to
  prediction errors (Hundman et al. 2018, §3.2: ``pandas.ewm(span=s).mean()``), i.e. with
  ``α = 2 / (s + 1)``, ``y_t = Σ_{i≤t} (1−α)^{t−i} x_i / Σ_{i≤t} (1−α)^{t−i}`` (the *adjusted*
  form, so early steps are not biased toward 0).
* **Event-wise** (no point-adjust): an event is *detected* (a true positive) when any of its steps
  is flagged; every maximal run of flagged steps **outside** events (flagged and not anomalous;
  a flagged run that crosses an event boundary leaves its outside parts as runs) is one false
  positive. Precision ``TP / (TP + FP)``, recall ``TP / n_events``, F1 their harmonic mean,
  pooled over channels. Flagging every step therefore earns recall 1 but one false positive per
  gap between events, which is what the no-skill row shows.
* **Window AUPRC**: windows of ``window`` steps at ``stride`` over each test array (as in the
  classify task), label 1 when any step is anomalous, score = the largest step score in the window
  (unscored steps ignored); scikit-learn average precision pooled over channels.
* **Point-adjusted F1** (Xu et al. 2018, WWW; criticised by Kim et al. 2022, AAAI, as inflated):
  if any step of an event is flagged, every step of it counts as flagged; then step-wise F1.
  Reported only as an extra, labelled inflated: a random score can reach a high point-adjusted F1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.signal import lfilter
from sklearn.metrics import average_precision_score

from posenc_bench.data.containers import label_runs
from posenc_bench.data.windows import segment_starts

#: The metrics of the detect task's table, and those tested in pairs and against flag-all.
DETECT_METRICS = ("event_precision", "event_recall", "event_f1", "auprc", "pa_f1")
DETECT_PAIRED = ("event_f1", "auprc")


def ewma(x: NDArray[np.floating], span: float) -> NDArray[np.float64]:
    """Adjusted exponentially weighted mean of ``x[T]`` with ``α = 2 / (span + 1)`` (module docstring); ``span=1``: ``x``."""
    if not span >= 1:
        raise ValueError(f"span must be >= 1, got {span!r}")
    x = np.asarray(x, dtype=np.float64)
    decay = 1.0 - 2.0 / (span + 1.0)
    num = lfilter([1.0], [1.0, -decay], x)
    den = lfilter([1.0], [1.0, -decay], np.ones_like(x))
    return num / den


@dataclass(frozen=True)
class ScoredChannel:
    """One channel's step scores (``NaN``: not scored) and labels; ``kinds`` names each event's family."""

    name: str
    score: NDArray[np.float64]
    labels: NDArray[np.bool_]
    events: list[tuple[int, int]]
    kinds: list[str]


def _runs_outside(flags: NDArray[np.bool_], labels: NDArray[np.bool_]) -> int:
    return len(label_runs(flags & ~labels))


def event_counts(channel: ScoredChannel, flags: NDArray[np.bool_]) -> tuple[NDArray[np.bool_], int]:
    """``(detected[e] per event, false-positive runs)`` of ``flags[T]`` (module docstring)."""
    counts = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))
    detected = np.array([counts[e + 1] - counts[s] > 0 for s, e in channel.events], dtype=bool)
    return detected, _runs_outside(flags, channel.labels)


def _f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _windows(
    channel: ScoredChannel, window: int, stride: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    starts = segment_starts(0, len(channel.score), window=window, stride=stride)
    filled = np.where(np.isnan(channel.score), -np.inf, channel.score)
    idx = starts[:, None] + np.arange(window)
    y = channel.labels[idx].any(axis=1).astype(np.int64)
    s = filled[idx].max(axis=1)
    return y, np.where(np.isfinite(s), s, np.nan)


def detection_metrics(
    channels: Sequence[ScoredChannel], *, threshold: float, window: int, stride: int, flag_all: bool = False
) -> dict[str, float]:
    """Event-wise P/R/F1, window AUPRC and point-adjusted F1, pooled over ``channels`` (module docstring).

    A step is flagged when ``score > threshold`` (unscored steps never); ``flag_all=True`` flags
    every step instead (the no-skill row; its AUPRC is the window prevalence). Per-family event
    recall ``event_recall:<family>`` and window AUPRC ``auprc:<family>`` (positives of that family
    against all negatives) are added when channels name their events' families.
    """
    tp = fp = n_events = 0
    ys, ss, fams = [], [], []
    pa_tp = pa_fp = pa_fn = 0
    by_family: dict[str, list[int]] = {}
    for ch in channels:
        flags = (
            np.ones(len(ch.score), dtype=bool)
            if flag_all
            else np.nan_to_num(ch.score, nan=-np.inf) > threshold
        )
        detected, false_runs = event_counts(ch, flags)
        tp += int(detected.sum())
        fp += false_runs
        n_events += len(ch.events)
        adjusted = flags.copy()
        for (s, e), hit in zip(ch.events, detected):
            if hit:
                adjusted[s : e + 1] = True
        for hit, kind in zip(detected, ch.kinds):
            by_family.setdefault(kind, []).append(int(hit))
        pa_tp += int((adjusted & ch.labels).sum())
        pa_fp += int((adjusted & ~ch.labels).sum())
        pa_fn += int((~adjusted & ch.labels).sum())
        y, scores = _windows(ch, window, stride)
        ys.append(y)
        ss.append(np.ones_like(scores) if flag_all else scores)
        fams.append(_window_families(ch, window, stride))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / n_events if n_events else 0.0
    pa_p = pa_tp / (pa_tp + pa_fp) if pa_tp + pa_fp else 0.0
    pa_r = pa_tp / (pa_tp + pa_fn) if pa_tp + pa_fn else 0.0
    y_all, s_all, f_all = np.concatenate(ys), np.concatenate(ss), np.concatenate(fams)
    s_all = np.nan_to_num(s_all, nan=np.nanmin(s_all) if np.isfinite(s_all).any() else 0.0)
    out = {
        "event_precision": precision,
        "event_recall": recall,
        "event_f1": _f1(precision, recall),
        "auprc": float(average_precision_score(y_all, s_all)),
        "pa_f1": _f1(pa_p, pa_r),
        "events": float(n_events),
        "false_positive_runs": float(fp),
    }
    for family, hits in sorted(by_family.items()):
        out[f"event_recall:{family}"] = float(np.mean(hits))
        keep = (y_all == 0) | (f_all == family)
        if (y_all[keep] == 1).any():
            out[f"auprc:{family}"] = float(average_precision_score(y_all[keep], s_all[keep]))
    return out


def _window_families(ch: ScoredChannel, window: int, stride: int) -> NDArray[np.str_]:
    """The family of the first event each window overlaps (``""`` for none or unknown)."""
    starts = segment_starts(0, len(ch.score), window=window, stride=stride)
    out = np.full(len(starts), "", dtype=object)
    if ch.kinds:
        for (s, e), kind in zip(ch.events, ch.kinds):
            hit = (starts <= e) & (starts + window - 1 >= s) & (out == "")
            out[hit] = kind
    return out.astype(str)
