"""Encodings compared series by series: per-series means, wins/ties/losses, Wilcoxon across series.

The unit of replication is the series (:mod:`posenc_bench.experiment.series`): a dataset of ``S``
series trained with ``N`` seeds gives ``S`` paired observations of an encoding's effect, not
``N`` pooled ones. For a row ``A`` (an encoding, or an untrained baseline) against a reference
``B`` in ``metric``:

* per series ``s`` the differences ``d_{s,k} = A_{s,k} − B_{s,k}`` over the runs ``k`` both hold
  (same split seed and seed; an untrained reference has one value per split, paired with every
  seed), and their mean ``m_s``;
* **wins/ties/losses**: series with ``m_s > 0`` / ``|m_s| ≤ 1e-9`` / ``m_s < 0``;
* **Wilcoxon signed-rank** of ``m_1 … m_S`` (two-sided, :func:`posenc_bench.experiment.stats.wilcoxon_p`),
  and its Holm adjustment over every per-series test of the table (:func:`~posenc_bench.experiment.stats.holm`);
* **95% CI** of the mean difference (:func:`posenc_bench.experiment.stats.paired_interval`): the two-stage
  bootstrap (series with replacement, then each drawn series' runs) from 30 series of 2+ runs up, else
  the Student t interval of the ``S`` per-series means (``S − 1`` degrees of freedom).

The rows' values are the mean over series of each series' mean over runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from posenc_bench.experiment import stats
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.series import SERIES_METRICS

#: ``|m_s|`` at or below this counts as a tie (equal up to rounding).
TIE = 1e-9

#: One paragraph stating the per-series tests, for result tables.
SERIES_NOTE = (
    "Per series: each series (channel, machine, file) scored on its own; values are the mean over series "
    "of each series' mean over runs. W/T/L: series where the row's mean beats / ties (|Δ| ≤ 1e-9) / "
    "loses to the reference's; p: Wilcoxon signed-rank across series of the per-series mean differences, "
    "p Holm: Holm-adjusted over every per-series test of this table; 95% CI: two-stage bootstrap (series, "
    "then runs within a series; percentile) from 30 series of 2+ runs up, else Student t over the per-series "
    "means (n − 1 degrees of freedom); CI by: the method and its n."
)

Key = tuple[int, int | None]
"""A run's ``(split seed, seed)``; ``seed`` ``None`` for an untrained row."""


@dataclass(frozen=True)
class SeriesRow:
    """A row's per-series means: ``mean[metric]`` over ``n_series`` series of ``n_runs`` runs."""

    model: str
    name: str
    n_series: int
    n_runs: int
    mean: dict[str, float]


@dataclass(frozen=True)
class SeriesPaired:
    """``name − reference`` in ``metric`` over ``n_series`` series (module docstring)."""

    model: str
    name: str
    reference: str
    metric: str
    n_series: int
    wins: int
    ties: int
    losses: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_wilcoxon: float
    ci: str = ""
    p_holm: float = float("nan")


def _values(records: Sequence[RunRecord], metric: str) -> dict[str, dict[Key, float]]:
    """``series → (split seed, seed) → value``."""
    out: dict[str, dict[Key, float]] = {}
    for r in records:
        key = (r.split_seed, r.seed if r.kind == "model" else None)
        for name, v in r.per_series(metric).items():
            out.setdefault(name, {})[key] = v
    return out


def _row(model: str, name: str, records: Sequence[RunRecord]) -> SeriesRow | None:
    mean = {}
    n_series = 0
    for metric in SERIES_METRICS:
        per = _values(records, metric)
        if per:
            mean[metric] = float(np.mean([np.mean(list(v.values())) for v in per.values()]))
            n_series = max(n_series, len(per))
    return SeriesRow(model, name, n_series, len(records), mean) if mean else None


def _differences(
    mine: Mapping[str, Mapping[Key, float]], ref: Mapping[str, Mapping[Key, float]]
) -> list[np.ndarray]:
    """Per series both hold, the paired differences of its runs (module docstring)."""
    out = []
    for name in sorted(set(mine) & set(ref)):
        theirs = ref[name]
        d = [
            v - theirs[key] if key in theirs else v - theirs[(key[0], None)]
            for key, v in mine[name].items()
            if key in theirs or (key[0], None) in theirs
        ]
        if d:
            out.append(np.asarray(d, dtype=np.float64))
    return out


