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
    """Return ``value`` as a float64 array of exactly ``ndim`` dimensions with finite entries.

    Real numbers only: complex values (whose imaginary part a cast would drop) and text (which
    a cast would parse) are refused, as are integers too large for float64.
    """
    if _kind_of(value) in ("c", "U", "S", "M", "m", "V"):
        raise UsageTypeError(
            f"{name} must hold real numbers, got {_dtype_name(value)} values; pass an int or float array"
        )
    try:
        arr = np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise UsageError(f"{name} must be finite, got an integer too large for float64") from None
    except (TypeError, ValueError) as exc:
        raise UsageTypeError(f"{name} must be numeric, got {type(value).__name__}: {exc}") from None
    if arr.ndim != ndim:
        raise UsageError(f"{name} must be {ndim}-D, got an array of shape {arr.shape}")
    bad = ~np.isfinite(arr)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise UsageError(
            f"{name} must be finite, got {float(arr[where])!r} at index {where if ndim > 1 else where[0]}"
        )
    return arr


POSITION_LIMIT = 2**53
"""Positions must stay below this in magnitude: float64, the dtype of every angle, holds every
integer up to it and rounds neighbouring integers above it to the same number."""


def position_limit_message(name: str) -> str:
    """What tensor positions ``name`` holding a value that is not finite or of magnitude ``>= 2^53`` are
    told, by the device check of :mod:`posenc.nn._positions` and by the compiled loops alike."""
    return f"{name} must be finite and < 2^53 in magnitude (float64 cannot tell larger positions apart)"


def _kind_of(value: object) -> str:
    """The NumPy dtype kind ``value`` would become (``"O"`` when it cannot become an array)."""
    try:
        return np.asarray(value).dtype.kind
    except (TypeError, ValueError, OverflowError):
        return "O"


def _dtype_name(value: object) -> str:
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(value).dtype
        except (TypeError, ValueError, OverflowError):
            return type(value).__name__
    return str(dtype)


def positions(value: ArrayLike | int, *, name: str = "positions") -> NDArray[np.float64]:
    """Normalise ``positions``: an int ``S`` means ``0 … S−1``; else a 1-D finite sequence.

    Any integer or floating dtype is accepted; booleans, complex numbers and text are refused, and
    so are positions of magnitude ``>= 2^53`` (:data:`POSITION_LIMIT`), which float64 cannot tell
    apart from their neighbours. Returns float64 positions (DESIGN "Conventions").
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return np.arange(size(name, value), dtype=np.float64)
    if isinstance(value, (bool, str, bytes, numbers.Real)):
        raise UsageTypeError(
            f"{name} must be an int S (meaning 0…S-1) or a 1-D sequence of numbers, got {value!r}"
        )
    if _kind_of(value) == "b":
        raise UsageTypeError(f"{name} must hold numbers, got booleans {value!r}; pass an int or float array")
    arr = finite_array(name, value, ndim=1)
    if arr.size == 0:
        raise UsageError(f"{name} must hold at least one position, got an empty sequence")
    big = np.abs(arr) >= POSITION_LIMIT
    if big.any():
        i = int(np.argmax(big))
        raise UsageError(
            f"{name} must be < 2^53 in magnitude (float64 cannot tell larger positions apart), "
            f"got {_exact(value, i)} at index {i}"
        )
    return arr


def _exact(value: object, i: int) -> str:
    """Entry ``i`` of ``value`` as given (an int64 above 2^53 would print rounded as a float)."""
    try:
        return repr(np.asarray(value)[i].item())
    except (TypeError, ValueError, IndexError, OverflowError):
        return "a value"


def names(name: str, value: object) -> list[str]:
    """``value`` as a non-empty list of names: a list/tuple of strings, or one string of comma-separated names.

    ``"M-6"`` is ``["M-6"]`` and ``"M-6,M-1"`` is ``["M-6", "M-1"]`` (a bare string is never split into
    its characters); anything else is refused saying how to write a list.
    """
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UsageTypeError(
            f"{name} must be a list of names, got {value!r} ({type(value).__name__}); write one name, "
            f'comma-separated names (a,b) or a JSON list (["a", "b"])'
        )
    if not value:
        raise UsageError(f"{name} must name at least one, got an empty list")
    return list(value)


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
