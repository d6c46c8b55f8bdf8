"""Aggregate finished runs into the comparison table: mean ± std, paired differences, controls.

Rows are ``(encoding, scale)``; each metric (precision, recall, F1, AUPRC on test) is the
mean ± sample std (``ddof=1``) over all split seeds × seeds. For every row other than the
reference (``sinusoidal`` at the same scale) the paired difference in F1 and AUPRC is
computed over the ``(split seed, seed)`` pairs both hold, with the exact sign-flip test, the
Wilcoxon test and a two-stage bootstrap 95% CI (:mod:`posenc.experiment.stats`). Rotary and
bias encodings exist only at ``native`` scale and are compared with the reference at each scale.
The time-shuffle control adds the mean drop ``metric(test) − metric(shuffled test)``; the
order-free baseline adds one row (mean ± std over splits).

Outputs (:func:`write`): ``results.md``, ``results.csv``, ``results.json``, ``results.png``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from posenc import registry
from posenc.experiment import stats
from posenc.experiment.files import write_text_atomic
from posenc.experiment.metrics import METRICS

REFERENCE = "sinusoidal"
BASELINE = "hgb-summary"
PAIRED_METRICS = ("f1", "auprc")


@dataclass(frozen=True)
class Row:
    """One ``(encoding, scale)`` of the table: ``mean[m]``, ``std[m]`` over ``n`` runs; shuffle drops."""

    encoding: str
    scale: str
    n: int
    mean: dict[str, float]
    std: dict[str, float]
    shuffle_drop: dict[str, float] | None = None


@dataclass(frozen=True)
class Paired:
    """Paired difference ``encoding − reference`` in ``metric`` at ``scale`` over ``n`` (split, seed) pairs."""

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


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    paired: list[Paired]
    runs: list[dict[str, Any]]
    baseline: list[dict[str, Any]]
    test_splits: list[dict[str, int]]
    meta: dict[str, Any] = field(default_factory=dict)


def _std(values: np.ndarray) -> float:
    return float(np.std(values, ddof=1)) if values.size > 1 else float("nan")


def _row(encoding: str, scale: str, runs: list[dict[str, Any]]) -> Row:
    values = {m: np.array([r["test"][m] for r in runs]) for m in METRICS}
    drop = None
    if all("shuffled_test" in r for r in runs):
        drop = {m: float(np.mean([r["test"][m] - r["shuffled_test"][m] for r in runs])) for m in PAIRED_METRICS}
    return Row(encoding, scale, len(runs), {m: float(v.mean()) for m, v in values.items()},
               {m: _std(v) for m, v in values.items()}, drop)


def _paired(encoding: str, scale: str, metric: str, mine: list[dict], ref: list[dict]) -> Paired | None:
    ref_by_pair = {(r["split_seed"], r["seed"]): r["test"][metric] for r in ref}
    by_split: dict[int, list[float]] = {}
    for r in mine:
        pair = (r["split_seed"], r["seed"])
        if pair in ref_by_pair:
            by_split.setdefault(r["split_seed"], []).append(r["test"][metric] - ref_by_pair[pair])
    if not by_split:
        return None
    d = np.concatenate([np.asarray(v) for v in by_split.values()])
    lo, hi = stats.two_stage_bootstrap_ci(list(by_split.values()))
    return Paired(encoding, scale, metric, REFERENCE, d.size, float(d.mean()), lo, hi,
                  stats.sign_flip_p(d), stats.wilcoxon_p(d), stats.min_attainable_p(d.size))


def compare(runs: Sequence[dict[str, Any]], *, baseline: Sequence[dict[str, Any]] = ()) -> Comparison:
    """Build the :class:`Comparison` of run records (``metrics.json`` contents) and baseline records."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault((r["encoding"], r["scale"]), []).append(r)
    rows = [_row(e, s, rs) for (e, s), rs in groups.items()]
    scales = list(dict.fromkeys(s for _, s in groups))
    encodings = list(dict.fromkeys(e for e, _ in groups))
    paired = []
    for scale in scales:
        ref = groups.get((REFERENCE, scale))
        if ref is None:
            continue
        for encoding in encodings:
            # rotary/bias encodings have no scale policy: compared as defined at every scale
            mine = groups.get((encoding, scale if registry.get(encoding).family == "input" else "native"))
            if encoding == REFERENCE or mine is None:
                continue
            for metric in PAIRED_METRICS:
                result = _paired(encoding, scale, metric, mine, ref)
                if result is not None:
                    paired.append(result)
    if baseline:
        values = {m: np.array([b["test"][m] for b in baseline]) for m in METRICS}
        rows.append(Row(BASELINE, "-", len(baseline), {m: float(v.mean()) for m, v in values.items()},
                        {m: _std(v) for m, v in values.items()}))
    splits = {}
    for r in runs:
        splits.setdefault(r["split_seed"], {"split_seed": r["split_seed"], "test_windows": r["test_windows"],
                                            "test_positive_windows": r["test_positive_windows"],
                                            "test_events": r["test_events"]})
    return Comparison(rows, paired, list(runs), list(baseline), [splits[k] for k in sorted(splits)])


