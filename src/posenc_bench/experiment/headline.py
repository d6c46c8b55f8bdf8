"""The few lines ``posenc bench`` prints when it ends: the headline comparison, and where the rest is.

The full tables (every metric, the paired tests against each reference, baselines, event families,
per series) go to ``results.md``; the terminal gets one line per trained ``(model, encoding, scale)``
with the paired metrics (mean ± std over split seeds × seeds), the difference from the reference in
the last paired metric with its 95% CI and sign-flip p, then the best untrained baseline, the
synthetic data's oracle (where run) and flag-all, each line at most :data:`WIDTH` characters.
"""

from __future__ import annotations

from pathlib import Path

from posenc_bench.experiment.compare import LEAKY_HOW, NO_SKILL, REFERENCES, Comparison, Paired, Row
from posenc_bench.experiment.oracle import NAME as ORACLE

WIDTH = 110
"""The widest line of the headline (a terminal of 110 columns shows it unwrapped)."""

_LABEL = 26


def _label(row: Row) -> str:
    text = " ".join(p for p in (row.model, row.encoding) if p)
    if row.scale not in ("native", "-", ""):
        text += f" ({row.scale})"
    return text if len(text) <= _LABEL else text[: _LABEL - 1] + "…"


def _cell(row: Row, metric: str) -> str:
    if metric not in row.mean:
        return "—"
    std = row.std.get(metric, float("nan"))
    return f"{row.mean[metric]:.3f}" + ("" if std != std else f" ± {std:.3f}")


def _delta(p: Paired | None) -> str:
    if p is None:
        return ""
    return f"{p.mean_diff:+.3f} [{p.ci_low:+.3f}, {p.ci_high:+.3f}] p={p.p_sign_flip:.2f}"


def _title(comparison: Comparison) -> list[str]:
    """How many runs, where from, and a warning line when the split protocol leaks."""
    meta = comparison.meta
    hyper = meta.get("hyperparameters", {})
    trained, skipped = meta.get("runs_trained", 0), meta.get("runs_skipped", 0)
    lines = [
        f"{meta.get('dataset', hyper.get('dataset', ''))}: {trained + skipped} runs "
        f"({trained} trained, {skipped} read back)"
        + (f" in {meta['wall_seconds']:.0f} s" if "wall_seconds" in meta else "")
        + "; mean ± std over split seeds × seeds"
    ]
    protocol = hyper.get("protocol", "blocked")
    if protocol != "blocked" and hyper.get("task", "classify") == "classify":
        how = LEAKY_HOW.get(protocol, "windows dealt to splits at random")
        lines.append(f"LEAKY split protocol {protocol} ({how}): these scores measure leakage")
    return lines


def _untrained(comparison: Comparison, metrics: tuple[str, ...], key: str) -> list[str]:
    """The lines below the trained rows: the best untrained baseline (by ``key``), the oracle, flag-all."""

    def line(label: str, row: Row, note: str) -> str:
        return f"{label:<{_LABEL}}" + "".join(f"{_cell(row, m):>16}" for m in metrics) + f"   {note}"

    untrained = [r for r in comparison.rows if r.scale == "-" and r.encoding not in (NO_SKILL, ORACLE)]
    lines = []
    if untrained:
        best = max(untrained, key=lambda r: r.mean.get(key, float("-inf")))
        lines.append(line(_label(best), best, f"best of {len(untrained)} untrained baselines"))
    lines += [line("oracle", r, "the data's generating rule: the ceiling") for r in comparison.rows
              if r.scale == "-" and r.encoding == ORACLE]  # fmt: skip
    lines += [line(_label(r), r, "no skill: flags every test window") for r in comparison.rows
              if r.encoding == NO_SKILL]  # fmt: skip
    return lines


def headline(comparison: Comparison, *, full: Path | None = None) -> str:
    """The terminal summary of ``comparison`` (module docstring); ``full``: the file with every table."""
    metrics = tuple(comparison.paired_metrics)
    key = metrics[-1]
    reference = REFERENCES[0]
    paired = {(p.model, p.encoding, p.scale): p for p in comparison.paired
              if p.metric == key and p.reference == reference}  # fmt: skip
    header = f"{'':<{_LABEL}}" + "".join(f"{m:>16}" for m in metrics) + f"   {key} − {reference} [95% CI]"
    lines = [*_title(comparison), "", header]
    for row in (r for r in comparison.rows if r.scale != "-"):
        cells = "".join(f"{_cell(row, m):>16}" for m in metrics)
        lines.append(
            f"{_label(row):<{_LABEL}}{cells}   {_delta(paired.get((row.model, row.encoding, row.scale)))}"
        )
    lines += _untrained(comparison, metrics, key)
    if full is not None:
        lines += ["", f"all tables (every metric, paired tests, baselines, series): {full}"]
    return "\n".join(line.rstrip() for line in lines)
