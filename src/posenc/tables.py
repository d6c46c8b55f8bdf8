"""Encoding tables as NumPy arrays: the sinusoidal encoding and the faithful DFT encoding.

Every table is ``(S, dim)``: one row per position, one column per feature. Angles
``t·w`` are formed in float64 in :func:`angles` — the one place this happens — and only the
finished table is cast to the requested ``dtype`` (SPEC §1, "Precision").
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from posenc import _validate, spectrum

DEFAULT_BASE = spectrum.DEFAULT_BASE


def angles(positions: ArrayLike | int, frequencies: ArrayLike) -> NDArray[np.float64]:
    """The angle matrix ``A[s, i] = t_s · w_i`` in float64, ``(S, len(frequencies))``.

    ``positions`` follows the package convention (int ``S`` → ``0 … S−1``, else 1-D).
    """
    t = _validate.positions(positions)
    w = spectrum.custom(frequencies)
    return np.multiply.outer(t, w)


def _float_dtype(dtype: DTypeLike) -> np.dtype:
    try:
        out = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a NumPy floating dtype, got {dtype!r}") from None
    if out.kind != "f":
        raise TypeError(f"dtype must be a NumPy floating dtype (float16/32/64), got {out}")
    return out


def sinusoidal(
    positions: ArrayLike | int,
    dim: int,
    *,
    base: float = DEFAULT_BASE,
    layout: str = "interleaved",
    frequencies: ArrayLike | None = None,
    dtype: DTypeLike = np.float64,
) -> NDArray[np.floating]:
    """Sinusoidal positional encoding (Vaswani et al. 2017, §3.5; SPEC §1).

    ``PE[t, 2i] = sin(t·w_i)``, ``PE[t, 2i+1] = cos(t·w_i)``, ``w_i = base^(−2i/d)`` in the
    default ``"interleaved"`` layout; ``"interleaved_cos_first"`` (Su, seed su-*) and
    ``"split"`` (tensor2tensor / fairseq) permute the same columns
    (:data:`posenc.spectrum.LAYOUTS`). Odd ``dim`` drops the cosine of the last frequency.

    Args:
        positions: int ``S`` (positions ``0 … S−1``) or a 1-D sequence of finite numbers,
            fractional and negative ones included.
        dim: number of columns ``d``, a positive int.
        base: ``ρ`` of the geometric schedule; ignored when ``frequencies`` is given.
        layout: one of :data:`posenc.spectrum.LAYOUTS`.
        frequencies: ``⌈d/2⌉`` angular frequencies to use instead of the geometric schedule
            (any schedule of :mod:`posenc.spectrum`, or your own).
        dtype: floating dtype of the result; angles are float64 regardless.

    Returns:
        ``(S, dim)`` array.
    """
    dim = _validate.positive_int("dim", dim)
    w = spectrum.sinusoidal_frequencies(dim, base=base, frequencies=frequencies)
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    a = angles(positions, w)
    out = np.empty((a.shape[0], dim), dtype=_float_dtype(dtype))
    out[:, sin_cols] = np.sin(a)
    out[:, cos_cols] = np.cos(a[:, : cos_cols.size])
    return out


def dft_positions(positions: ArrayLike | int, dim: int, *, alias: bool = False) -> NDArray[np.float64]:
    """Validate DFT positions: integers in ``0 … dim−1``; with ``alias=True`` any integer, reduced mod ``dim``.

    Theorem 1 of seed ide-* holds only on the lattice ``0 … d−1``: position ``s + d`` has the
    same encoding as ``s``, so positions outside are refused unless aliasing is asked for.
    """
    dim = _validate.positive_int("dim", dim)
    t = _validate.positions(positions)
    frac = t != np.round(t)
    if frac.any():
        i = int(np.argmax(frac))
        raise ValueError(
            f"positions must be integers for the DFT encoding (a lattice of dim={dim} points); "
            f"got {t[i]!r} at index {i}"
        )
    if alias:
        return np.mod(t, dim)
    outside = (t < 0) | (t > dim - 1)
    if outside.any():
        i = int(np.argmax(outside))
        raise ValueError(
            f"positions must lie in 0…dim-1 = 0…{dim - 1} for the DFT encoding, got {t[i]:.0f} at "
            f"index {i}: position s+{dim} has the same encoding as s (seed ide-*, Theorem 1 holds "
            f"only on the lattice); use dim >= sequence length, or alias=True to wrap positions mod dim"
        )
    return t


def dft(
    positions: ArrayLike | int,
    dim: int,
    *,
    alias: bool = False,
    dtype: DTypeLike = np.float64,
) -> NDArray[np.floating]:
    """Faithful DFT positional encoding (Idé, Labaien & Chen; seed ide-* eqs. 17–21, SPEC §4).

    Row ``s`` is the DFT of the one-hot ``δ_(s,t)`` on the lattice ``t = 0 … d−1``, in the
    paper's order (eq. 21)::

        e(s) = (a_0, a_1 … a_K, b_1 … b_K, b_0)
        a_0 = 1/√d,  a_k = √(2/d)·cos(ω_k s),  b_k = √(2/d)·sin(ω_k s),  b_0 = cos(πs)/√d

    with ``ω_k = 2πk/d`` and ``K = d/2 − 1`` (even ``d``) or ``K = (d−1)/2`` and no ``b_0``
    (odd ``d``). ``‖e(s)‖ = 1``: entries are O(1/√d), unscaled here (the paper's encoding).

    Args:
        positions: int ``S`` or 1-D integers, all in ``0 … dim−1`` unless ``alias=True``.
        dim: ``d``, a positive int.
        alias: wrap positions mod ``dim`` instead of refusing them (the encoding is then
            periodic and no longer faithful beyond ``d``).
        dtype: floating dtype of the result; angles are float64 regardless.
    """
    dim = _validate.positive_int("dim", dim)
    t = dft_positions(positions, dim, alias=alias)
    n_k = (dim - 1) // 2  # K: number of (a_k, b_k) pairs with 1 ≤ k ≤ K
    out = np.empty((t.size, dim), dtype=_float_dtype(dtype))
    out[:, 0] = 1.0 / math.sqrt(dim)
    if n_k > 0:  # dim <= 2 has no (a_k, b_k) pairs
        a = angles(t, spectrum.dft(dim)[1 : n_k + 1])
        out[:, 1 : n_k + 1] = math.sqrt(2.0 / dim) * np.cos(a)
        out[:, n_k + 1 : 2 * n_k + 1] = math.sqrt(2.0 / dim) * np.sin(a)
    if dim % 2 == 0:
        out[:, dim - 1] = np.where(t % 2 == 0, 1.0, -1.0) / math.sqrt(dim)  # cos(π s), exact
    return out
