"""posenc's optional compiled loops (the C extension ``posenc._kernels``), or ``None``.

The extension is built at install time when a C compiler is available. Where it is missing, or
when the environment variable ``POSENC_NATIVE=0`` is set, :data:`kernels` is ``None`` and posenc runs
its pure NumPy/PyTorch code, which computes the same values (the tests compare the two).

Its three loops (each a single pass over its output; see ``_kernels.c``):

* ``rotate(x, out, cos, sin, dtype, tdtype, layout, n0, n1, s, d, r, xs0, xs1, xs2, os0, os1, os2, ts,
  paired)``: rotary pairs (Su et al. 2021, eq. 34), used by :func:`posenc.nn.rotary.apply_rotary`; the
  tables (``tdtype``) are in the work dtype, or bfloat16 beside bfloat16 ``x``;
* ``slots(src, dst, index, dtype, mode, nb, g, sq, k, n)``: Shaw et al.'s (2018) relative positions,
  a gather from ``n`` slots per row by an index shared over heads (written, or added to ``dst``), or its
  adjoint (a sum into the slots), :data:`SLOT_MODES`; used by :mod:`posenc.nn._slots`;
* ``expi_rows(out, dtype, layout, n, b, f, ld, w, start, step, stream)``: sinusoidal rows by the angle
  addition formula, called through :func:`expi_rows` by :func:`posenc.sinusoidal` and the PyTorch tables.

Arguments are data pointers, sizes and strides in elements; callers check them. All loops run on
the calling thread: a second thread measured slower on the 2-core machine of ``benchmarks/``.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

F32, F64, BF16 = 0, 1, 2
"""The kernels' dtype codes: float32, float64, bfloat16 (bfloat16 works in float32)."""

ROW_LAYOUTS = {"interleaved": 0, "interleaved_cos_first": 1, "split": 2}
"""``expi_rows`` layout codes: ``(Re, Im)`` pairs, ``(Im, Re)`` pairs, or all ``Re`` then all ``Im``."""

ROTARY_LAYOUTS = {"adjacent": 0, "half_split": 1}
"""``rotate`` layout codes."""

SLOT_MODES = {"gather": 0, "sum": 1, "gather_add": 2}
"""``slots`` modes: ``dst = src[index]``, ``dst = Σ`` into the slots, ``dst += src[index]``."""

STREAM_BYTES = 16 << 20
"""Outputs of at least this many bytes are written by non-temporal (streaming) stores: they would not
stay in the cache anyway, and streaming skips reading every destination line before writing it."""

_ITEM_BYTES = {F32: 4, F64: 8, BF16: 2}

_DTYPES = {
    "rotate": {"float32": F32, "float64": F64, "bfloat16": BF16},
    "expi_rows": {"float32": F32, "float64": F64},
    "slots": {"float32": F32, "float64": F64},
}


def dtype_code(dtype: object, loop: str) -> int | None:
    """The dtype code of a NumPy or torch ``dtype`` for ``loop`` (a key of ``_DTYPES``), or
    ``None`` if that loop does not take it. Read from the dtype's name, so this module needs no torch."""
    return _DTYPES[loop].get(str(dtype).removeprefix("torch."))


def _load() -> ModuleType | None:
    if os.environ.get("POSENC_NATIVE", "1").strip() == "0":
        return None
    try:
        return importlib.import_module("posenc._kernels")
    except ImportError:
        return None


kernels: ModuleType | None = _load()
"""The extension module, or ``None`` (not built, or disabled by ``POSENC_NATIVE=0``)."""


def expi_rows(
    out: int,
    dtype: int,
    layout: int,
    n: int,
    ld: int,
    b: int,
    w: NDArray[np.float64],
    start: float,
    step: float,
) -> None:
    """Rows ``r < n`` of ``out`` (a pointer to ``dtype`` rows ``ld`` apart) at ``t = start + step·r`` for the
    angular frequencies ``w``: row ``q·b + j`` holds ``fine[j]·coarse[q]`` (float64 complex products)
    rounded to ``dtype``, in ``layout`` (:data:`ROW_LAYOUTS`), streamed when the rows reach
    :data:`STREAM_BYTES`. The ``b`` fine and ``⌈n/b⌉`` coarse rows are those of
    :func:`posenc.tables._expi_ranges` (``(0, step, b, True)`` and ``(start, step·b, ⌈n/b⌉, False)``),
    built the same way in the loop. Requires :data:`kernels`."""
    assert kernels is not None
    w = np.ascontiguousarray(w, dtype=np.float64)
    f = w.shape[0]
    kernels.expi_rows(
        out, dtype, layout, n, b, f, ld, w.ctypes.data, float(start), float(step),
        streams(n * 2 * f * _ITEM_BYTES[dtype]),
    )  # fmt: skip


def streams(nbytes: int) -> int:
    """The kernels' ``stream`` flag for an output of ``nbytes``: 1 from :data:`STREAM_BYTES` on."""
    return int(nbytes >= STREAM_BYTES)
