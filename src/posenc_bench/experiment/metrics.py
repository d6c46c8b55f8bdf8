"""Binary classification metrics (scikit-learn) and the validation-chosen decision threshold.

The threshold is chosen on the *validation* set only, as the score that maximises F1
there; the test set is then scored at that fixed threshold (never on test).
AUPRC is scikit-learn's average precision, ``Σ_n (R_n − R_{n−1}) P_n`` — threshold-free.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    precision_recall_curve,
    precision_recall_fscore_support,
)

#: The metrics of the comparison table (:func:`binary_metrics` also gives ``accuracy``, used by the probes).
METRICS = ("precision", "recall", "f1", "auprc")


def _labels_and_scores(y: ArrayLike, scores: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y)
    s = np.asarray(scores, dtype=np.float64)
    if y.ndim != 1 or s.shape != y.shape:
        raise ValueError(f"y and scores must be 1-D of equal length, got shapes {y.shape} and {s.shape}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"y must hold only 0/1 labels, got values {np.unique(y)[:5].tolist()}")
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (a NaN score usually means training diverged)")
    if not (y == 1).any():
        raise ValueError("y holds no positive label: precision, recall and AUPRC are undefined")
    return y.astype(np.int64), s


def best_f1_threshold(y: ArrayLike, scores: ArrayLike) -> float:
    """The score threshold ``τ`` maximising F1 of ``score ≥ τ`` on ``(y, scores)`` (use validation data).

    Candidates are the distinct scores (scikit-learn's ``precision_recall_curve``); ties go to
    the highest threshold, i.e. the most conservative decision among the best.
    """
    y, s = _labels_and_scores(y, scores)
    precision, recall, thresholds = precision_recall_curve(y, s)
    p, r = precision[:-1], recall[:-1]  # the last point (P=1, R=0) has no threshold
    f1 = np.divide(2 * p * r, p + r, out=np.zeros_like(p), where=(p + r) > 0)
    best = np.flatnonzero(f1 == f1.max())[-1]
    return float(thresholds[best])


def binary_metrics(y: ArrayLike, scores: ArrayLike, *, threshold: float) -> dict[str, float]:
    """Precision, recall, F1 and accuracy of ``score ≥ threshold``, and AUPRC of ``scores``, against ``y``.

    Precision is 0 when nothing is predicted positive (scikit-learn ``zero_division=0``).
    """
    y, s = _labels_and_scores(y, scores)
    pred = (s >= threshold).astype(np.int64)
    p, r, f, _ = precision_recall_fscore_support(y, pred, average="binary", zero_division=0)
    return {
        "precision": float(p),
        "recall": float(r),
        "f1": float(f),
        "auprc": float(average_precision_score(y, s)),
        "accuracy": float(accuracy_score(y, pred)),
    }


def family_auprc(y: ArrayLike, scores: ArrayLike, families: ArrayLike) -> dict[str, float]:
    """``auprc:<family>``: AUPRC of the positives of each family against **all** negatives.

    ``families[i]`` names the family of window ``i``'s event (``""`` for negatives or unknown);
    a family is reported when at least one positive window has it.
    """
    y, s = _labels_and_scores(y, scores)
    fam = np.asarray(families).astype(str)
    if fam.shape != y.shape:
        raise ValueError(f"families must have the shape of y {y.shape}, got {fam.shape}")
    out = {}
    for family in sorted(set(fam[y == 1]) - {""}):
        keep = (y == 0) | (fam == family)
        out[f"auprc:{family}"] = float(average_precision_score(y[keep], s[keep]))
    return out