def _pm(mean: float, std: float) -> str:
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else f"{p:.3g}"


def markdown(comparison: Comparison) -> str:
    """The table as Markdown: one row per (encoding, scale), then the paired tests and the test splits."""
    lines = [
        "| encoding | scale | n | precision | recall | F1 | AUPRC | shuffle ΔF1 | shuffle ΔAUPRC |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in comparison.rows:
        drop = r.shuffle_drop or {}
        lines.append(
            f"| {r.encoding} | {r.scale} | {r.n} | " + " | ".join(_pm(r.mean[m], r.std[m]) for m in METRICS)
            + " | " + " | ".join(f"{drop[m]:+.3f}" if m in drop else "—" for m in PAIRED_METRICS) + " |"
        )
    if comparison.paired:
        lines += [
            "",
            f"Paired differences against `{REFERENCE}` at the same scale "
            "(encoding − reference, over (split, seed) pairs):",
            "",
            "| encoding | scale | metric | pairs | mean diff | bootstrap 95% CI | p sign-flip (exact) "
            "| p Wilcoxon | min attainable p |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for t in comparison.paired:
            lines.append(
                f"| {t.encoding} | {t.scale} | {t.metric} | {t.n} | {t.mean_diff:+.4f} | "
                f"[{t.ci_low:+.4f}, {t.ci_high:+.4f}] | {_p(t.p_sign_flip)} | {_p(t.p_wilcoxon)} | {t.min_p:.3g} |"
            )
    lines += ["", "Test splits: " + "; ".join(
        f"split {s['split_seed']}: {s['test_windows']} windows, {s['test_positive_windows']} positive, "
        f"{s['test_events']} events" for s in comparison.test_splits
    )]
    lines += ["", "mean ± std over split seeds × seeds (ddof=1). " + stats.METHOD_NOTE]
    meta = comparison.meta
    if meta.get("hyperparameters", {}).get("protocol", "blocked") != "blocked":
        lines[:0] = [f"**LEAKY split protocol `{meta['hyperparameters']['protocol']}`: windows were dealt to splits "
                     "at random, so training and test windows share time steps and events. These scores measure "
                     "leakage, not generalisation.**", ""]
    if "wall_seconds" in meta:
        lines += ["", f"Wall time {meta['wall_seconds']:.1f} s ({meta['runs_trained']} runs trained, "
                      f"{meta['runs_skipped']} skipped) on {meta['device']} × {meta['world_size']} process(es), "
                      f"{meta['cpu_count']} CPUs, {meta['torch_threads']} torch threads, {meta['platform']}, "
                      f"torch {meta['torch']}."]
    return "\n".join(lines) + "\n"


def _csv(comparison: Comparison) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["encoding", "scale", "n"] + [f"{m}_{k}" for m in METRICS for k in ("mean", "std")]
                    + [f"shuffle_drop_{m}" for m in PAIRED_METRICS]
                    + [f"{m}_{k}" for m in PAIRED_METRICS
                       for k in ("diff", "ci_low", "ci_high", "p_sign_flip", "p_wilcoxon")])
    tests = {(t.encoding, t.scale, t.metric): t for t in comparison.paired}
    for r in comparison.rows:
        drop = r.shuffle_drop or {}
        cells: list[Any] = [r.encoding, r.scale, r.n]
        cells += [v for m in METRICS for v in (r.mean[m], r.std[m])]
        cells += [drop.get(m, "") for m in PAIRED_METRICS]
        for m in PAIRED_METRICS:
            t = tests.get((r.encoding, r.scale, m))
            cells += [t.mean_diff, t.ci_low, t.ci_high, t.p_sign_flip, t.p_wilcoxon] if t else [""] * 5
        writer.writerow(cells)
    return buf.getvalue()


def to_json(comparison: Comparison) -> str:
    """Everything, including every run's record, as JSON (NaN written as ``null``)."""

    def clean(obj: Any) -> Any:
        if isinstance(obj, float) and math.isnan(obj):
            return None
        if isinstance(obj, dict):
            return {k: clean(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [clean(v) for v in obj]
        return obj

    return json.dumps(clean(asdict(comparison)), indent=2, allow_nan=False)


def write(comparison: Comparison, out: Path, *, stem: str = "results") -> dict[str, Path]:
    """Write ``STEM.md``, ``STEM.csv``, ``STEM.json`` and the plot ``STEM.png`` into ``out``; return their paths."""
    from posenc.experiment.figures import comparison_plot

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {ext: out / f"{stem}.{ext}" for ext in ("md", "csv", "json", "png")}
    write_text_atomic(paths["md"], markdown(comparison))
    write_text_atomic(paths["csv"], _csv(comparison))
    write_text_atomic(paths["json"], to_json(comparison))
    comparison_plot(comparison, paths["png"])
    return paths
