"""Relative position through inner products: Gram matrix, Toeplitz test, Su's long-range decay.

SPEC §3, seed su-*: for an encoding of (cos, sin) pairs ``⟨PE[m], PE[n]⟩ = Σ_i cos((m−n)θ_i)``
depends on ``m − n`` only (a Toeplitz Gram matrix), and for ``θ_i = θ(2i/d)``

    Σ_{i<d/2} cos(x θ_i)  ≈  (d/2) · Re ∫₀¹ exp(i x θ(u)) du        (seed su-*, "Long-range Decay")

which tends to 0 as ``|x|`` grows for almost any smooth monotone ``θ``. The same kernel is
RoPE's ``⟨R_m q, R_n q⟩`` for ``q`` made of unit pairs (SPEC §7).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate

from posenc import _validate, spectrum, tables
from posenc.analysis import _checks

Theta = Callable[[NDArray[np.float64]], ArrayLike]

SU_SCHEDULES: dict[str, Theta] = {
    "10000^-x": lambda x: 10000.0 ** (-np.asarray(x, dtype=np.float64)),
    "1000^-x": lambda x: 1000.0 ** (-np.asarray(x, dtype=np.float64)),
    "x^2": lambda x: np.asarray(x, dtype=np.float64) ** 2,
    "x^0.5": lambda x: np.asarray(x, dtype=np.float64) ** 0.5,
    "x": lambda x: np.asarray(x, dtype=np.float64),
}
"""Su's θ(x) of seed su-*: the paper's ``10000^(−x)``, his preferred ``1000^(−x)``, power
laws ``x^α`` and the linear ``x`` (the one whose integral crosses zero)."""


def gram(E: ArrayLike) -> NDArray[np.float64]:
    """Gram matrix ``G[m, n] = ⟨E[m], E[n]⟩`` of a ``[S, d]`` table, ``[S, S]`` (SPEC §3)."""
    table = _checks.table(E)
    return table @ table.T


def _diagonal_means(M: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Offsets ``x = m − n`` from ``−(S_c−1)`` to ``S_r−1`` and the mean of ``M`` along each."""
    rows, cols = M.shape
    offset = np.subtract.outer(np.arange(rows), np.arange(cols)) + (cols - 1)
    total = np.bincount(offset.ravel(), weights=M.ravel(), minlength=rows + cols - 1)
    count = np.bincount(offset.ravel(), minlength=rows + cols - 1)
    return np.arange(-(cols - 1), rows), total / count


def toeplitz_deviation(M: ArrayLike) -> float:
    """How far a matrix is from depending on ``m − n`` only: ``max |M[m,n] − mean_{m'−n'=m−n} M| / max |M|``.

    0 for a Toeplitz matrix (the Gram matrix of a sinusoidal table to ~1e-15, an ALiBi bias
    exactly); the relative form makes tables of any scale comparable. ``M`` is ``[S_q, S_k]``
    with at least two rows.
    """
    mat = _checks.table(M, name="M", min_rows=2)
    scale = float(np.abs(mat).max())
    if scale == 0.0:
        return 0.0
    rows, cols = mat.shape
    _, means = _diagonal_means(mat)
    offset = np.subtract.outer(np.arange(rows), np.arange(cols)) + (cols - 1)
    return float(np.abs(mat - means[offset]).max() / scale)


def kernel_by_distance(M: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The kernel as a function of distance: ``x = m − n`` and the mean of ``M[m, n]`` over ``m − n = x``.

    ``M`` is a Gram matrix (:func:`gram`) or an attention bias ``[S_q, S_k]``; returns
    ``(x, k(x))`` for ``x = −(S_k−1) … S_q−1``.
    """
    return _diagonal_means(_checks.table(M, name="M"))


def frequency_kernel(frequencies: ArrayLike, distances: ArrayLike | int) -> NDArray[np.float64]:
    """``k(x) = Σ_i cos(x w_i)``: the inner product of two (cos, sin)-pair encodings ``x`` apart (SPEC §3).

    ``distances`` is an int ``S`` (``0 … S−1``) or a 1-D array of real distances; returns the
    same length. Angles ``x·w`` are formed in float64 by :func:`posenc.tables.angles`.
    """
    return np.cos(tables.angles(distances, frequencies)).sum(axis=1)


def decay_integral(theta: Theta, distances: ArrayLike | int, *, dim: int) -> NDArray[np.float64]:
    """Su's continuum limit ``(d/2) · Re ∫₀¹ exp(i x θ(u)) du`` for each distance ``x`` (seed su-*).

    Computed with adaptive quadrature of the vector ``cos(x θ(u))`` over all ``x`` at once
    (:func:`scipy.integrate.quad_vec`, absolute tolerance 1e-11).

    Args:
        theta: ``θ: [0, 1] → ℝ`` accepting a float64 array (e.g. :data:`SU_SCHEDULES` entries).
        distances: int ``S`` or a 1-D array of real distances ``x``.
        dim: ``d``; the result is scaled by ``d/2`` to compare with :func:`frequency_kernel`.
    """
    dim = _validate.positive_int("dim", dim)
    if not callable(theta):
        raise TypeError(f"theta must be a callable θ(u) on [0, 1], got {theta!r}")
    x = _validate.positions(distances, name="distances")

    def integrand(u: float) -> NDArray[np.float64]:
        theta_u = float(np.asarray(theta(np.array([u])), dtype=np.float64)[0])
        return np.cos(x * theta_u)

    values, _ = integrate.quad_vec(integrand, 0.0, 1.0, epsabs=1e-11, epsrel=1e-10, limit=4000)
    return 0.5 * dim * values


def su_decay(theta: Theta, distances: ArrayLike | int, *, dim: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Su's comparison: ``(Σ_i cos(x θ(2i/d)), (d/2)·Re ∫₀¹ exp(i x θ(u)) du)`` at each distance (seed su-*).

    The discrete sum uses the frequencies :func:`posenc.spectrum.su` builds from ``θ``.
    """
    freq = spectrum.su(dim, theta)
    return frequency_kernel(freq, distances), decay_integral(theta, distances, dim=dim)
