"""Fourier analysis of an encoding (Idé et al., 2024, §3, eqs. 15, 16, 22).

The DFT on a lattice of ``d`` points has bins ``ω_k = 2πk/d``, ``k = 0 … ⌊d/2⌋``
(:func:`posenc.spectrum.dft`; bin ``d/2`` is the Nyquist term ``b_0`` of even ``d``). An
encoding's frequencies ``w_l`` are spread over these bins by a Gaussian kernel (eq. 15)::

    g_k = (1/R) Σ_l exp(−(ω_k − w_l)² / (2σ²)),   Σ_k g_k = 1,   σ = 4·2π/d by default

The paper's sinusoidal frequencies fall below the first non-zero bin ``2π/d`` for column
index ``l > d·ln(d/2π)/ln ρ`` (eq. 16; ``= (d/4)·log10(d/2π)`` for ``ρ = 10^4``).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from posenc import spectrum, tables, validate
from posenc.analysis import _checks


def default_bandwidth(dim: int) -> float:
    """The paper's kernel bandwidth ``σ = 4 · 2π/d`` (Idé et al., 2024, below eq. 15)."""
    return 4.0 * 2.0 * math.pi / validate.positive_int("dim", dim)


def frequency_distribution(
    frequencies: ArrayLike, *, dim: int, bandwidth: float | None = None
) -> NDArray[np.float64]:
    """Eq. 15 of Idé et al. (2024): the weight ``g_k`` of the frequency set on each DFT bin ``ω_k = 2πk/d``.

    Args:
        frequencies: the encoding's angular frequencies ``w_l`` (e.g. ``spectrum.geometric(d)``).
        dim: ``d``, the lattice size defining the bins.
        bandwidth: ``σ > 0``; default :func:`default_bandwidth` ``= 4·2π/d``.

    Returns:
        ``[⌊d/2⌋ + 1]`` non-negative weights summing to 1 (bins ``k = 0 … ⌊d/2⌋``), computed
        in log space so that any ``σ > 0`` gives a defined result.
    """
    dim = validate.positive_int("dim", dim)
    w = spectrum.custom(frequencies)
    sigma = default_bandwidth(dim) if bandwidth is None else validate.positive_float("bandwidth", bandwidth)
    with np.errstate(over="ignore"):  # σ² itself may underflow; (Δ/σ)² may overflow to inf: weight 0
        exponent = -0.5 * (np.subtract.outer(spectrum.dft(dim), w) / sigma) ** 2
    log_g = special.logsumexp(exponent, axis=1)  # in log space: a narrow σ cannot underflow to 0/0
    total = special.logsumexp(log_g)
    if not np.isfinite(total):
        raise ValueError(
            f"bandwidth={sigma!r} is too narrow for these frequencies: every frequency lies so many σ from "
            f"every DFT bin 2πk/{dim} that all weights underflow (exp(−Δ²/2σ²) = 0 in float64); use a wider σ"
        )
    return np.exp(log_g - total)


def column_bins(dim: int) -> NDArray[np.intp]:
    """The DFT bin ``k`` of each column of the DFT encoding ``(a_0, a_1 … a_K, b_1 … b_K, b_0)`` (eq. 21)."""
    dim = validate.positive_int("dim", dim)
    n_k = (dim - 1) // 2
    pairs = np.arange(1, n_k + 1)
    bins = np.concatenate([[0], pairs, pairs, [dim // 2] if dim % 2 == 0 else []])
    return bins.astype(np.intp)


def dft_distribution(dim: int) -> NDArray[np.float64]:
    """Eq. 22 of Idé et al. (2024): the DFT encoding's weight per bin, the energy ``a_k² + b_k²`` of ``e(s)``.

    Computed from the encoding itself (the same for every ``s``): ``1/d`` at ``k = 0`` and at
    the Nyquist bin, ``2/d`` on every other bin — flat, no bias to any scale.
    Returns ``[⌊d/2⌋ + 1]`` weights summing to 1.
    """
    row = tables.dft(1, dim)[0]
    return np.bincount(column_bins(dim), weights=row**2, minlength=dim // 2 + 1).astype(np.float64)


def low_pass_count(frequencies: ArrayLike, *, dim: int) -> int:
    """How many frequencies lie strictly below the first non-zero DFT bin ``2π/d`` (Idé et al., 2024, §3.1)."""
    dim = validate.positive_int("dim", dim)
    return int(np.count_nonzero(spectrum.custom(frequencies) < 2.0 * math.pi / dim))


def crossing_index(dim: int, *, base: float = tables.DEFAULT_BASE) -> float:
    """Eq. 16 of Idé et al. (2024) solved for ``l``: ``2π/d = ρ^(−l/d)`` ⇔ ``l = d · ln(d/2π) / ln ρ``.

    ``l`` is the column index of eq. 3 (``w_l = ρ^(−l/d)``, ``l = 0, 2, …, d−2``); for
    ``ρ = 10^4`` it is ``(d/4)·log10(d/2π)``: ≈ 103 for ``d = 256``, ≈ 245 for ``d = 512``.
    Every ``ρ > 0`` that the tables accept is accepted here: ``ρ = 1`` (all ``w_l = 1``, which
    never cross ``2π/d``) gives the limit ``ρ → 1⁺``, ``+inf`` when ``d > 2π`` (no frequency
    below ``2π/d``) and ``−inf`` when ``d < 2π`` (all of them below, from before column 0).
    """
    dim = validate.positive_int("dim", dim)
    base = validate.positive_float("base", base)
    ratio = math.log(dim / (2.0 * math.pi))
    if base == 1.0:
        return math.copysign(math.inf, ratio)
    return dim * ratio / math.log(base)


def table_spectrum(
    E: ArrayLike, *, axis: str = "features"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Power spectrum of a bare table, so learned encodings get one too.

    ``axis="features"``: the DFT of each row along the feature axis (a function on the lattice
    of ``d`` points, as in Idé et al. (2024) §2.3), power ``|F_k|²`` averaged over rows, bins
    ``ω_k = 2πk/d``. ``axis="positions"``: the DFT of each column along the positions (how
    fast each feature varies with position), averaged over columns, bins ``2πk/S``. The
    power of a bin counts both conjugate terms, so it is the energy per bin as in eq. 22.

    Returns:
        ``(ω, p)``: bin frequencies and powers summing to 1 (``[⌊n/2⌋ + 1]`` each).
    """
    table = _checks.table(E, min_rows=2 if axis == "positions" else 1)
    validate.choice("axis", axis, ("features", "positions"))
    data = table if axis == "features" else table.T
    n = data.shape[1]
    power = (np.abs(np.fft.rfft(data, axis=1)) ** 2).mean(axis=0)
    power[1 : (n + 1) // 2] *= 2.0  # bins 1 … ⌈n/2⌉−1 hold two conjugate terms (Parseval)
    total = power.sum()
    if total == 0.0:
        raise ValueError("E is all zeros: its spectrum is undefined")
    return spectrum.dft(n), power / total
