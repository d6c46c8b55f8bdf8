"""Aggregate finished runs into the comparison table: mean ± std, paired differences, controls, no-skill.

Rows are ``(encoding, scale)``; each metric on test is the mean ± sample std (``ddof=1``) over
all split seeds × seeds. Every row is paired with each reference present — ``sinusoidal`` (the
encoding of Vaswani et al. 2017) and ``none`` (the order-blind control) at the same scale: the
difference in the paired metrics (F1 and AUPRC for the classify task) is computed over the
``(split seed, seed)`` pairs both hold, with the exact sign-flip test, the
Wilcoxon test, the sign-flip p Holm-adjusted over every paired test of the table, and a 95% CI
(Student t over seeds or split means; :func:`posenc_bench.experiment.stats.paired_interval`). Rotary and
bias encodings exist only at ``native`` scale and are compared with the references at each scale.
The time-shuffle control adds the mean drop ``metric(test) − metric(shuffled test)``; baselines
without positional training (the order-free gradient boosting, the matrix profile, the largest
``|value|``) add one row each (mean ± std over splits).

**No-skill row.** ``flag-all`` flags every test window: precision ``p``, recall 1,
F1 ``2p/(1+p)``, AUPRC ``p`` at test prevalence ``p`` (per split; Saito and Rehmsmeier 2015: the
AUPRC of a random score is ``p``). Every other row carries the 95% CI
(:func:`~posenc_bench.experiment.stats.paired_interval`) of ``metric − flag-all`` on the same split;
a metric whose CI does not lie above 0 is marked ``‡`` (not shown better than flagging everything).

Outputs (:func:`write`): ``results.md``, ``results.csv``, ``results.json``, ``results.png``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from posenc import registry
from posenc_bench.experiment import stats
from posenc_bench.experiment.files import write_text_atomic
from posenc_bench.experiment.metrics import METRICS
from posenc_bench.experiment.records import RunRecord, as_record
from posenc_bench.experiment.series_compare import (
    SeriesPaired,
    SeriesRow,
    ci_cell,
    series_markdown,
    series_summary,
)

#: The rows every other row is paired with, in table order: the standard encoding, the order-blind control.
REFERENCES = ("sinusoidal", "none")
BASELINE = "hgb-summary"
NO_SKILL = "flag-all"
PAIRED_METRICS = ("f1", "auprc")
#: How each leaky protocol dealt windows to splits (the results heading says it).
LEAKY_HOW = {
    "random_windows": "windows were dealt to splits at random",
    "dfstrans": "non-overlapping segments were dealt to splits at random, stratified by label",
}
#: Marks a metric whose 95% CI of (metric − flag-all) does not lie above 0.
NOT_ABOVE_NO_SKILL = "‡"


def no_skill_metrics(prevalence: float) -> dict[str, float]:
    """Test metrics of flagging every window at prevalence ``p``: precision p, recall 1, F1 2p/(1+p), AUPRC p."""
    p = float(prevalence)
    if not 0 < p <= 1:
        raise ValueError(f"prevalence must be in (0, 1], got {prevalence!r}")
    return {"precision": p, "recall": 1.0, "f1": 2 * p / (1 + p), "auprc": p}


@dataclass(frozen=True)
class Row:
    """One ``(encoding, scale)`` of the table: ``mean[m]``, ``std[m]`` over ``n`` runs; shuffle drops.

    ``vs_no_skill[m] = (mean, ci_low, ci_high)`` of ``metric − flag-all`` on the same split
    (95% CI of :func:`~posenc_bench.experiment.stats.paired_interval`; ``nan`` bounds from one trained
    run; an untrained baseline on one split is deterministic, its difference exact: ``(d, d, d)``), for
    the paired metrics; ``None`` for the flag-all row itself.
    """

    encoding: str
    scale: str
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    shuffle_drop: dict[str, float] | None = None
    vs_no_skill: dict[str, tuple[float, float, float]] | None = None
    model: str = ""

    def clears_no_skill(self, metric: str) -> bool | None:
        """Whether the 95% CI of ``metric − flag-all`` lies above 0 (``None`` when not computed; ``False``
        when it is undefined, one trained run: nothing shows the row better than flagging everything)."""
        if not self.vs_no_skill or metric not in self.vs_no_skill:
            return None
        low = self.vs_no_skill[metric][1]
        return not math.isnan(low) and low > 0


@dataclass(frozen=True)
class Paired:
    """Paired difference ``encoding − reference`` in ``metric`` at ``scale`` over ``n`` (split, seed) pairs.

    ``ci`` says how the CI was computed and over how many units (``"t, 5 seeds"``); ``p_holm`` is
    ``p_sign_flip`` Holm-adjusted over every paired test of the comparison.
    """

    encoding: str
    scale: str
    metric: str
    reference: str
    n: int
    mean_diff: float
    ci_low: float
    ci_high: float
    p_sign_flip: float
    p_wilcoxon: float
    min_p: float
    model: str = ""
    ci: str = ""
    p_holm: float = float("nan")


@dataclass(frozen=True)
class Comparison:
    """The table: model rows, then baseline rows, then the no-skill row; paired tests; every record."""

    rows: list[Row]
    paired: list[Paired]
    runs: list[RunRecord]
    baseline: list[RunRecord]
    test_splits: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] = METRICS
    paired_metrics: tuple[str, ...] = PAIRED_METRICS
    no_skill: list[RunRecord] = field(default_factory=list)
    series_rows: list[SeriesRow] = field(default_factory=list)
    series_paired: list[SeriesPaired] = field(default_factory=list)


def _std(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if values.size > 1 else float("nan")


def _vs_no_skill(
    records: Sequence[RunRecord], metrics: Sequence[str], no_skill: Mapping[int, Mapping[str, float]]
) -> dict[str, tuple[float, float, float]]:
    out = {}
    for m in metrics:
        by_split: dict[int, list[float]] = {}
        for r in records:
            if r.split_seed in no_skill and m in no_skill[r.split_seed]:
                by_split.setdefault(r.split_seed, []).append(r.test[m] - no_skill[r.split_seed][m])
        if by_split:
            d = np.concatenate([np.asarray(v) for v in by_split.values()])
            if d.size == 1 and all(r.kind == "baseline" for r in records):  # untrained: exact given the split
                out[m] = (float(d[0]), float(d[0]), float(d[0]))
                continue
            interval = stats.paired_interval(list(by_split.values()))
            out[m] = (float(d.mean()), interval.low, interval.high)
    return out


def _row(
    encoding: str,
    scale: str,
    records: Sequence[RunRecord],
    metrics: Sequence[str],
    paired_metrics: Sequence[str],
    no_skill: Mapping[int, Mapping[str, float]] | None,
    model: str = "",
) -> Row:
    values = {m: np.array([r.test[m] for r in records], dtype=np.float64) for m in metrics}
    drop = None
    shuffled = [r.shuffled_test for r in records]
    if records and all(s is not None for s in shuffled):
        drop = {
            m: float(np.mean([r.test[m] - s[m] for r, s in zip(records, shuffled) if s is not None]))
            for m in paired_metrics
        }
    vs = _vs_no_skill(records, paired_metrics, no_skill) if no_skill is not None else None
    return Row(
        encoding,
        scale,
        len(records),
        {m: float(v.mean()) for m, v in values.items()},
        {m: _std(v) for m, v in values.items()},
        drop,
        vs,
        model,
    )


def _paired(
    encoding: str,
    scale: str,
    metric: str,
    mine: list[RunRecord],
    reference: str,
    ref: list[RunRecord],
    model: str = "",
) -> Paired | None:
    ref_by_pair = {(r.split_seed, r.seed): r.test[metric] for r in ref}
    by_split: dict[int, list[float]] = {}
    for r in mine:
        pair = (r.split_seed, r.seed)
        if pair in ref_by_pair:
            by_split.setdefault(r.split_seed, []).append(r.test[metric] - ref_by_pair[pair])
    if not by_split:
        return None
    d = np.concatenate([np.asarray(v) for v in by_split.values()])
    interval = stats.paired_interval(list(by_split.values()))
    return Paired(
        encoding,
        scale,
        metric,
        reference,
        d.size,
        float(d.mean()),
        interval.low,
        interval.high,
        stats.sign_flip_p(d),
        stats.wilcoxon_p(d),
        stats.min_attainable_p(d.size),
        model,
        interval.describe(),
    )


def _test_splits(runs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    splits: dict[int, dict[str, Any]] = {}
    for r in runs:
        size = r.test_split
        if size is None:
            raise ValueError(
                f"run record {r.name}/{r.scale} split {r.split_seed} seed {r.seed} lacks the test split's "
                "size (test_windows, test_positive_windows, test_events)"
            )
        splits.setdefault(
            r.split_seed,
            {
                "split_seed": r.split_seed,
                "test_windows": size.windows,
                "test_positive_windows": size.positive_windows,
                "test_events": size.events,
                "test_events_in_train": size.events_in_train or 0,
            },
        )
    return [splits[k] for k in sorted(splits)]


Record = RunRecord | Mapping[str, Any]
"""A :class:`RunRecord`, or its JSON object (``metrics.json`` contents)."""


def _flag_all_records(
    test_splits: Sequence[Mapping[str, Any]], no_skill: Sequence[Record] | None
) -> list[RunRecord]:
    """The flag-all records: ``no_skill`` as records, or, when ``None``, one per test split with windows
    and positives, from its prevalence (:func:`no_skill_metrics`)."""
    if no_skill is None:
        no_skill = [
            RunRecord(
                "no-skill", s["split_seed"], no_skill_metrics(s["test_positive_windows"] / s["test_windows"])
            )
            for s in test_splits
            if s["test_windows"] and s["test_positive_windows"]
        ]
    return [as_record(r, kind="no-skill") for r in no_skill]


Groups = dict[tuple[str, str, str], list[RunRecord]]
"""Trained records by ``(model, encoding, scale)``, in first-seen order."""


def _groups(records: Sequence[RunRecord]) -> Groups:
    groups: Groups = {}
    for r in records:  # "detector" names the model of a detect run (one table section per model)
        groups.setdefault((r.detector or "", r.encoding, r.scale or ""), []).append(r)
    return groups


def _paired_with(
    groups: Groups, reference: str, model: str, scale: str, paired_metrics: Sequence[str]
) -> list[Paired]:
    """Every encoding of ``model`` against ``reference`` at ``scale``, for each paired metric."""
    ref = groups.get((model, reference, scale))
    if ref is None:
        return []
    out = []
    for encoding in dict.fromkeys(e for _, e, _ in groups):
        # encodings without scale policies (rotary, biases) are compared as defined at every scale
        mine = groups.get((model, encoding, scale if registry.get(encoding).scales else "native"))
        if encoding == reference or mine is None:
            continue
        for metric in paired_metrics:
            result = _paired(encoding, scale, metric, mine, reference, ref, model)
            if result is not None:
                out.append(result)
    return out


def _paired_tests(groups: Groups, paired_metrics: Sequence[str]) -> list[Paired]:
    """The paired tests of every reference, model and scale, with ``p_holm`` over all of them."""
    models = list(dict.fromkeys(m for m, _, _ in groups))
    scales = list(dict.fromkeys(s for _, _, s in groups))
    paired = [
        test
        for reference in REFERENCES
        for model in models
        for scale in scales
        for test in _paired_with(groups, reference, model, scale, paired_metrics)
    ]
    adjusted: list[float] = stats.holm([t.p_sign_flip for t in paired]).tolist() if paired else []
    return [replace(t, p_holm=float(h)) for t, h in zip(paired, adjusted, strict=True)]


def _by_name(baselines: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    by_name: dict[str, list[RunRecord]] = {}
    for b in baselines:
        by_name.setdefault(b.name or BASELINE, []).append(b)
    return by_name


def compare(
    runs: Sequence[Record],
    *,
    baseline: Sequence[Record] = (),
    metrics: Sequence[str] = METRICS,
    paired_metrics: Sequence[str] = PAIRED_METRICS,
    no_skill: Sequence[Record] | None = None,
) -> Comparison:
    """Build the :class:`Comparison` of run records and baseline records.

    Args:
        runs: one record per trained run (:class:`~posenc_bench.experiment.records.RunRecord` of kind
            ``"model"``, or its JSON object): encoding, scale, split seed, seed, test metrics,
            optionally shuffled-test metrics, and the test split's size.
        baseline: records of untrained baselines (kind ``"baseline"``; an unnamed one is
            ``hgb-summary``); one row per name.
        metrics: the columns; ``paired_metrics`` those tested against the reference and flag-all.
        no_skill: flag-all records per split (kind ``"no-skill"``); ``None``: computed from the
            test prevalence with :func:`no_skill_metrics` (window classification).
    """
    metrics, paired_metrics = tuple(metrics), tuple(paired_metrics)
    records = [as_record(r) for r in runs]
    baselines = [as_record(b, kind="baseline") for b in baseline]
    test_splits = _test_splits(records)
    flag_all_records = _flag_all_records(test_splits, no_skill)
    flag_all = {r.split_seed: r.test for r in flag_all_records}
    groups = _groups(records)
    rows = [_row(e, s, rs, metrics, paired_metrics, flag_all, m) for (m, e, s), rs in groups.items()]
    paired = _paired_tests(groups, paired_metrics)
    by_name = _by_name(baselines)
    for name, named in by_name.items():
        rows.append(
            _row(name, "-", named, [m for m in metrics if m in named[0].test], paired_metrics, flag_all)
        )
    if flag_all_records:
        first = flag_all_records[0].test
        rows.append(_row(NO_SKILL, "-", flag_all_records, [m for m in metrics if m in first], (), None))
    # per-series rows are named by encoding, "encoding (scale)" away from native scale
    trained = {(m, e if s in ("native", "") else f"{e} ({s})"): rs for (m, e, s), rs in groups.items()}
    series_rows, series_paired = series_summary(
        trained, {**by_name, NO_SKILL: flag_all_records} if flag_all_records else by_name, REFERENCES
    )
    return Comparison(
        rows,
        paired,
        records,
        baselines,
        test_splits,
        metrics=metrics,
        paired_metrics=paired_metrics,
        no_skill=flag_all_records,
        series_rows=series_rows,
        series_paired=series_paired,
    )


def from_json(text: str) -> Comparison:
    """Rebuild a :class:`Comparison` from a ``results.json`` (recomputing rows, tests and the no-skill row).

    Older files without ``metrics``/``no_skill`` are read with the classify task's metrics;
    their metadata are kept.
    """
    data = json.loads(text)
    comparison = compare(
        data["runs"],
        baseline=data.get("baseline", []),
        metrics=data.get("metrics", METRICS),
        paired_metrics=data.get("paired_metrics", PAIRED_METRICS),
        no_skill=data.get("no_skill") or None,
    )
    comparison.meta.update(data.get("meta", {}))
    return comparison


def _pm(mean: float, std: float) -> str:
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


#: Column titles of metric names (others are shown as they are).
LABELS = {
    "precision": "precision",
    "recall": "recall",
    "f1": "F1",
    "auprc": "AUPRC",
    "event_precision": "event precision",
    "event_recall": "event recall",
    "event_f1": "event F1",
    "pa_f1": "point-adjusted F1 (inflated)",
}


def _label(metric: str) -> str:
    if ":" in metric:  # per-family metric "auprc:spike"
        name, family = metric.split(":", 1)
        return f"{LABELS.get(name, name)} {family}"
    return LABELS.get(metric, metric)


def _cell(row: Row, metric: str) -> str:
    if metric not in row.mean:
        return "—"
    mark = f" {NOT_ABOVE_NO_SKILL}" if row.clears_no_skill(metric) is False else ""
    return _pm(row.mean[metric], row.std[metric]) + mark


WIDTH = 100
"""Widest table line of the Markdown (which the command line prints): wider tables are split."""


def md_table(
    keys: Sequence[str],
    key_rows: Sequence[Sequence[str]],
    columns: Sequence[tuple[str, Sequence[str]]],
    *,
    numeric: bool = False,
    width: int | None = WIDTH,
) -> list[str]:
    """Markdown table lines: the ``keys`` columns, then ``columns`` (title, cells), split into several
    tables that each repeat the ``keys`` columns when one would be wider than ``width`` characters (``None``:
    one table); ``numeric`` right-aligns the ``columns`` (``---:``)."""

    def wide(titles: Sequence[str], cells: Sequence[Sequence[str]]) -> int:
        lines = [titles, *cells]
        return max(sum(len(c) + 3 for c in line) + 1 for line in lines)

    groups: list[list[int]] = [[]]
    for j in range(len(columns)):
        trial = groups[-1] + [j]
        titles = [*keys, *(columns[i][0] for i in trial)]
        cells = [[*k, *(columns[i][1][r] for i in trial)] for r, k in enumerate(key_rows)]
        if groups[-1] and width is not None and wide(titles, cells) > width:
            groups.append([j])
        else:
            groups[-1] = trial
    lines: list[str] = []
    for group in groups:
        if lines:
            lines.append("")
        lines.append("| " + " | ".join([*keys, *(columns[i][0] for i in group)]) + " |")
        lines.append("|" + "---|" * len(keys) + ("---:|" if numeric else "---|") * len(group))
        lines += [
            "| " + " | ".join([*k, *(columns[i][1][r] for i in group)]) + " |" for r, k in enumerate(key_rows)
        ]
    return lines


#: What each column of the tables means (the legend under the table, for the metrics present).
LEGEND = {
    "n": "n: runs averaged (split seeds × seeds; for a baseline, splits)",
    "precision": "precision, recall, F1: of the test windows flagged at the threshold chosen on validation",
    "auprc": "AUPRC: area under the precision-recall curve of the test scores (average precision)",
    "family": "AUPRC <family>: AUPRC of the positive windows of that event family against all negative windows",
    "event_precision": "event precision, recall, F1: an event counts as found when any of its steps is flagged; "
    "each run of flagged normal steps is one false positive",
    "pa_f1": "point-adjusted F1 (inflated): step-wise F1 after marking every step of a found event as flagged",
    "shuffle": "shuffle Δ<metric>: mean of metric(test) − metric(test with each window's time steps shuffled); "
    "near 0: the model does not use the order of steps",
}


def _legend(metrics: Sequence[str], paired_metrics: Sequence[str]) -> str:
    keys = ["n", *(m for m in ("precision", "auprc", "event_precision", "pa_f1") if m in metrics)]
    keys += ["family"] if any(":" in m for m in metrics) else []
    keys += ["shuffle"] if paired_metrics else []
    return "Columns — " + "; ".join(LEGEND[k] for k in keys) + ". ± is the standard deviation over runs."


def _main_table(comparison: Comparison, with_model: bool) -> list[str]:
    """One row per (encoding, scale), baselines and flag-all: the metrics, then the shuffle drops."""
    metrics, paired_metrics = comparison.metrics, comparison.paired_metrics
    keys = [*(["model"] if with_model else []), "encoding", "scale", "n"]
    key_rows = [
        [*([r.model or "—"] if with_model else []), r.encoding, r.scale, str(r.n)] for r in comparison.rows
    ]
    drops = [r.shuffle_drop or {} for r in comparison.rows]
    columns = [(_label(m), [_cell(r, m) for r in comparison.rows]) for m in metrics] + [
        (f"shuffle Δ{_label(m)}", [f"{d[m]:+.3f}" if m in d else "—" for d in drops]) for m in paired_metrics
    ]
    return md_table(keys, key_rows, columns)


def _row_name(row: Row) -> str:
    """``[model ]encoding[ (scale)]``: the scale only away from ``native`` (and ``-`` for baselines)."""
    name = row.encoding if row.scale in ("-", "native") else f"{row.encoding} ({row.scale})"
    return (f"{row.model} " if row.model else "") + name


def _no_skill_note(comparison: Comparison) -> str:
    """What flag-all does, what ``‡`` means, and which rows carry it per paired metric."""
    what = (
        f"`{NO_SKILL}` flags every test step: event recall 1, one false positive per stretch of normal steps "
        "between events, window AUPRC = window prevalence, computed by the same metric code. "
        if "event_f1" in comparison.metrics
        else f"`{NO_SKILL}` flags every test window (precision p, recall 1, F1 2p/(1+p), AUPRC p at test "
        "prevalence p, per split). "
    )
    marks = []
    for m in comparison.paired_metrics:
        marked = [_row_name(r) for r in comparison.rows if r.clears_no_skill(m) is False]
        marks.append(
            f"{_label(m)}: not above `{NO_SKILL}`: {', '.join(marked)}."
            if marked
            else f"{_label(m)}: every row is above `{NO_SKILL}`."
        )
    return (
        what + f"{NOT_ABOVE_NO_SKILL} on a metric: the 95% CI (as for the paired differences below) of "
        f"that metric − `{NO_SKILL}` on the same split does not lie above 0, or cannot be computed (one "
        "trained run) — not shown better than flagging everything. " + " ".join(marks)
    )


def _paired_section(tests: Sequence[Paired], reference: str, with_model: bool) -> list[str]:
    """The heading and table of the paired differences against ``reference``."""
    lines = [
        "",
        f"Paired differences against `{reference}` at the same scale "
        "(encoding − reference, over (split, seed) pairs):",
        "",
    ]
    return lines + md_table(
        [*(["model"] if with_model else []), "encoding", "scale", "metric", "pairs"],
        [[*([t.model or "—"] if with_model else []), t.encoding, t.scale, t.metric, str(t.n)] for t in tests],
        [
            ("mean diff", [f"{t.mean_diff:+.4f}" for t in tests]),
            ("95% CI", [ci_cell(t.ci_low, t.ci_high) for t in tests]),
            ("CI by", [t.ci for t in tests]),
            ("p sign-flip (exact)", [_p(t.p_sign_flip) for t in tests]),
            ("p Holm", [_p(t.p_holm) for t in tests]),
            ("p Wilcoxon", [_p(t.p_wilcoxon) for t in tests]),
            ("min attainable p", [f"{t.min_p:.3g}" for t in tests]),
        ],
    )


def _split_text(s: Mapping[str, Any]) -> str:
    leaky = f" ({s['test_events_in_train']} also in training: LEAKY)" if s.get("test_events_in_train") else ""
    return (
        f"split {s['split_seed']}: {s['test_windows']} windows, {s['test_positive_windows']} positive, "
        f"{s['test_events']} events" + leaky
    )


def _leaky_banner(meta: Mapping[str, Any]) -> list[str]:
    """The bold warning above a classify table whose split protocol is not ``blocked`` (nothing otherwise)."""
    hyper = meta.get("hyperparameters", {})
    protocol = hyper.get("protocol", "blocked")
    if protocol == "blocked" or hyper.get("task", "classify") != "classify":
        return []
    dealt = LEAKY_HOW.get(protocol, "windows were dealt to splits at random")
    return [
        f"**LEAKY split protocol `{protocol}`: {dealt}, so training and test windows share "
        "series, time steps or events. These scores measure leakage, not generalisation.**",
        "",
    ]


def _wall_line(meta: Mapping[str, Any]) -> list[str]:
    """Where and how long the invocation ran (nothing when ``meta`` does not say)."""
    if "wall_seconds" not in meta:
        return []
    environment = (
        f", NumPy {meta['environment']['numpy']}, CPU {meta['environment']['cpu']}."
        if "environment" in meta
        else "."
    )
    return [
        "",
        f"Wall time {meta['wall_seconds']:.1f} s ({meta['runs_trained']} runs trained, "
        f"{meta['runs_skipped']} skipped) on {meta['device']} × {meta['world_size']} process(es), "
        f"{meta['cpu_count']} CPUs, {meta['torch_threads']} torch threads, {meta['platform']}, "
        f"torch {meta['torch']}" + environment,
    ]


def markdown(comparison: Comparison) -> str:
    """The table as Markdown: one row per (encoding, scale), baselines, flag-all; paired tests; test splits.

    Tables wider than :data:`WIDTH` characters are split into several that repeat the row names, and a
    legend says what each column holds.
    """
    with_model = any(r.model for r in comparison.rows)
    meta = comparison.meta
    lines = [
        *_leaky_banner(meta),
        *series_markdown(comparison.series_rows, comparison.series_paired),
        *_main_table(comparison, with_model),
        "",
        _legend(comparison.metrics, comparison.paired_metrics),
        "",
        _no_skill_note(comparison),
    ]
    for reference in REFERENCES:
        tests = [t for t in comparison.paired if t.reference == reference]
        if tests:
            lines += _paired_section(tests, reference, with_model)
    lines += ["", "Test splits: " + "; ".join(_split_text(s) for s in comparison.test_splits)]
    lines += ["", "mean ± std over split seeds × seeds (ddof=1). " + stats.METHOD_NOTE]
    if meta.get("notes"):
        lines += [""] + list(meta["notes"])
    lines += _wall_line(meta)
    return "\n".join(lines) + "\n"


_PAIRED_FIELDS = ("mean", "ci_low", "ci_high", "p_sign_flip", "p_holm", "p_wilcoxon")


def _csv_header(metrics: Sequence[str], paired_metrics: Sequence[str]) -> list[str]:
    return (
        ["model", "encoding", "scale", "n"]
        + [f"{m}_{k}" for m in metrics for k in ("mean", "std")]
        + [f"shuffle_drop_{m}" for m in paired_metrics]
        + [f"{m}_minus_{NO_SKILL}_{k}" for m in paired_metrics for k in ("mean", "ci_low", "ci_high")]
        + [f"{m}_minus_{ref}_{k}" for ref in REFERENCES for m in paired_metrics for k in _PAIRED_FIELDS]
    )


def _csv_cells(
    row: Row,
    metrics: Sequence[str],
    paired_metrics: Sequence[str],
    tests: Mapping[tuple[str, str, str, str, str], Paired],
) -> list[Any]:
    """One row's cells, in :func:`_csv_header`'s order (empty where a value does not exist)."""
    drop = row.shuffle_drop or {}
    vs = row.vs_no_skill or {}
    cells: list[Any] = [row.model, row.encoding, row.scale, row.n]
    cells += [v for m in metrics for v in ((row.mean[m], row.std[m]) if m in row.mean else ("", ""))]
    cells += [drop.get(m, "") for m in paired_metrics]
    cells += [v for m in paired_metrics for v in vs.get(m, ("", "", ""))]
    for ref, m in ((ref, m) for ref in REFERENCES for m in paired_metrics):
        t = tests.get((ref, row.model, row.encoding, row.scale, m))
        cells += [t.mean_diff, t.ci_low, t.ci_high, t.p_sign_flip, t.p_holm, t.p_wilcoxon] if t else [""] * 6
    return cells


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """``rows`` (the header first) as CSV text (:mod:`csv`'s default dialect: ``\\r\\n`` line ends)."""
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue()


def _csv(comparison: Comparison) -> str:
    metrics, paired_metrics = comparison.metrics, comparison.paired_metrics
    tests = {(t.reference, t.model, t.encoding, t.scale, t.metric): t for t in comparison.paired}
    return csv_text(
        [_csv_header(metrics, paired_metrics)]
        + [_csv_cells(r, metrics, paired_metrics, tests) for r in comparison.rows]
    )


def _series_csv(comparison: Comparison) -> str:
    """The per-series section: one line per row (``kind=row``) and per paired test (``kind=paired``)."""
    header = [
        "kind",
        "model",
        "row",
        "reference",
        "metric",
        "series",
        "runs",
        "value",
        "wins",
        "ties",
        "losses",
    ]
    rows: list[list[Any]] = [header + ["ci_low", "ci_high", "ci", "p_wilcoxon", "p_holm"]]
    for r in comparison.series_rows:
        rows += [
            ["row", r.model, r.name, "", m, r.n_series, r.n_runs, v] + [""] * 8 for m, v in r.mean.items()
        ]
    for t in comparison.series_paired:
        rows.append(
            ["paired", t.model, t.name, t.reference, t.metric, t.n_series, "", t.mean_diff]
            + [t.wins, t.ties, t.losses, t.ci_low, t.ci_high, t.ci, t.p_wilcoxon, t.p_holm]
        )
    return csv_text(rows)


def to_json(comparison: Comparison) -> str:
    """Everything, including every run's record, as JSON (NaN written as ``null``)."""

    def clean(obj: Any) -> Any:
        if isinstance(obj, float) and math.isnan(obj):
            return None
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [clean(v) for v in obj]
        return obj

    payload: dict[str, Any] = {}
    for f in fields(comparison):
        value = getattr(comparison, f.name)
        if f.name in ("runs", "baseline", "no_skill"):
            value = [r.to_json() for r in value]
        elif f.name in ("rows", "paired", "series_rows", "series_paired"):
            value = [asdict(item) for item in value]
        payload[f.name] = value
    return json.dumps(clean(payload), indent=2, allow_nan=False)


def write(comparison: Comparison, out: Path, *, stem: str = "results") -> dict[str, Path]:
    """Write ``STEM.md``, ``STEM.csv``, ``STEM.json`` and the plot ``STEM.png`` into ``out``; return their paths."""
    from posenc_bench.experiment.figures import comparison_plot

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {ext: out / f"{stem}.{ext}" for ext in ("md", "csv", "json", "png")}
    write_text_atomic(paths["md"], markdown(comparison))
    write_text_atomic(paths["csv"], _csv(comparison))
    if comparison.series_rows:
        paths["series.csv"] = out / f"{stem}-series.csv"
        write_text_atomic(paths["series.csv"], _series_csv(comparison))
    write_text_atomic(paths["json"], to_json(comparison))
    comparison_plot(comparison, paths["png"])
    return paths


def rewrite(folder: Path, *, stem: str = "results") -> dict[str, Path]:
    """Recompute ``folder/STEM.{md,csv,json,png}`` from the records in ``folder/STEM.json`` (no training)."""
    folder = Path(folder)
    return write(from_json((folder / f"{stem}.json").read_text(encoding="utf-8")), folder, stem=stem)
