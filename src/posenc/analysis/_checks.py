"""Argument checks of the analysis functions, built on :mod:`posenc.validate`.

Every check raises ``ValueError``/``TypeError`` naming the parameter, the value received
and what is allowed, before NumPy sees the data (DESIGN "Conventions").
"""

from __future__ import annotations

import numbers

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import validate


def table(value: ArrayLike, *, name: str = "E", min_rows: int = 1) -> NDArray[np.float64]:
    """Return ``value`` as a finite float64 ``(S, d)`` table with ``S ≥ min_rows`` and ``d ≥ 1``."""
    arr = validate.finite_array(name, value, ndim=2)
    if arr.shape[1] < 1:
        raise ValueError(f"{name} must have at least one column (feature), got shape {arr.shape}")
    if arr.shape[0] < min_rows:
        raise ValueError(
            f"{name} must have at least {min_rows} positions (rows) for this measure, got shape {arr.shape}"
        )
    return arr


def offset(k: object, *, length: int, name: str = "k") -> int:
    """Return ``k`` as an int shift with ``1 ≤ k ≤ length − 1`` (a pair ``t, t+k`` must exist)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        raise TypeError(f"{name} must be an int offset, got {k!r} ({type(k).__name__})")
    k = int(k)
    if not 1 <= k <= length - 1:
        raise ValueError(
            f"{name} must lie in 1…{length - 1} for a table of {length} positions "
            f"(rows t and t+{name} must both exist), got {k}"
        )
    return int(k)


def real(value: object, *, name: str) -> float:
    """Return ``value`` as a finite float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(float(value)):
        raise TypeError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def nonnegative(value: object, *, name: str) -> float:
    """Return ``value`` as a finite float ≥ 0."""
    out = real(value, name=name)
    if out < 0:
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return out
