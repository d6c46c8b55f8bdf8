"""The linear shift operator ``T^(k)`` and how well any table admits one (Denk, 2019).

For an encoding built from (sin, cos) pairs there is, for every offset ``k``, a matrix
independent of ``t`` with ``T^(k) · PE[t] = PE[t+k]``: block diagonal, one 2×2 block per
frequency ``w`` acting on the pair's (sin, cos) columns (Denk, 2019, eq. 9)::

    [sin(w(t+k))]   [ cos(wk)  sin(wk)] [sin(wt)]
    [cos(w(t+k))] = [-sin(wk)  cos(wk)] [cos(wt)]

The DFT encoding (Idé et al., 2024, eq. 21) is shifted by the same blocks on its ``(a_k, b_k)``
columns; its constant ``a_0`` is fixed and its Nyquist term ``b_0 = cos(πs)/√d`` flips sign
with odd ``k``. For any table ``E`` (a learned one included),
:func:`linear_shift_residual` measures the best linear map from rows ``t`` to rows ``t+k``.
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import spectrum, tables, validate
from posenc.analysis import _checks


def _pair_rotations(
    dim: int,
    k: float,
    frequencies: NDArray[np.float64],
    sin_cols: NDArray[np.intp],
    cos_cols: NDArray[np.intp],
) -> NDArray[np.float64]:
    """A ``dim × dim`` matrix holding one shift block per (sin, cos) column pair, zero elsewhere."""
    angle = tables.angles(np.array([k], dtype=np.float64), frequencies)[0]  # k·w_i, float64
    c, s = np.cos(angle), np.sin(angle)
    op = np.zeros((dim, dim))
    op[sin_cols, sin_cols] = c
    op[sin_cols, cos_cols] = s
    op[cos_cols, sin_cols] = -s
    op[cos_cols, cos_cols] = c
    return op


def shift_operator(
    k: float,
    *,
    dim: int,
    base: float = tables.DEFAULT_BASE,
    frequencies: ArrayLike | None = None,
    layout: str = "interleaved",
) -> NDArray[np.float64]:
    """``T^(k)`` of a sinusoidal table (Denk, 2019, eqs. 4 and 9): ``PE[t+k] = T^(k) PE[t]``.

    Args:
        k: the offset, any finite real number.
        dim: ``d``, even (a lone sine of odd ``d`` has no exact linear shift; use
            :func:`linear_shift_residual` to measure the best one).
        base: ``ρ`` of the geometric schedule; ignored when ``frequencies`` is given.
        frequencies: ``d/2`` angular frequencies of any schedule (:mod:`posenc.spectrum`).
        layout: column layout of the table, one of :data:`posenc.spectrum.LAYOUTS`.

    Returns:
        ``[d, d]`` block-diagonal (after the layout's column permutation) float64 matrix.
    """
    dim = validate.positive_int("dim", dim)
    k = _checks.real(k, name="k")
    if dim % 2:
        raise ValueError(
            f"dim must be even for an exact shift operator, got {dim}: the last column of an odd-d table is a "
            "sine without its cosine, and no linear map shifts a lone sine"
        )
    w = spectrum.geometric(dim, base) if frequencies is None else spectrum.custom(frequencies, dim)
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    return _pair_rotations(dim, k, w, sin_cols, cos_cols)


def dft_shift_operator(k: int, *, dim: int) -> NDArray[np.float64]:
    """``T^(k)`` of the DFT encoding (Idé et al., 2024, eq. 21): ``e(s+k) = T^(k) e(s)``.

    Column order ``(a_0, a_1 … a_K, b_1 … b_K, b_0)``: each ``(b_l, a_l)`` is a (sin, cos)
    pair at ``ω_l = 2πl/d``; ``a_0`` is constant (entry 1) and the Nyquist ``b_0`` gets
    ``cos(πk) = (−1)^k`` (even ``d`` only). Valid for integer ``s`` and ``k``; rows beyond
    ``d − 1`` are the aliased ones (Theorem 1 holds only on the lattice).

    Returns:
        ``[d, d]`` float64 matrix.
    """
    dim = validate.positive_int("dim", dim)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an int for the DFT encoding (positions are lattice points), got {k!r}")
    n_k = (dim - 1) // 2  # K
    pairs = np.arange(1, n_k + 1)
    op = _pair_rotations(dim, float(k), spectrum.dft(dim)[pairs], n_k + pairs, pairs)
    op[0, 0] = 1.0
    if dim % 2 == 0:
        op[dim - 1, dim - 1] = -1.0 if k % 2 else 1.0
    return op


def operator_residual(E: ArrayLike, operator: ArrayLike, k: int) -> float:
    """Relative residual ``‖E[:-k] Tᵀ − E[k:]‖_F / ‖E[k:]‖_F`` of a given shift operator ``T``.

    Args:
        E: ``[S, d]`` table, rows are positions ``0 … S−1``.
        operator: ``[d, d]`` matrix ``T`` with ``E[t+k] ≈ T E[t]``.
        k: offset, ``1 ≤ k ≤ S−1``.
    """
    table = _checks.table(E, min_rows=2)
    op = validate.finite_array("operator", operator, ndim=2)
    d = table.shape[1]
    if op.shape != (d, d):
        raise ValueError(f"operator must be [d, d] = {(d, d)} for a table of {d} columns, got {op.shape}")
    k = _checks.offset(k, length=table.shape[0])
    target = table[k:]
    return _relative(table[:-k] @ op.T - target, target)


def linear_shift_residual(E: ArrayLike, k: int) -> float:
    """Relative residual of the best linear map from rows ``t`` to rows ``t+k`` of any table.

    ``T̂ = argmin_T ‖E[:-k] Tᵀ − E[k:]‖_F`` (least squares, :func:`numpy.linalg.lstsq`); the
    result is ``‖E[:-k] T̂ᵀ − E[k:]‖_F / ‖E[k:]‖_F``: ~1e-15 for sinusoidal and DFT tables,
    large for a sine-only table (≈0.44 for ``d = 64``, ``k = 7``, 200 positions).

    Args:
        E: ``[S, d]`` table.
        k: offset, ``1 ≤ k ≤ S−1``; needs ``S − k > d`` pairs: with fewer, every table is fit
            exactly and the residual says nothing, so that case raises ``ValueError``.
    """
    table = _checks.table(E, min_rows=2)
    k = _checks.offset(k, length=table.shape[0])
    n_pairs, d = table.shape[0] - k, table.shape[1]
    if n_pairs <= d:
        raise ValueError(
            f"the best linear shift needs more row pairs (S - k = {n_pairs}) than columns (d = {d}): with "
            "fewer, any table is mapped exactly and the residual is meaningless; use a longer table or smaller k"
        )
    source, target = table[:-k], table[k:]
    coef, *_ = np.linalg.lstsq(source, target, rcond=None)
    return _relative(source @ coef - target, target)


def _relative(residual: NDArray[np.float64], reference: NDArray[np.float64]) -> float:
    norm = float(np.linalg.norm(reference))
    if norm == 0.0:
        raise ValueError("the shifted rows E[k:] are all zero: a relative residual is undefined")
    return float(np.linalg.norm(residual) / norm)
