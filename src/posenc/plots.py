"""The papers' figures, one call each (matplotlib; PNG and SVG; printable in grey).

Every function returns a :class:`matplotlib.figure.Figure` built without pyplot (no global
state, no GUI backend); :func:`save` writes it, :func:`write_all` writes every figure of
:data:`FIGURES`. Colour maps are ``gray``/``Greys`` and lines differ by style and marker, so
the figures print in black and white. Labels are mathtext (TeX between dollar signs), as the report's captions are
typeset; every figure is at most :data:`PAGE_WIDTH` wide, so printed at its natural size (as the report
prints it) its legends keep their :data:`LEGEND_SIZE` points.

===========================  ==============================================================
figure                       reproduces
===========================  ==============================================================
``encoding_heatmap``         Kazemnejad (2019), Fig. 2: 128 dims, 50 positions
``dot_product_matrix``       Kazemnejad (2019), Fig. 3: ⟨PE[m], PE[n]⟩ of all positions
``frequency_distribution``   Idé et al. (2024), Fig. 1: eq. 15 (sinusoidal) vs eq. 22 (DFT), d=256, ρ=10⁴
``reconstruction``           Idé et al. (2024), Fig. 2: Algorithm 1 for δ at s=5, 40, 75, d=256, S=80
``su_decay``                 Su (2021): ``Re ∫₀¹ exp(i x θ(u)) du`` for several θ, with the sum
``bilinear_parts``           Su (2021): relative and absolute parts of ``p_mᵀ diag(h) p_n``
``shift_operator``           Denk (2019): ``T^(k)`` and ``T^(k) PE[t] = PE[t+k]``
===========================  ==============================================================
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from posenc import analysis, spectrum, tables

LINES: tuple[dict[str, Any], ...] = (
    {"color": "black", "linestyle": "-"},
    {"color": "0.35", "linestyle": "--"},
    {"color": "0.55", "linestyle": ":"},
    {"color": "black", "linestyle": "-."},
    {"color": "0.45", "linestyle": (0, (5, 1, 1, 1, 1, 1))},
)
"""Line styles distinguishable in grey, cycled over curves."""

PAGE_WIDTH = 7.2
"""Widest figure, in inches: the text width of an A4 page with 12 mm margins (7.3 in)."""

LEGEND_SIZE = 8
"""Points of the legends' text (and the smallest text of any figure)."""


