"""Reconstruction (Algorithm 1 of Idé et al., 2024) and faithfulness measures (Idé et al., 2024, §§2–3).

Algorithm 1 asks what the weights ``g_k`` an encoding puts on the DFT bins (eq. 15, eq. 22)
do to a reference function: take the DFT coefficients ``(a_k, b_k)`` of ``f``, multiply
``a_0`` by ``g_0``, ``b_0`` by ``g_(K+1)`` and ``a_k, b_k`` by ``g_k``, rescale to keep the
ℓ2 norm, inverse-DFT. With the reference one-hot at ``s`` the sinusoidal weights give a broad
bump (Fig. 2, top), flat weights a spike (Fig. 2, bottom).

The DFT coefficients of ``f`` on the orthonormal basis ``φ_l`` of eq. 12 are ``c = Φᵀ f`` and
the inverse is ``f = Φ c`` with ``Φ[t, l] = φ_l(t)`` — which is row ``t`` of the DFT encoding
(eqs. 17–21), so ``Φ = posenc.tables.dft(d, d)``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial import distance

from posenc import tables, validate
from posenc.analysis import _checks
from posenc.analysis.fourier import column_bins
from posenc.errors import UsageError


def dft_basis(dim: int) -> NDArray[np.float64]:
    """``Φ[t, l] = φ_l(t)``: the orthonormal real DFT basis of eq. 12 on ``t = 0 … d−1``, ``[d, d]``."""
    dim = validate.positive_int("dim", dim)
    return np.asarray(tables.dft(dim, dim), dtype=np.float64)


def one_hot(position: int, dim: int) -> NDArray[np.float64]:
    """The position function ``δ_(s,t)`` on the lattice ``t = 0 … d−1`` (Idé et al., 2024, §3.2), ``[d]``."""
    dim = validate.positive_int("dim", dim)
    if isinstance(position, bool) or not isinstance(position, numbers.Integral) or not 0 <= position < dim:
        raise UsageError(
            f"position must be an int in 0…dim-1 = 0…{dim - 1} (a point of the DFT lattice), got {position!r}"
        )
    f = np.zeros(dim)
    f[int(position)] = 1.0
    return f


def reconstruct(reference: ArrayLike, weights: ArrayLike) -> NDArray[np.float64]:
    """Algorithm 1 of Idé et al. (2024): reference function → weighted DFT coefficients → inverse DFT.

    Args:
        reference: ``f``, ``[d]`` values on the lattice ``t = 0 … d−1`` (e.g. :func:`one_hot`).
        weights: ``g``, ``[⌊d/2⌋ + 1]`` non-negative weights on the bins ``k = 0 … ⌊d/2⌋``
            (eq. 15 :func:`~posenc.analysis.frequency_distribution`, eq. 22
            :func:`~posenc.analysis.dft_distribution`, or all ones = plain inverse DFT).

    Returns:
        ``[d]`` reconstruction, with the ℓ2 norm of the coefficients (hence of ``f``) kept.
    """
    f = validate.finite_array("reference", reference, ndim=1)
    dim = f.size
    if dim < 2:
        raise ValueError(f"reference must hold at least 2 lattice points, got {dim}")
    g = validate.finite_array("weights", weights, ndim=1)
    if g.size != dim // 2 + 1:
        raise ValueError(
            f"weights must hold floor(d/2)+1 = {dim // 2 + 1} bin weights for d={dim}, got {g.size}"
        )
    if (g < 0).any() or not g.any():
        raise ValueError("weights must be non-negative and not all zero")
    basis = dft_basis(dim)
    coef = basis.T @ f  # steps 1: (a_0, a_1…a_K, b_1…b_K, b_0)
    weighted = coef * g[column_bins(dim)]  # steps 2–5
    norm = np.linalg.norm(weighted)
    if norm > 0.0:
        weighted *= np.linalg.norm(coef) / norm  # keep the ℓ2 norm (text below Algorithm 1)
    return basis @ weighted  # step 6: inverse DFT


@dataclass(frozen=True)
class Peak:
    """Summary of a reconstructed position function (Idé et al., 2024, Fig. 2).

    Attributes:
        position: ``argmax f``.
        height: ``f`` at the peak.
        width: full width at half maximum, in lattice steps (linear interpolation of the two
            half-height crossings; 1.0 for an isolated spike).
        peak_to_rest: ``height / max |f|`` outside the half-maximum interval (``inf`` if zero there).
        energy_at_peak: ``f(peak)² / Σ f²`` (1.0 for the one-hot).
    """

    position: int
    height: float
    width: float
    peak_to_rest: float
    energy_at_peak: float


def peak(f: ArrayLike) -> Peak:
    """Peak position, width at half maximum and peak-to-rest ratio of ``f`` (``[n]``, ``n ≥ 2``)."""
    v = validate.finite_array("f", f, ndim=1)
    if v.size < 2:
        raise ValueError(f"f must hold at least 2 values, got {v.size}")
    p = int(np.argmax(v))
    height = float(v[p])
    if height <= 0.0:
        raise ValueError(f"f has no positive peak (max {height!r}); a width at half maximum is undefined")
    half = height / 2.0
    left = p
    while left > 0 and v[left - 1] >= half:
        left -= 1
    right = p
    while right < v.size - 1 and v[right + 1] >= half:
        right += 1
    lo = left - (v[left] - half) / (v[left] - v[left - 1]) if left > 0 else float(left)
    hi = right + (v[right] - half) / (v[right] - v[right + 1]) if right < v.size - 1 else float(right)
    outside = np.ones(v.size, dtype=bool)
    outside[int(np.floor(lo)) + 1 : int(np.ceil(hi))] = False
    rest = float(np.abs(v[outside]).max()) if outside.any() else 0.0
    return Peak(
        position=p,
        height=height,
        width=float(hi - lo),
        peak_to_rest=height / rest if rest > 0.0 else float("inf"),
        energy_at_peak=height**2 / float(v @ v),
    )


def min_pairwise_distance(E: ArrayLike) -> float:
    """Injectivity: the smallest Euclidean distance between two rows of ``E`` (``[S, d]``, ``S ≥ 2``).

    0 means two positions share an encoding (Definition 1 of Idé et al., 2024, fails).
    """
    return float(distance.pdist(_checks.table(E, min_rows=2)).min())


def _unit_scale(table: NDArray[np.float64]) -> NDArray[np.float64]:
    """``table / max |table|``: decoding is scale-free, and squares and distances of entries near the
    float64 limits (1e200, 1e-300) would overflow or underflow where these do not."""
    scale = float(np.abs(table).max())
    return table / scale if scale > 0.0 else table


def _noisy(table: NDArray[np.float64], noise: float, seed: int) -> NDArray[np.float64]:
    rms = float(np.sqrt(np.mean(table**2)))
    return table + noise * rms * np.random.default_rng(seed).standard_normal(table.shape)


def nearest_neighbour_accuracy(E: ArrayLike, *, noise: float = 0.0, seed: int = 0) -> float:
    """Position decoding by nearest neighbour: the fraction of rows decoded to their own position.

    Each row gets Gaussian noise of standard deviation ``noise × RMS(E)`` per entry (so the
    measure does not depend on the table's scale) and is decoded to the nearest clean row
    (ties to the lowest position). ``noise = 0`` gives 1.0 iff all rows are distinct.
    """
    table = _unit_scale(_checks.table(E, min_rows=2))
    noise = _checks.nonnegative(noise, name="noise")
    seed = validate.non_negative_int("seed", seed)
    decoded = distance.cdist(_noisy(table, noise, seed), table).argmin(axis=1)
    return float(np.mean(decoded == np.arange(table.shape[0])))


def inverse_dft_accuracy(E: ArrayLike, *, noise: float = 0.0, seed: int = 0) -> float:
    """Position decoding of DFT-encoding rows by inverse DFT (Idé et al., 2024, Theorem 1): ``argmax_t (Φ e)(t)``.

    ``E`` holds rows ``e(0) … e(S−1)`` of the DFT encoding (``d`` columns, ``S ≤ d``); noise as
    in :func:`nearest_neighbour_accuracy`.
    """
    table = _unit_scale(_checks.table(E, min_rows=2))
    noise = _checks.nonnegative(noise, name="noise")
    seed = validate.non_negative_int("seed", seed)
    rows, dim = table.shape
    if rows > dim:
        raise ValueError(
            f"E has {rows} rows but the DFT lattice only {dim} points: positions >= d alias (Theorem 1)"
        )
    decoded = (_noisy(table, noise, seed) @ dft_basis(dim).T).argmax(axis=1)
    return float(np.mean(decoded == np.arange(rows)))
