"""Analysis meets experiment: posenc's criteria measured beyond the training length on each run's
*trained* encoding, beside the accuracy the run reached there, and the rank correlation of the two.

For every (task, encoding) of a lengthgen grid (``none`` has no criteria) each seed's trained
encoding module (the run's ``encoding.pt`` loaded into its decoder) is handed to the analysis as
arrays (:func:`posenc_bench.experiment.trained.encoding_view`: a table, rotated probe rows, or a bias
``[h, n, n]``) and scored (:func:`posenc.analysis.score_view`) over the positions of the task's longest
test sequence, as the module is built in the decoder (rotary: the head width; FIRE: its threshold at
the training length). The criteria are averaged over seeds. Parameter-free encodings (rope, ALiBi,
sinusoidal) score the same in every run. Each criterion is then rank-correlated (Spearman) with the
mean exact-match accuracy at every test length above ``L`` that the grid tests (``2L`` and ``4L`` by
default; ``1.25L`` and ``1.5L`` where the tasks are tested that close to ``L``) over the (encoding,
task) pairs: a criterion that predicts length generalisation should rank them alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from posenc import analysis
from posenc_bench.data import lengthgen as data
from posenc_bench.decoder import CausalDecoder
from posenc_bench.experiment.trained import encoding_view

CRITERIA: tuple[str, ...] = ("long_range_decay", "toeplitz_error", "value_min", "value_max")
"""Scorecard criteria defined for tables and biases alike (the others apply to one kind only)."""

Criteria = dict[str, dict[str, dict[str, float | None]]]
"""``{task: {encoding: {criterion: mean over seeds}}}``."""


def criteria_beyond_l(plan: Any, trained_model: Callable[[Any], CausalDecoder]) -> Criteria:
    """The criteria of every (task, encoding) of ``plan`` over the positions of the task's longest
    test sequence; ``trained_model(config)`` is a run's decoder with its trained encoding loaded."""
    out: Criteria = {}
    for t in plan.tasks:
        length = data.sequence_length(t, max(plan.test_lengths(t)))
        for name in plan.encodings:
            if name == "none":
                continue
            per_seed = []
            for config in plan.configs():
                if config.task != t or config.encoding != name:
                    continue
                view = encoding_view(trained_model(config), name=name, state="trained", seed=0)
                card = analysis.score_view(view, length=length, seed=0)
                per_seed.append([_number(card.values.get(k)) for k in CRITERIA])
            out.setdefault(t, {})[name] = {
                k: None if any(v[i] is None for v in per_seed) else float(np.mean([v[i] for v in per_seed]))
                for i, k in enumerate(CRITERIA)
            }
    return out


def _number(value: object) -> float | None:
    """A numeric criterion, with values below ``1e-12`` in magnitude (float64 round-off of an exact 0,
    e.g. a Toeplitz error) set to 0 so that they tie instead of being ranked by their noise."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return 0.0 if abs(value) < 1e-12 else float(value)


def lengths_beyond_l(plan: Any) -> list[int]:
    """Every test length above the training length ``L`` that ``plan`` tests, for any of its tasks."""
    return sorted({n for t in plan.tasks for n in plan.test_lengths(t) if n > plan.base.train_length})


def _accuracy_at(tables: dict[str, Any], length: int) -> dict[tuple[str, str], float]:
    """``{(task, encoding): mean accuracy}`` at the test length ``length``."""
    return {(r["task"], r["encoding"]): r["mean"] for r in tables["rows"] if r["length"] == length}


def rank_correlations(plan: Any, tables: dict[str, Any], criteria: Criteria) -> list[dict[str, Any]]:
    """Spearman ρ (and its p) between each criterion and the mean accuracy at each of
    :func:`lengths_beyond_l`; ``multiple`` is that length over ``L``."""
    rows = []
    for length in lengths_beyond_l(plan):
        multiple = length / plan.base.train_length
        accuracy = _accuracy_at(tables, length)
        for criterion in CRITERIA:
            xs, ys = [], []
            for (t, e), acc in accuracy.items():
                value = criteria.get(t, {}).get(e, {}).get(criterion)
                if value is not None:
                    xs.append(value)
                    ys.append(acc)
            rho: float | None = None
            p: float | None = None
            if len(xs) >= 3 and np.ptp(xs) > 0 and np.ptp(ys) > 0:  # else ρ is undefined
                result = stats.spearmanr(xs, ys)
                rho, p = float(result.statistic), float(result.pvalue)
            rows.append({"criterion": criterion, "multiple": multiple, "pairs": len(xs), "rho": rho, "p": p})
    return rows


def markdown(
    plan: Any, tables: dict[str, Any], criteria: Criteria, correlations: list[dict[str, Any]]
) -> str:
    """The trained criteria beside the accuracy at each test length above ``L``, and the rank correlations,
    as markdown."""
    at = {n / plan.base.train_length: _accuracy_at(tables, n) for n in lengths_beyond_l(plan)}
    lines = [
        "## Analysis beside the experiment",
        "",
        "Criteria of the trained encodings (mean over seeds) over the positions of each task's longest "
        "test sequence, beside the mean exact-match accuracy (%):",
        "",
        "| task | encoding | " + " | ".join(CRITERIA) + "".join(f" | acc {m:g}L" for m in at) + " |",
        "|---|---|" + "---:|" * (len(CRITERIA) + len(at)),
    ]
    for t, per_encoding in criteria.items():
        for name, values in per_encoding.items():
            cells = ["—" if values[k] is None else f"{values[k]:.4g}" for k in CRITERIA]
            cells += ["—" if (t, name) not in at[m] else f"{100 * at[m][(t, name)]:.1f}" for m in at]
            lines.append(f"| {t} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "Spearman rank correlation with the mean accuracy over (encoding, task) pairs:", "",
              "| criterion | at | pairs | ρ | p |", "|---|---|---:|---:|---:|"]  # fmt: skip
    for c in correlations:
        rho = "—" if c["rho"] is None else f"{c['rho']:+.2f}"
        p = "—" if c["p"] is None else f"{c['p']:.2g}"
        lines.append(f"| {c['criterion']} | {c['multiple']:g}L | {c['pairs']} | {rho} | {p} |")
    return "\n".join(lines) + "\n"
