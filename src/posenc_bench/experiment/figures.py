"""Figures of the benchmark (matplotlib's ``Figure`` API: the user's pyplot backend is left alone;
matplotlib is imported only when a figure is drawn)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from posenc_bench.experiment.files import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from posenc_bench.experiment.compare import Comparison


def _figure(figsize: tuple[float, float]) -> Figure:
    """A figure not attached to pyplot: no global backend or figure registry is touched."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)


def _save(fig: Figure, path: Path) -> None:
    """``fig`` as a PNG at ``path``, written atomically (a full disk leaves no half-written image)."""
    write_atomic(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))


def comparison_plot(comparison: Comparison, path: Path) -> None:
    """Bars of the paired test metrics (mean ± std) per row; hatched: the time-shuffled test set.

    The dashed line is ``flag-all`` (mean over splits); ``‡`` over a bar: its CI of
    ``metric − flag-all`` does not lie above 0.
    """
    from posenc_bench.experiment.compare import LABELS, NO_SKILL, NOT_ABOVE_NO_SKILL

    rows = comparison.rows
    metrics = comparison.paired_metrics
    labels = [
        (f"{r.model} " if r.model else "")
        + (r.encoding if r.scale in ("native", "-") else f"{r.encoding}\n({r.scale})")
        for r in rows
    ]
    x = np.arange(len(rows))
    fig = _figure((max(6.0, 1.1 * len(rows) + 2), 3.8))
    axes = fig.subplots(1, len(metrics), sharey=True, squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        mean = np.array([r.mean.get(metric, np.nan) for r in rows])
        std = np.nan_to_num(np.array([r.std.get(metric, np.nan) for r in rows]))
        colors = ["0.6" if r.encoding == NO_SKILL else "C0" for r in rows]
        ax.bar(x - 0.2, mean, 0.4, yerr=std, capsize=3, color=colors, label="test")
        shuffled = np.array(
            [m - r.shuffle_drop[metric] if r.shuffle_drop else np.nan for m, r in zip(mean, rows)]
        )
        if np.isfinite(shuffled).any():
            ax.bar(x + 0.2, shuffled, 0.4, hatch="//", fill=False, label="time-shuffled test")
        flag_all = [r for r in rows if r.encoding == NO_SKILL and metric in r.mean]
        if flag_all:
            ax.axhline(flag_all[0].mean[metric], color="0.3", ls="--", lw=0.9, label=f"{NO_SKILL} (no skill)")
        for xi, (r, m, s) in enumerate(zip(rows, mean, std)):
            if r.clears_no_skill(metric) is False:
                ax.text(xi - 0.2, min(1.0, m + s + 0.02), NOT_ABOVE_NO_SKILL, ha="center", fontsize=9)
        ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(f"{LABELS.get(metric, metric)} (test)")
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    _save(fig, path)


def probe_plot(accuracy: Mapping[str, Mapping[int, float]], path: Path, *, title: str) -> None:
    """Accuracy against lag ``k``, one line per encoding (``accuracy[encoding][k]``).

    Each encoding has its own marker and line style, so overlapping curves (e.g. two at chance)
    stay distinguishable and the figure reads in grey.
    """
    fig = _figure((6.0, 3.8))
    ax = fig.subplots()
    styles = itertools.cycle(zip(("o", "s", "^", "v", "D", "x", "P", "*"), ("-", "--", "-.", ":") * 2))
    for (encoding, by_k), (marker, line) in zip(accuracy.items(), styles):
        ks: Sequence[int] = sorted(by_k)
        ax.plot(ks, [by_k[k] for k in ks], marker=marker, ls=line, ms=5, mfc="none", label=encoding)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--", label="chance")
    ax.set_xlabel("lag k (time steps)")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0.4, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def lengthgen_plot(
    accuracy: Mapping[str, Mapping[str, Mapping[int, float]]],
    chance: Mapping[str, Mapping[int, float]],
    path: Path,
    *,
    train_length: int,
    floor: Mapping[str, Mapping[int, float]] | None = None,
) -> None:
    """Exact match against test length, one panel per task (``accuracy[task][encoding][n]``), one
    line per encoding; dashed grey: the task's chance accuracy, dash-dotted black: its trivial-strategy
    floor (``floor[task][n]``, when given), dotted: the training length ``L``."""
    tasks = list(accuracy)
    fig = _figure((4.2 * len(tasks), 3.6))
    axes = np.atleast_1d(fig.subplots(1, len(tasks), squeeze=False)[0])
    for ax, task in zip(axes, tasks):
        styles = itertools.cycle(zip(("o", "s", "^", "v", "D", "x", "P", "*"), ("-", "--", "-.", ":") * 2))
        for (encoding, by_n), (marker, line) in zip(accuracy[task].items(), styles):
            ns: Sequence[int] = sorted(by_n)
            ax.plot(ns, [by_n[n] for n in ns], marker=marker, ls=line, ms=5, mfc="none", label=encoding)
        ns = sorted(chance[task])
        ax.plot(ns, [chance[task][n] for n in ns], color="grey", lw=0.8, ls="--", label="no skill")
        if floor is not None and task in floor:
            ns = sorted(floor[task])
            ax.plot(
                ns, [floor[task][n] for n in ns], color="black", lw=0.8, ls="-.", label="trivial strategy"
            )
        ax.axvline(train_length, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("test length n (items)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(task)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("exact match")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
