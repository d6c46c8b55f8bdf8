"""The generating rule of the synthetic data as a score: an oracle row, not a method.

The synthetic series (:mod:`posenc_bench.data.synthetic`) end in a binary ``command`` channel and
a ``response`` channel; in normal operation the response pulse ``(0.5, 1, 0.5)`` starts ``LAG``
steps after each command, so its peak is ``LAG + 1`` steps after it. The oracle knows this and
the channel layout, which no model is told. A window's score is

    (number of rule violations) + M / (1 + M),     M = max_t max_{sensor f} |x_f[t]|

a violation being a command at ``t`` without a response peak at ``t + LAG + 1``, or a peak at
``t`` without a command at ``t − LAG − 1`` (both steps inside the window; pairs cut by the window's
edge are not judged). The second term lies in ``[0, 1)``: it ranks windows without a violation by
their largest normalised sensor value (the point family's spikes) below every window with one.
Long-range anomalies (level shift, frequency) are not in the rule. Command and peak steps are
found by thresholds on the training windows' range of each channel: a command above the middle,
a peak above ``min + 0.75·(max − min)`` (the pulse's shoulders are at half height).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc_bench.data.synthetic import LAG
from posenc_bench.experiment.baselines import WindowScorer

NAME = "oracle (generating rule)"


def synthetic_oracle(splits: Any) -> WindowScorer:
    """The oracle scorer (module docstring) with thresholds from ``splits.train``."""
    train = np.asarray(splits.train.X, dtype=np.float64)
    cmd_lo, cmd_hi = train[..., -2].min(), train[..., -2].max()
    res_lo, res_hi = train[..., -1].min(), train[..., -1].max()
    if not (cmd_hi > cmd_lo and res_hi > res_lo):
        raise ValueError("the oracle needs the synthetic layout: a command and a response channel last")
    gap = LAG + 1

    def score(windows: Any) -> NDArray[np.float64]:
        X = np.asarray(windows.X, dtype=np.float64)
        command = X[..., -2] > (cmd_lo + cmd_hi) / 2
        peak = X[..., -1] > res_lo + 0.75 * (res_hi - res_lo)
        violations = (command[:, :-gap] != peak[:, gap:]).sum(axis=1)
        m = np.abs(X[..., :-2]).max(axis=(1, 2))
        return violations + m / (1.0 + m)

    return score