def encoding_heatmap(*, length: int = 50, dim: int = 128, base: float = tables.DEFAULT_BASE) -> Figure:
    """The sinusoidal table as an image: row ``t`` is ``PE[t]`` (Kazemnejad, 2019, Fig. 2)."""
    table = tables.sinusoidal(length, dim, base=base)
    fig = Figure(figsize=(PAGE_WIDTH, 3.4), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(table, cmap="gray", aspect="auto", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(
        xlabel="encoding dimension $j$",
        ylabel="position $t$",
        title=rf"Sinusoidal encoding $\mathrm{{PE}}[t, j]$, $d = {dim}$, {length} positions, $\rho = {base:g}$",
    )
    fig.colorbar(image, ax=ax, label="value")
    return fig


def dot_product_matrix(*, length: int = 100, dim: int = 128, base: float = tables.DEFAULT_BASE) -> Figure:
    """``⟨PE[m], PE[n]⟩`` for all positions: symmetric, Toeplitz, decaying (Kazemnejad, 2019, Fig. 3; Su, 2021)."""
    gram = analysis.gram(tables.sinusoidal(length, dim, base=base))
    fig = Figure(figsize=(5.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(gram, cmap="gray", interpolation="nearest", origin="upper")
    ax.set(
        xlabel="position $n$",
        ylabel="position $m$",
        title=rf"Dot product $\langle \mathrm{{PE}}[m], \mathrm{{PE}}[n] \rangle$ of sinusoidal encodings, $d = {dim}$",
    )
    fig.colorbar(image, ax=ax, label="dot product")
    return fig


def frequency_distribution(*, dim: int = 256, base: float = tables.DEFAULT_BASE) -> Figure:
    """Eq. 15 weights of ``w = ρ^(−k/d)`` vs the flat eq. 22 of the DFT encoding (Idé et al., 2024, Fig. 1)."""
    bins = spectrum.dft(dim)
    fig = Figure(figsize=(PAGE_WIDTH, 3.6), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(
        bins,
        analysis.frequency_distribution(spectrum.geometric(dim, base), dim=dim),
        label=rf"sinusoidal, $\rho = {base:g}$ (eq. 15, $\sigma = 4 \cdot 2\pi/d$)",
        **LINES[0],
    )
    ax.plot(bins, analysis.dft_distribution(dim), label="DFT encoding (eq. 22)", **LINES[1])
    ax.axvline(
        2 * np.pi / dim, color="0.6", linewidth=0.8, linestyle=":", label=r"first non-zero bin $2\pi/d$"
    )
    ax.set(
        xlabel=r"DFT frequency $\omega_k = 2\pi k/d$",
        ylabel=r"weight $g_k$ ($\sum_k g_k = 1$)",
        title=f"Distribution of encoding frequencies over the Fourier bins, $d = {dim}$",
    )
    ax.legend(fontsize=LEGEND_SIZE)
    return fig


def reconstruction(
    *,
    dim: int = 256,
    length: int = 80,
    positions: Sequence[int] = (5, 40, 75),
    base: float = tables.DEFAULT_BASE,
) -> Figure:
    """Algorithm 1 of Idé et al. (2024) for ``δ_(t,s)``: sinusoidal weights (top) vs DFT weights (bottom) (Fig. 2)."""
    fig = Figure(figsize=(PAGE_WIDTH, 4.6), layout="constrained")
    axes = fig.subplots(2, 1, sharex=True)
    sinusoidal = analysis.frequency_distribution(spectrum.geometric(dim, base), dim=dim)
    weights = (
        ("sinusoidal (eq. 15 weights)", sinusoidal),
        ("DFT encoding (eq. 22 weights)", analysis.dft_distribution(dim)),
    )
    t = np.arange(length)
    for ax, (label, g) in zip(axes, weights):
        for style, s in zip(LINES, positions):
            ax.plot(
                t,
                analysis.reconstruct(analysis.one_hot(s, dim), g)[:length],
                label=rf"$\delta$ at $s = {s}$",
                **style,
            )
        ax.set(ylabel="reconstructed $f(t)$", title=f"Reconstruction of the one-hot, {label}")
        ax.legend(loc="upper center", ncols=3, fontsize=LEGEND_SIZE)
        ax.margins(y=0.2)
    for ax in axes:
        ax.set_xlabel(f"lattice point $t$ (first $S = {length}$ of $d = {dim}$)")
    return fig


def su_decay(
    *,
    dim: int = 128,
    short: int = 128,
    long: int = 1024,
    schedules: Sequence[str] = tuple(analysis.SU_SCHEDULES),
) -> Figure:
    """Su's long-range decay: the integral ``Re ∫₀¹ exp(i x θ(u)) du`` for several θ, and the sum it stands for.

    Both panels draw the discrete ``Σ cos(x θ_i) / ⌈d/2⌉`` of the paper's ``θ_i = 10000^(−2i/d)``
    (Su, 2021); the dotted line marks where neighbouring phases differ by more than π, at
    ``x = π / (1 − 10000^(−2/d))``: from there the sum stops following the integral.
    """
    fig = Figure(figsize=(PAGE_WIDTH, 4.0), layout="constrained")
    axes = fig.subplots(1, 2)
    paper = spectrum.geometric(dim)
    limit = analysis.riemann_limit(paper)
    terms = spectrum.n_pairs(dim)
    for ax, top in zip(axes, (short, long)):
        x = np.linspace(0.0, float(top), 513)
        for style, name in zip(LINES, schedules):
            theta = analysis.SU_SCHEDULES[name]
            ax.plot(
                x,
                analysis.decay_integral(theta, x, dim=1),
                label=rf"$\int$, $\theta(u) = {_schedule_tex(name)}$",
                **style,
            )
        ax.axhline(0.0, color="0.7", linewidth=0.6)
        ax.axvline(
            limit,
            color="0.4",
            linewidth=0.8,
            linestyle=":",
            label=rf"phase step $> \pi$ from $x = {limit:.1f}$",
        )
        ax.set(
            xlabel="relative distance $x = m - n$",
            ylabel=r"$\mathrm{Re} \int_0^1 e^{i x \theta(u)}\, du$",
            title=rf"Long-range decay, $0 \leq x \leq {top}$",
        )
    x = np.arange(0, short + 1, 2, dtype=np.float64)
    axes[0].plot(
        x,
        analysis.frequency_kernel(paper, x) / terms,
        "o",
        color="black",
        markersize=2.5,
        label=rf"sum $\sum_i \cos(x \theta_i)/(d/2)$, $\theta_i = 10000^{{-2i/d}}$, $d = {dim}$ (dots left, line right)",
    )
    x = np.arange(0, long + 1, dtype=np.float64)
    axes[1].plot(x, analysis.frequency_kernel(paper, x) / terms, color="black", linewidth=0.5, alpha=0.8)
    fig.legend(
        *axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=2, fontsize=LEGEND_SIZE
    )
    return fig


def _schedule_tex(name: str) -> str:
    """A schedule name of :data:`posenc.analysis.SU_SCHEDULES` (``"10000^-x"``) in mathtext of ``u`` (``10000^{-u}``)."""
    return re.sub(r"\^([-\w.]+)", r"^{\1}", name.replace("x", "u"))


def bilinear_parts(
    *,
    dim: int = 64,
    length: int = 64,
    seed: int = 0,
    trained: np.ndarray | None = None,
    trained_frequencies: np.ndarray | None = None,
    trained_layout: str = "interleaved",
) -> Figure:
    """Su's ``p_mᵀ diag(h) p_n`` split into its relative part (a function of ``m − n``) and its absolute part.

    Top row: a random diagonal ``h ~ N(0, 1)`` on the sinusoidal encoding; bottom row, when
    given, a trained ``diag(W_Q W_Kᵀ)`` of a benchmark run (Su, 2021, general ``H``). The last
    panel compares the relative part with Su's weighted integral ``⌈d/2⌉ ∫₀¹ h(u) cos(x θ(u)) du``
    (geometric frequencies only): close for smooth pair weights, not for rough ones.

    Args:
        trained, trained_frequencies, trained_layout: the trained diagonal, the table's
            frequencies and column layout.
    """
    cases: list[tuple[str, np.ndarray, np.ndarray | None, str]] = [
        (
            rf"random $h \sim \mathcal{{N}}(0, 1)$, seed {seed}",
            np.random.default_rng(seed).standard_normal(dim),
            None,
            "interleaved",
        )
    ]
    if trained is not None:
        cases.append(
            (
                r"trained $\mathrm{diag}(W_Q W_K^\top)$",
                np.asarray(trained, dtype=np.float64),
                trained_frequencies,
                trained_layout,
            )
        )
    fig = Figure(figsize=(PAGE_WIDTH, 5.0 * len(cases)), layout="constrained")
    axes = fig.subplots(2 * len(cases), 2).reshape(len(cases), 4)
    for row, (label, h, freq, layout) in zip(axes, cases):
        d = h.size
        t = np.arange(length, dtype=np.float64)
        rel, ab = analysis.bilinear_parts(h, t[:, None], t[None, :], dim=d, layout=layout, frequencies=freq)
        top = float(np.abs(rel + ab).max()) or 1.0
        for ax, data, title in zip(
            row,
            (rel + ab, rel, ab),
            (r"$p_m^\top \mathrm{diag}(h)\, p_n$", "relative part ($m - n$)", "absolute part ($m + n$)"),
        ):
            image = ax.imshow(data, cmap="gray", vmin=-top, vmax=top, interpolation="nearest")
            ax.set(xlabel="position $n$", ylabel="position $m$", title=title)
        row[0].set_title(f"{label}, $d = {d}$:\n{row[0].get_title()}")
        fig.colorbar(image, ax=list(row[:3]), shrink=0.8)
        ax = row[3]
        ax.plot(t, rel[:, 0], label="relative part at $m - n = x$", **LINES[0])
        if freq is None or np.allclose(freq, spectrum.geometric(d)):
            ax.plot(
                t,
                analysis.weighted_decay_integral(h, t, dim=d, layout=layout),
                label=r"Su's $\lceil d/2 \rceil \int h(u) \cos(x \theta(u))\, du$",
                **LINES[1],
            )
        ax.axhline(0.0, color="0.7", linewidth=0.6)
        ax.set(xlabel="distance $x = m - n$", ylabel="value", title="relative part vs Su's integral")
        ax.legend(fontsize=LEGEND_SIZE)
    return fig


def shift_operator(
    *, dim: int = 16, k: int = 5, length: int = 60, base: float = tables.DEFAULT_BASE
) -> Figure:
    """``T^(k)`` and its action: ``T^(k) PE[t]`` lands on ``PE[t+k]`` (Denk, 2019, eq. 9).

    Denk indexes the frequencies ``λ_m = 10000^(−2m/d)`` from ``m = 1``, one grid step from
    Vaswani's ``i = 0``; the operator is the same block form, drawn here on Vaswani's grid.
    """
    op = analysis.shift_operator(k, dim=dim, base=base)
    table = tables.sinusoidal(length + k, dim, base=base)
    moved = table[:length] @ op.T
    fig = Figure(figsize=(PAGE_WIDTH, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.6))
    image = left.imshow(op, cmap="gray", vmin=-1, vmax=1, interpolation="nearest")
    left.set(
        xlabel=r"column of $\mathrm{PE}[t]$",
        ylabel=r"row of $\mathrm{PE}[t+k]$",
        title=f"Shift operator $T^{{(k)}}$\n$k = {k}$, $d = {dim}$",
    )
    fig.colorbar(image, ax=left, shrink=0.8)
    t = np.arange(length)
    left.set_xticks(range(0, dim, 2))
    left.set_yticks(range(0, dim, 2))
    for style, j in zip(LINES, (2, 3, 4, 5)):
        right.plot(t, table[k:, j], label=rf"$\mathrm{{PE}}[t+k, {j}]$", **style)
        right.plot(t[::3], moved[::3, j], "o", color=style["color"], markersize=3, fillstyle="none")
    residual = analysis.operator_residual(table, op, k)
    right.set(
        xlabel="position $t$",
        ylabel="value",
        title=rf"$\mathrm{{PE}}[t+{k}]$ (lines), $T^{{({k})}} \mathrm{{PE}}[t]$ (circles)"
        f"\nrelative residual {residual:.1e}",
    )
    right.legend(loc="lower left", fontsize=LEGEND_SIZE)
    return fig


FIGURES: dict[str, Callable[[], Figure]] = {
    "encoding_heatmap": encoding_heatmap,
    "dot_product_matrix": dot_product_matrix,
    "frequency_distribution": frequency_distribution,
    "reconstruction": reconstruction,
    "su_decay": su_decay,
    "bilinear_parts": bilinear_parts,
    "shift_operator": shift_operator,
}
"""Every figure by name, with its default (the papers') parameters."""


def trained_spectra(entries: Sequence[tuple[str, np.ndarray, np.ndarray, np.ndarray]]) -> Figure:
    """Power spectra along positions of benchmark runs' encoding tables: initial (circles) and trained (lines).

    Args:
        entries: ``(label, ω, power_initial, power_trained)`` per run
            (:func:`posenc.analysis.table_spectrum` with ``axis="positions"``).
    """
    fig = Figure(figsize=(PAGE_WIDTH, 3.2 + 0.15 * len(entries)), layout="constrained")
    ax = fig.add_subplot()
    for style, (label, omega, initial, trained) in zip(itertools.cycle(LINES), entries):
        ax.plot(omega, trained, label=f"{label}, trained", **style)
        ax.plot(
            omega,
            initial,
            "o",
            color=style["color"],
            markersize=3,
            fillstyle="none",
            label=f"{label}, initial",
        )
    ax.set(
        xlabel=r"frequency along positions $\omega = 2\pi k/S$",
        ylabel="share of power",
        title="Spectrum of the encoding table along positions, initial vs trained",
    )
    ax.legend(fontsize=LEGEND_SIZE)
    return fig


def figure_sizes(name: str) -> dict[str, object]:
    """The default sizes (``dim``, ``length``, …) figure ``name`` of :data:`FIGURES` is drawn with."""
    import inspect

    params = inspect.signature(FIGURES[name]).parameters.values()
    return {
        p.name: p.default
        for p in params
        if p.default is not inspect.Parameter.empty and isinstance(p.default, (int, float, tuple))
    }


def save(
    fig: Figure, path: Path | str, *, formats: Sequence[str] = ("png", "svg"), dpi: int = 120
) -> list[Path]:
    """Write ``fig`` as ``path`` with each suffix of ``formats`` (``png``, ``svg``, ``pdf``); returns the files."""
    stem = Path(path)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        if fmt not in ("png", "svg", "pdf"):
            raise ValueError(f"formats must be among 'png', 'svg', 'pdf'; got {fmt!r}")
        target = stem.with_suffix(f".{fmt}")
        fig.savefig(target, format=fmt, dpi=dpi)
        written.append(target)
    return written


def write_all(out_dir: Path | str, *, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Write every figure of :data:`FIGURES` into ``out_dir`` as ``NAME.png`` / ``NAME.svg``."""
    out = Path(out_dir)
    return [path for name, make in FIGURES.items() for path in save(make(), out / name, formats=formats)]
