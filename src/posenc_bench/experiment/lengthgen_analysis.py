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

The pairs are not independent, and pooled over tasks the correlation follows task difficulty (a hard
task lowers every encoding's accuracy at once, and parameter-free encodings repeat one criterion value
across tasks). The test is therefore **within task**: the statistic is the mean over tasks of the
Spearman ρ between criterion and accuracy among that task's encodings, and its two-sided p-value is
that of a permutation test that permutes the accuracies *within each task* (10 000 permutations,
``(k + 1)/(B + 1)``; Good 2005, stratified permutation tests). The p-values of every criterion × test
length are then Holm-adjusted (Holm 1979): one family of tests per results file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats

from posenc import analysis
from posenc_bench.data import lengthgen as data
from posenc_bench.decoder import CausalDecoder
from posenc_bench.experiment.compare import md_table
from posenc_bench.experiment.stats import holm
from posenc_bench.experiment.trained import encoding_view

PERMUTATIONS = 10_000
"""Within-task permutations drawn for each correlation's p-value."""

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


def _standard_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks (ties averaged), centred and scaled to unit norm: the Spearman ρ of two such vectors is
    their dot product (:func:`_dot`). Sums are exactly rounded (:func:`math.fsum`), so the ranks, and the
    ρ reported, do not depend on the BLAS or the CPU."""
    r = stats.rankdata(values)
    r = r - math.fsum(r) / r.size
    return r / math.sqrt(_dot(r, r))


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``a · b`` exactly rounded (BLAS's dot sums in an order of its own, which can change the last digit)."""
    return math.fsum((a * b).tolist())


def within_task_correlation(
    tasks: list[str], xs: list[float], ys: list[float], *, permutations: int = PERMUTATIONS, seed: int = 0
) -> tuple[float | None, float | None, int]:
    """``(ρ_w, p, tasks used)``: ρ_w the mean over tasks of the within-task Spearman ρ of ``xs`` and
    ``ys`` (pair ``i`` in task ``tasks[i]``; a task counts when it has ≥ 3 pairs and both vary), p the
    two-sided within-task permutation p-value ``(k + 1)/(B + 1)`` of ``|ρ_w|`` (module docstring);
    ``(None, None, 0)`` when no task counts."""
    rng = np.random.default_rng(seed)
    observed, null = [], np.zeros(permutations)
    for t in dict.fromkeys(tasks):
        x = np.array([v for v, u in zip(xs, tasks, strict=True) if u == t], dtype=np.float64)
        y = np.array([v for v, u in zip(ys, tasks, strict=True) if u == t], dtype=np.float64)
        if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        rx, ry = _standard_ranks(x), _standard_ranks(y)
        observed.append(_dot(rx, ry))
        shuffled = rng.permuted(np.tile(np.arange(x.size), (permutations, 1)), axis=1)  # [B, m] orders
        null += ry[shuffled] @ rx
    if not observed:
        return None, None, 0
    k = len(observed)
    rho = math.fsum(observed) / k
    at_least = int(np.count_nonzero(np.abs(null / k) >= abs(rho) - 1e-12))
    return rho, (at_least + 1) / (permutations + 1), k


def rank_correlations(plan: Any, tables: dict[str, Any], criteria: Criteria) -> list[dict[str, Any]]:
    """Per criterion and each of :func:`lengths_beyond_l` (``multiple``: that length over ``L``): the
    pooled Spearman ρ over all (encoding, task) pairs (descriptive: ``rho``), the within-task ρ and its
    permutation p (:func:`within_task_correlation`: ``rho_within``, ``p``, ``tasks``), and ``p_holm``,
    the p Holm-adjusted over every row returned."""
    rows = []
    for length in lengths_beyond_l(plan):
        multiple = length / plan.base.train_length
        accuracy = _accuracy_at(tables, length)
        for criterion in CRITERIA:
            ts, xs, ys = [], [], []
            for (t, e), acc in accuracy.items():
                value = criteria.get(t, {}).get(e, {}).get(criterion)
                if value is not None:
                    ts.append(t)
                    xs.append(value)
                    ys.append(acc)
            rho: float | None = None
            if len(xs) >= 3 and np.ptp(xs) > 0 and np.ptp(ys) > 0:  # else ρ is undefined
                rho = float(stats.spearmanr(xs, ys).statistic)
            within, p, used = within_task_correlation(ts, xs, ys)
            rows.append({"criterion": criterion, "multiple": multiple, "pairs": len(xs), "rho": rho,
                         "tasks": used, "rho_within": within, "p": p})  # fmt: skip
    tested = [r for r in rows if r["p"] is not None]
    for r, adjusted in zip(tested, holm([r["p"] for r in tested]) if tested else [], strict=True):
        r["p_holm"] = float(adjusted)
    for r in rows:
        r.setdefault("p_holm", None)
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
    ]
    pairs = [(t, e) for t in plan.tasks if t in criteria for e in plan.encodings if e in criteria[t]]
    columns = [(k, ["—" if criteria[t][e][k] is None else f"{criteria[t][e][k]:.4g}" for t, e in pairs])
               for k in CRITERIA]  # fmt: skip
    columns += [(f"acc {m:g}L", ["—" if (t, e) not in at[m] else f"{100 * at[m][(t, e)]:.1f}" for t, e in pairs])
                for m in at]  # fmt: skip
    lines += md_table(["task", "encoding"], pairs, columns, numeric=True, width=None)
    lines += ["", "Spearman rank correlation with the mean accuracy: pooled over the (encoding, task) pairs "
              "(descriptive: it follows task difficulty), and within task (the mean of each task's ρ over its "
              "encodings) with the p of a permutation test that permutes accuracies within each task, and that "
              f"p Holm-adjusted over the {sum(c['p'] is not None for c in correlations)} tests of this table:", ""]  # fmt: skip

    def shown(key: str, form: str) -> list[str]:
        return ["—" if c.get(key) is None else format(c[key], form) for c in correlations]

    columns = [("pairs", [str(c["pairs"]) for c in correlations]),
               ("tasks", [str(c.get("tasks", 0)) for c in correlations]),
               ("ρ pooled", shown("rho", "+.2f")), ("ρ within task", shown("rho_within", "+.2f")),
               ("p (within-task permutation)", shown("p", ".2g")), ("p Holm", shown("p_holm", ".2g"))]  # fmt: skip
    lines += md_table(["criterion", "at"], [(c["criterion"], f"{c['multiple']:g}L") for c in correlations],
                      columns, numeric=True, width=None)  # fmt: skip
    return "\n".join(lines) + "\n"
