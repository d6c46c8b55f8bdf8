"""Argument checks shared by every public entry point.

Each check raises :class:`~posenc.errors.UsageTypeError` (a ``TypeError``) or
:class:`~posenc.errors.UsageError` (a ``ValueError``) naming the parameter, the value received
and what is allowed, so that bad input never surfaces as a NumPy broadcast error or a NaN from
deep inside, and the command line can tell it from a bug.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc.errors import UsageError, UsageTypeError


def positive_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and float(value).is_integer() and not isinstance(value, bool):
            raise UsageTypeError(
                f"{name} must be an int, got {value!r} ({type(value).__name__}); pass int({value!r})"
            )
        raise UsageTypeError(f"{name} must be a positive int, got {value!r} ({type(value).__name__})")
    if value <= 0:
        raise UsageError(f"{name} must be a positive int, got {value}")
    return int(value)


def non_negative_int(name: str, value: object) -> int:
    """Return ``value`` as an ``int`` if it is an integer ``>= 0`` (a seed, a gap), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageTypeError(f"{name} must be an int >= 0, got {value!r} ({type(value).__name__})")
    if value < 0:
        raise UsageError(f"{name} must be an int >= 0, got {value}")
    return int(value)


def size(name: str, value: object, *, bytes_per_item: int = 8) -> int:
    """Return ``value`` as a positive ``int`` length whose ``[value]`` float64 array can be allocated, else raise.

    (Larger requests would otherwise surface as a ``MemoryError`` from deep inside NumPy.)
    """
    n = positive_int(name, value)
    if n > 1 << 24:
        fits_in_memory(f"{name}={n}", float(n) * bytes_per_item, advice=f"lower {name}")
    return n


def positive_float(name: str, value: object) -> float:
    """Return ``value`` as a finite ``float`` > 0, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageTypeError(f"{name} must be a positive real number, got {value!r} ({type(value).__name__})")
    out = float(value)
    if not np.isfinite(out) or out <= 0:
        raise UsageError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """Return ``value`` if it is one of ``allowed``, else raise listing them."""
    if not isinstance(value, str) or value not in allowed:
        raise UsageError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
    return value


def finite_array(name: str, value: ArrayLike, *, ndim: int) -> NDArray[np.float64]:
    """Return ``value`` as a float64 array of exactly ``ndim`` dimensions with finite entries."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise UsageTypeError(f"{name} must be numeric, got {type(value).__name__}: {exc}") from None
    if arr.ndim != ndim:
        raise UsageError(f"{name} must be {ndim}-D, got an array of shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UsageError(
            f"{name} must be finite, got {arr[where]!r} at index {where if ndim > 1 else where[0]}"
        )
    return arr


def positions(value: ArrayLike | int, *, name: str = "positions") -> NDArray[np.float64]:
    """Normalise ``positions``: an int ``S`` means ``0 … S−1``; else a 1-D finite sequence.

    Returns float64 positions (DESIGN "Conventions").
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return np.arange(size(name, value), dtype=np.float64)
    if isinstance(value, (bool, str, bytes, numbers.Real)):
        raise UsageTypeError(
            f"{name} must be an int S (meaning 0…S-1) or a 1-D sequence of numbers, got {value!r}"
        )
    arr = finite_array(name, value, ndim=1)
    if arr.size == 0:
        raise UsageError(f"{name} must hold at least one position, got an empty sequence")
    return arr


def boolean(name: str, value: object) -> bool:
    """Return ``value`` if it is a ``bool`` (or NumPy bool); refuse truthy stand-ins such as ``"yes"``, 1 or None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise UsageTypeError(f"{name} must be True or False, got {value!r} ({type(value).__name__})")


def output_path(name: str, path: os.PathLike[str] | str, *, folder: bool) -> Path:
    """``path`` as a :class:`Path` where a file (``folder=False``) or a folder can be written, else raise.

    Refused before any work: a file path naming an existing folder, a folder path naming an
    existing file, and a path under an existing file (which cannot hold anything).
    """
    path = Path(path)
    if str(path) == "":
        raise UsageError(f"{name} must name a {'folder' if folder else 'file'}, got an empty path")
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{name} {str(path)!r} is an existing file; a folder is needed here")
    if not folder and path.is_dir():
        raise UsageError(f"{name} {str(path)!r} is an existing folder; a file path is needed here")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(
                    f"{name} {str(path)!r} lies under {str(parent)!r}, which is a file, not a folder"
                )
            break
    return path


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``), or ``None`` when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, OSError, ValueError):
        return None


def fits_in_memory(what: str, n_bytes: float, *, advice: str) -> None:
    """Raise :class:`UsageError` before allocating ``n_bytes`` for ``what`` when they exceed the available memory.

    ``advice`` says which parameters to lower (e.g. ``"lower --length"``).
    """
    free = available_memory()
    if free is not None and n_bytes > free:
        raise UsageError(
            f"{what} would need {n_bytes / 2**30:.3g} GiB, more than the {free / 2**30:.3g} GiB of "
            f"memory available; {advice}"
        )
