"""Relative position through inner products: Gram matrix, Toeplitz test, Su's long-range decay.

For an encoding of (cos, sin) pairs ``⟨PE[m], PE[n]⟩ = Σ_i cos((m−n)θ_i)`` depends on
``m − n`` only (a Toeplitz Gram matrix), and for ``θ_i = θ(2i/d)`` (Su, 2021, "Long-range decay")

    Σ_{i<n} cos(x θ_i)  ≈  n · Re ∫₀¹ exp(i x θ(u)) du,      n = ⌈d/2⌉ terms

which tends to 0 as ``|x|`` grows for almost any smooth monotone ``θ``. The same kernel is
RoPE's ``⟨R_m q, R_n q⟩`` for ``q`` made of unit pairs (Su et al., 2021, RoFormer eq. 34).
The sum is a Riemann sum of the integral only while neighbouring phases ``x θ_i`` and
``x θ_(i+1)`` differ by less than π (:func:`riemann_limit`); beyond, it stops decaying.
For the geometric ``θ(u) = ρ^(−u)`` the integral has the closed form (substitute ``v = x ρ^(−u)``)

    ∫₀¹ cos(x ρ^(−u)) du = (Ci(|x|) − Ci(|x|/ρ)) / ln ρ,     Ci the cosine integral.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, special

from posenc import spectrum, tables, validate
from posenc.analysis import _checks

Theta = Callable[[NDArray[np.float64]], ArrayLike]


@dataclass(frozen=True)
class Geometric:
    """Su's ``θ(u) = ρ^(−u)`` (Vaswani et al., 2017, §3.5 with ``u = 2i/d``), a callable with a known integral.

    :func:`decay_integral` evaluates it in closed form, ``(Ci(|x|) − Ci(|x|/ρ)) / ln ρ``.
    """

    base: float

    def __post_init__(self) -> None:
        base = validate.positive_float("base", self.base)
        if base == 1.0:
            raise ValueError("base must differ from 1 (θ(u) = 1^(−u) is constant), got 1.0")

    def __call__(self, u: ArrayLike) -> NDArray[np.float64]:
        return np.exp(-np.asarray(u, dtype=np.float64) * math.log(self.base))

    def integral(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """``∫₀¹ cos(x ρ^(−u)) du`` for each ``x``: 1 at ``x = 0``, else ``(Ci(|x|) − Ci(|x|/ρ))/ln ρ``."""
        ax = np.abs(x)
        out = np.ones_like(ax)
        moving = ax > 0
        lo, hi = (
            np.minimum(ax[moving], ax[moving] / self.base),
            np.maximum(ax[moving], ax[moving] / self.base),
        )
        out[moving] = (special.sici(hi)[1] - special.sici(lo)[1]) / abs(math.log(self.base))
        return out


SU_SCHEDULES: dict[str, Theta] = {
    "10000^-x": Geometric(10000.0),
    "1000^-x": Geometric(1000.0),
    "x^2": lambda x: np.asarray(x, dtype=np.float64) ** 2,
    "x^0.5": lambda x: np.asarray(x, dtype=np.float64) ** 0.5,
    "x": lambda x: np.asarray(x, dtype=np.float64),
}
"""Su's θ(x) (Su, 2021): the paper's ``10000^(−x)``, his preferred ``1000^(−x)``, power
laws ``x^α`` and the linear ``x`` (the one whose integral crosses zero)."""


def gram(E: ArrayLike) -> NDArray[np.float64]:
    """Gram matrix ``G[m, n] = ⟨E[m], E[n]⟩`` of a ``[S, d]`` table, ``[S, S]`` (Su, 2021)."""
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
    """``k(x) = Σ_i cos(x w_i)``: the inner product of two (cos, sin)-pair encodings ``x`` apart (Su, 2021).

    ``distances`` is an int ``S`` (``0 … S−1``) or a 1-D array of real distances; returns the
    same length. Angles ``x·w`` are formed in float64 by :func:`posenc.tables.angles`.
    """
    return np.cos(tables.angles(distances, frequencies, name="distances")).sum(axis=1)


def decay_integral(
    theta: Theta, distances: ArrayLike | int, *, dim: int, weight: Theta | None = None
) -> NDArray[np.float64]:
    """Su's continuum limit ``n · Re ∫₀¹ h(u) exp(i x θ(u)) du`` for each distance ``x`` (Su, 2021).

    ``n = ⌈d/2⌉`` is the number of terms of the sum it approximates (:func:`su_decay`), so the
    two agree at ``x = 0`` for odd ``d`` too. Without ``weight`` (``h ≡ 1``) a :class:`Geometric`
    ``θ`` is integrated in closed form (10⁴ distances in about a millisecond); anything else by
    adaptive quadrature of the vector ``h(u) cos(x θ(u))`` over all ``x`` at once
    (:func:`scipy.integrate.quad_vec`, absolute tolerance 1e-11).

    Args:
        theta: ``θ: [0, 1] → ℝ`` accepting a float64 array (e.g. :data:`SU_SCHEDULES` entries).
        distances: int ``S`` or a 1-D array of real distances ``x``.
        dim: ``d``; the result is scaled by ``⌈d/2⌉`` to compare with :func:`frequency_kernel`.
        weight: Su's ``h(u)`` of a diagonal bilinear form (:func:`posenc.analysis.weighted_decay_integral`).
    """
    dim = validate.positive_int("dim", dim)
    if not callable(theta):
        raise TypeError(f"theta must be a callable θ(u) on [0, 1], got {theta!r}")
    if weight is not None and not callable(weight):
        raise TypeError(f"weight must be a callable h(u) on [0, 1] or None, got {weight!r}")
    x = validate.positions(distances, name="distances")
    terms = spectrum.n_pairs(dim)
    if weight is None and isinstance(theta, Geometric):
        return terms * theta.integral(x)

    def at(fn: Theta, u: float) -> float:
        return float(np.asarray(fn(np.array([u])), dtype=np.float64)[0])

    def integrand(u: float) -> NDArray[np.float64]:
        h_u = 1.0 if weight is None else at(weight, u)
        return h_u * np.cos(x * at(theta, u))

    values, _ = integrate.quad_vec(integrand, 0.0, 1.0, epsabs=1e-11, epsrel=1e-10, limit=4000)
    return terms * values


def su_decay(
    theta: Theta, distances: ArrayLike | int, *, dim: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Su's comparison: ``(Σ_i cos(x θ(2i/d)), ⌈d/2⌉·Re ∫₀¹ exp(i x θ(u)) du)`` at each distance (Su, 2021).

    The discrete sum uses the frequencies :func:`posenc.spectrum.su` builds from ``θ``; it
    follows the integral up to about :func:`riemann_limit` of those frequencies.
    """
    freq = spectrum.su(dim, theta)
    return frequency_kernel(freq, distances), decay_integral(theta, distances, dim=dim)


def riemann_limit(frequencies: ArrayLike) -> float:
    """The distance ``x`` from which two neighbouring phases ``x w_i``, ``x w_(i+1)`` differ by more than π.

    ``π / max_i |w_(i+1) − w_i|`` over the frequencies in the order given (the schedule's order).
    Beyond it the sum ``Σ_i cos(x w_i)`` samples ``cos(x θ(u))`` less than twice per period,
    stops being a Riemann sum of Su's integral and no longer decays: for the paper's
    ``10000^(−2i/d)`` the largest step is the first, ``1 − 10000^(−2/d)``, so ``x ≈ 88.9`` at
    ``d = 512`` and ``x ≈ 23.4`` at ``d = 128`` (the continuum step ``θ'(0)·2/d = 2 ln ρ / d`` gives
    the slightly smaller ``π d / (2 ln ρ)`` = 87.3 at ``d = 512``). A single frequency has no neighbour: ``inf``.
    """
    w = spectrum.custom(frequencies)
    steps = np.abs(np.diff(w))
    return math.inf if steps.size == 0 or steps.max() == 0.0 else float(math.pi / steps.max())
