"""Figures of the benchmark (matplotlib, Agg backend; imported only when a figure is drawn)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from posenc.experiment.compare import Comparison


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def comparison_plot(comparison: Comparison, path: Path) -> None:
    """Bars of test F1 and AUPRC (mean ± std) per (encoding, scale); hatched: the time-shuffled test set."""
    plt = _pyplot()
    rows = comparison.rows
    labels = [r.encoding if r.scale in ("native", "-") else f"{r.encoding}\n({r.scale})" for r in rows]
    x = np.arange(len(rows))
    fig, axes = plt.subplots(1, 2, figsize=(max(6.0, 1.1 * len(rows) + 2), 3.8), sharey=True)
    for ax, metric, title in zip(axes, ("f1", "auprc"), ("F1 (test)", "AUPRC (test)")):
        mean = np.array([r.mean[metric] for r in rows])
        std = np.nan_to_num(np.array([r.std[metric] for r in rows]))
        ax.bar(x - 0.2, mean, 0.4, yerr=std, capsize=3, label="test")
        shuffled = np.array([m - r.shuffle_drop[metric] if r.shuffle_drop else np.nan for m, r in zip(mean, rows)])
        if np.isfinite(shuffled).any():
            ax.bar(x + 0.2, shuffled, 0.4, hatch="//", fill=False, label="time-shuffled test")
        ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def probe_plot(accuracy: Mapping[str, Mapping[int, float]], path: Path, *, title: str) -> None:
    """Accuracy against lag ``k``, one line per encoding (``accuracy[encoding][k]``).

    Each encoding has its own marker and line style, so overlapping curves (e.g. two at chance)
    stay distinguishable and the figure reads in grey.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
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
    fig.savefig(path, dpi=120)
    plt.close(fig)
