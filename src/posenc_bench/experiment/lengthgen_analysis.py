"""Analysis meets experiment: posenc's criteria measured beyond the training length beside the
accuracy each encoding reached there, and the rank correlation between the two.

For every encoding of a lengthgen grid (``none`` has no criteria) the scorecard
(:func:`posenc.analysis.scorecard`) is computed over the positions of the longest test sequence,
at the width the encoding has in the decoder (rotary: the head width; biases: the heads). Learned
encodings are measured **at initialisation** (the runs keep their metrics, not their weights), so
for them the criteria describe the starting point, not the trained module. Each criterion is then
rank-correlated (Spearman) with the mean exact-match accuracy at ``2L`` and ``4L`` over the
(encoding, task) pairs: a criterion that predicts length generalisation should rank them alike.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

from posenc import analysis, registry
from posenc_bench.data import lengthgen as data

CRITERIA: tuple[str, ...] = ("long_range_decay", "toeplitz_error", "value_min", "value_max")
"""Scorecard criteria defined for tables and biases alike (the others apply to one kind only)."""


def criteria_beyond_l(plan: Any) -> dict[str, dict[str, float | None]]:
    """``{encoding: {criterion: value}}`` over the positions of the longest test sequence of the plan."""
    base = plan.base
    longest = max(data.sequence_length(t, max(plan.test_lengths(t))) for t in plan.tasks)
    out: dict[str, dict[str, float | None]] = {}
    for name in plan.encodings:
        if name == "none":
            continue
        family = registry.get(name).family
        dim = (
            base.d_model // base.n_heads if family in ("rotary", "query_bias", "contextual") else base.d_model
        )
        card = analysis.scorecard(name, length=longest, dim=dim, n_heads=base.n_heads, seed=0)
        out[name] = {k: _number(card.values.get(k)) for k in CRITERIA}
    return out


def _number(value: object) -> float | None:
    """A numeric criterion, with values below ``1e-12`` in magnitude (float64 round-off of an exact 0,
    e.g. a Toeplitz error) set to 0 so that they tie instead of being ranked by their noise."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return 0.0 if abs(value) < 1e-12 else float(value)


def rank_correlations(
    plan: Any, tables: dict[str, Any], criteria: dict[str, dict[str, float | None]]
) -> list[dict[str, Any]]:
    """Spearman ρ (and its p) between each criterion and the mean accuracy at ``2L`` and ``4L``."""
    rows = []
    for multiple in (2.0, 4.0):
        for criterion in CRITERIA:
            xs, ys = [], []
            for r in tables["rows"]:
                if r["encoding"] not in criteria or r["length"] != round(multiple * plan.base.train_length):
                    continue
                value = criteria[r["encoding"]][criterion]
                if value is not None:
                    xs.append(value)
                    ys.append(r["mean"])
            rho: float | None = None
            p: float | None = None
            if len(xs) >= 3 and np.ptp(xs) > 0 and np.ptp(ys) > 0:  # else ρ is undefined
                result = stats.spearmanr(xs, ys)
                rho, p = float(result.statistic), float(result.pvalue)
            rows.append({"criterion": criterion, "multiple": multiple, "pairs": len(xs), "rho": rho, "p": p})
    return rows


def markdown(criteria: dict[str, dict[str, float | None]], correlations: list[dict[str, Any]]) -> str:
    """The criteria per encoding and the rank correlations, as markdown."""
    lines = [
        "## Analysis beside the experiment",
        "",
        "Criteria over the positions of the longest test sequence (learned encodings at initialisation):",
        "",
        "| encoding | " + " | ".join(CRITERIA) + " |",
        "|---|" + "---:|" * len(CRITERIA),
    ]
    for name, values in criteria.items():
        cells = ["—" if values[k] is None else f"{values[k]:.4g}" for k in CRITERIA]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Spearman rank correlation with the mean accuracy over (encoding, task) pairs:", "",
              "| criterion | at | pairs | ρ | p |", "|---|---|---:|---:|---:|"]  # fmt: skip
    for c in correlations:
        rho = "—" if c["rho"] is None else f"{c['rho']:+.2f}"
        p = "—" if c["p"] is None else f"{c['p']:.2g}"
        lines.append(f"| {c['criterion']} | {c['multiple']:g}L | {c['pairs']} | {rho} | {p} |")
    return "\n".join(lines) + "\n"
