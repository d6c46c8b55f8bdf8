"""Controls that say whether order matters for a task at all.

* **Time-shuffle control**: score a trained model on test windows whose time steps are
  randomly permuted (each window its own permutation, seeded); the drop in F1/AUPRC
  measures how much the model's decisions depend on order.
* **Order-free baseline**: scikit-learn ``HistGradientBoostingClassifier`` on per-window
  summary statistics of each feature — mean, std, min, max, last − first — with the same
  splits, the same validation-chosen threshold rule and the same test metrics. Only
  ``last − first`` knows anything about order (which end is which).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from posenc_bench.experiment.baselines import WindowScorer


def shuffle_time(X: np.ndarray, *, seed: int) -> np.ndarray:
    """A copy of windows ``X: [n, s, F]`` with each window's time steps permuted independently (seeded)."""
    n, s = X.shape[:2]
    perm = np.random.default_rng(seed).permuted(np.tile(np.arange(s), (n, 1)), axis=1)
    return X[np.arange(n)[:, None], perm]


def window_summary(X: np.ndarray) -> np.ndarray:
    """Per-window statistics ``[n, 5F]`` of ``X: [n, s, F]``: mean, std, min, max, last − first (per feature)."""
    X = np.asarray(X, dtype=np.float64)
    return np.concatenate(
        [X.mean(axis=1), X.std(axis=1), X.min(axis=1), X.max(axis=1), X[:, -1] - X[:, 0]], axis=1
    )


def hgb_scorer(features: Callable[[np.ndarray], np.ndarray], splits: Any, *, seed: int = 0) -> WindowScorer:
    """Gradient boosting fitted on ``features(splits.train.X)``: a scorer of window sets (its ``P(anomalous)``).

    Classes are balanced by ``class_weight="balanced"`` (the counterpart of the Transformer's
    ``pos_weight``); early stopping is off so the fit is deterministic.
    """
    clf = HistGradientBoostingClassifier(class_weight="balanced", early_stopping=False, random_state=seed)
    clf.fit(features(splits.train.X), splits.train.y)
    return lambda windows: clf.predict_proba(features(windows.X))[:, 1].astype(np.float64)
