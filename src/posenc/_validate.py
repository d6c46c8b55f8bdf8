"""Argument checks shared by every public entry point.

Each check raises ``TypeError``/``ValueError`` naming the parameter, the value received
and what is allowed (DESIGN "Conventions"), so that bad input never surfaces as a NumPy
broadcast error or a NaN from deep inside.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray


def positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not isinstance(value, bool):
            raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__}); pass int({value!r})")
        raise TypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value}")
    return int(value)


def positive_float(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive real number, got {value!r} ({type(value).__name__})")
    out = float(value)
    if not np.isfinite(out) or out <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value


def finite_array(name: str, value: ArrayLike, *, ndim: int) -> NDArray[np.float64]:
    """Return ``value`` as a float64 array of exactly ``ndim`` dimensions with finite entries."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be numeric, got {type(value).__name__}: {exc}") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got an array of shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{name} must be finite, got {arr[where]!r} at index {where if ndim > 1 else where[0]}")
    return arr


def positions(value: ArrayLike | int, *, name: str = "positions") -> NDArray[np.float64]:
    """Normalise ``positions``: an int ``S`` means ``0 … S−1``; else a 1-D finite sequence.

    Returns float64 positions (DESIGN "Conventions").
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return np.arange(positive_int(name, value), dtype=np.float64)
    if isinstance(value, (bool, str, bytes)) or isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be an int S (meaning 0…S-1) or a 1-D sequence of numbers, got {value!r}"
        )
    arr = finite_array(name, value, ndim=1)
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one position, got an empty sequence")
    return arr