def paired(
    model: str, name: str, mine: Sequence[RunRecord], reference: str, ref: Sequence[RunRecord], metric: str
) -> SeriesPaired | None:
    """``name − reference`` per series in ``metric`` (module docstring); ``None`` when no series is shared."""
    groups = _differences(_values(mine, metric), _values(ref, metric))
    if not groups:
        return None
    means = np.array([g.mean() for g in groups])
    interval = stats.paired_interval(groups, units=("series", "runs"))
    return SeriesPaired(
        model,
        name,
        reference,
        metric,
        len(groups),
        int((means > TIE).sum()),
        int((np.abs(means) <= TIE).sum()),
        int((means < -TIE).sum()),
        float(means.mean()),
        interval.low,
        interval.high,
        stats.wilcoxon_p(means),
        interval.describe(),
    )


def series_summary(
    trained: Mapping[tuple[str, str], Sequence[RunRecord]],
    untrained: Mapping[str, Sequence[RunRecord]],
    references: Sequence[str],
) -> tuple[list[SeriesRow], list[SeriesPaired]]:
    """Rows and paired tests of every trained ``(model, encoding)`` group and untrained row that has per-series scores.

    Each trained group is paired with the trained ``references`` of its model and with every
    untrained row (baselines, flag-all).
    """
    rows = [row for (m, e), rs in trained.items() if (row := _row(m, e, rs)) is not None]
    rows += [row for name, rs in untrained.items() if (row := _row("", name, rs)) is not None]
    tests = []
    for (model, encoding), records in trained.items():
        against = [(r, trained[model, r]) for r in references if r != encoding and (model, r) in trained]
        against += [(name, rs) for name, rs in untrained.items()]
        for reference, ref in against:
            for metric in SERIES_METRICS:
                result = paired(model, encoding, records, reference, ref, metric)
                if result is not None:
                    tests.append(result)
    adjusted: list[float] = stats.holm([t.p_wilcoxon for t in tests]).tolist() if tests else []
    return rows, [replace(t, p_holm=float(h)) for t, h in zip(tests, adjusted, strict=True)]


def _p(p: float) -> str:
    return "n/a" if np.isnan(p) else f"{p:.3g}"


def ci_cell(low: float, high: float) -> str:
    """``[low, high]`` of an interval for a table cell (4 decimals, signed); ``n/a`` when undefined."""
    return "n/a" if np.isnan(low) else f"[{low:+.4f}, {high:+.4f}]"


def series_markdown(rows: Sequence[SeriesRow], tests: Sequence[SeriesPaired]) -> list[str]:
    """The per-series section of a results table (lines of Markdown; empty without per-series scores)."""
    if not rows:
        return []
    with_model = any(r.model for r in rows)
    head = "| model " if with_model else ""
    lines = [
        "## Per series (the unit of replication)",
        "",
        head + "| row | series | runs | mean per-series AUPRC | mean per-series VUS-PR |",
        "|---|---|---|---|---|" + "---|" * with_model,
    ]
    for r in rows:
        cells = " | ".join(f"{r.mean[m]:.3f}" if m in r.mean else "—" for m in SERIES_METRICS)
        lines.append(
            (f"| {r.model or '—'} " if with_model else "")
            + f"| {r.name} | {r.n_series} | {r.n_runs} | {cells} |"
        )
    if tests:
        lines += [
            "",
            "Paired per series (row − reference):",
            "",
            head
            + "| row | reference | metric | series | W/T/L | mean diff | 95% CI | CI by | p Wilcoxon | p Holm |",
            "|---|---|---|---|---|---|---|---|---|---|" + "---|" * with_model,
        ]
        for t in tests:
            lines.append(
                (f"| {t.model} " if with_model else "")
                + f"| {t.name} | {t.reference} | {t.metric} | {t.n_series} | {t.wins}/{t.ties}/{t.losses} | "
                f"{t.mean_diff:+.4f} | {ci_cell(t.ci_low, t.ci_high)} | {t.ci} | {_p(t.p_wilcoxon)} | {_p(t.p_holm)} |"
            )
    lines += ["", SERIES_NOTE, "", "## Pooled over series", ""]
    return lines
