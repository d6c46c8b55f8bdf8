"""posenc's optional compiled loops (the C extension ``posenc._kernels``), each behind one checked wrapper.

The extension is built at install time when a C compiler is available. Where it is missing, or
when the environment variable ``POSENC_NATIVE=0`` is set, :data:`kernels` is ``None`` and posenc runs
its pure NumPy/PyTorch code, which computes the same values (the tests compare the two).

Its three loops (each a single pass over its output; see ``_kernels.c``), called only through the
wrappers here:

* :func:`rotate`: rotary pairs (Su et al. 2021, eq. 34), the first backend of :mod:`posenc.backends.rotate`;
* :func:`slots`: Shaw et al.'s (2018) relative positions, a gather from ``n`` slots per row by an index
  shared over heads (written, or added to ``dst``), or its adjoint (a sum into the slots); used by
  :mod:`posenc.nn._slots`;
* :func:`expi_rows`: sinusoidal rows by the angle addition formula, used by :func:`posenc.sinusoidal` and
  the PyTorch tables.

The loops take data pointers, sizes and strides in elements and trust them. Each wrapper takes the
arrays themselves (NumPy arrays or CPU torch tensors) and checks, before the call, their dimensions,
sizes, dtypes, the unit strides and contiguity the loop assumes, the device, that an output writes no
element twice and shares no memory with an input, and that every element the loop addresses lies in its
array's storage (:mod:`posenc._buffers`): a mistake is a ``TypeError`` (a dtype or type) or a
``ValueError`` (the rest) naming the argument, never a stray read or write. All loops run on the calling
thread.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from posenc._buffers import buffer, require_disjoint

if TYPE_CHECKING:
    import torch

    Array = NDArray[Any] | torch.Tensor

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


def _loaded() -> ModuleType:
    if kernels is None:
        raise RuntimeError("posenc._kernels is not loaded (not built, or POSENC_NATIVE=0)")
    return kernels


def _choice(name: str, value: str, codes: dict[str, int]) -> int:
    if value not in codes:
        raise ValueError(f"{name} = {value!r}, expected one of {', '.join(map(repr, codes))}")
    return codes[value]


def rotate(x: Array, out: Array, cos: Array, sin: Array, layout: str, paired: bool) -> None:
    """``out = R x`` for ``x`` ``[n0, n1, s, d]`` (Su et al. 2021, eq. 34): the pairs of the first ``r``
    columns rotated, ``layout`` (:data:`ROTARY_LAYOUTS`) pairing column ``i`` with ``i + r/2``
    (``half_split``) or ``2i`` with ``2i + 1`` (``adjacent``); columns ``r … d−1`` copied.

    With ``paired``, ``cos`` and ``sin`` are ``[s, r/2]``, one angle per pair, and
    ``out_a = x_a·c − x_b·s``, ``out_b = x_b·c + x_a·s``; else ``[s, r]`` in the pair layout with the
    sines signed, ``out_a = x_a·c_a + x_b·σ_a``, ``out_b = x_b·c_b + x_a·σ_b``. ``x`` is float32, float64
    or bfloat16 with contiguous rows (any strides between rows); the tables are in the work dtype
    (float64 for float64 ``x``, else float32) or bfloat16 beside bfloat16 ``x``, with contiguous rows and
    equal strides; ``out`` has ``x``'s shape and dtype, contiguous rows, no element twice, apart from
    ``x`` and the tables. Requires :data:`kernels`."""
    loop = _loaded()
    code = _choice("layout", layout, ROTARY_LAYOUTS)
    xb, ob, cb, sb = buffer("x", x), buffer("out", out), buffer("cos", cos), buffer("sin", sin)
    xb.require_ndim(4, "[n0, n1, s, d]")
    xb.require_dtype(tuple(_DTYPES["rotate"]))
    ob.require_shape(xb.shape, "x's shape")
    ob.require_dtype((xb.dtype,))
    work = "float64" if xb.dtype == "float64" else "float32"
    cb.require_ndim(2, "[s, r/2] (paired) or [s, r]")
    cb.require_dtype((work, "bfloat16") if xb.dtype == "bfloat16" else (work,))
    sb.require_shape(cb.shape, "cos's shape")
    sb.require_dtype((cb.dtype,))
    for b in (xb, ob, cb, sb):
        b.require_unit_stride()
        b.require_inside()
    n0, n1, s, d = xb.shape
    rows, cols = cb.shape
    r = 2 * cols if paired else cols
    if rows != s:
        raise ValueError(f"cos: {rows} rows for the s = {s} positions of x")
    if r % 2 or r > d:
        raise ValueError(f"cos: {cols} columns give r = {r} rotated dims; r must be even and at most d = {d}")
    if s > 1 and cb.strides[0] < cols:
        raise ValueError(f"cos: row stride {cb.strides[0]}, expected at least its {cols} columns")
    if s > 1 and cb.strides[0] != sb.strides[0]:
        raise ValueError(f"sin: row stride {sb.strides[0]}, expected cos's {cb.strides[0]}")
    ob.require_unaliased()
    require_disjoint(ob, xb, cb, sb)
    if ob.numel == 0:
        return
    loop.rotate(
        xb.ptr, ob.ptr, cb.ptr, sb.ptr, _DTYPES["rotate"][xb.dtype], _DTYPES["rotate"][cb.dtype], code,
        n0, n1, s, d, r, *xb.strides[:3], *ob.strides[:3], cb.strides[0], int(paired),
    )  # fmt: skip


def rotate_trusted(
    x: torch.Tensor, out: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, paired: bool
) -> None:
    """The loop of :func:`rotate` without its checks, for torch tensors whose signature (shapes, strides,
    dtypes, storage offsets and sizes: all the checks read but the addresses) already passed them, with an
    ``out`` made for the call (apart from the inputs). Only :mod:`posenc.backends.rotate` calls it, once it
    has checked that signature through :func:`rotate`."""
    if out.numel() == 0:
        return
    n0, n1, s, d = x.shape
    cols = cos.shape[1]
    codes = _DTYPES["rotate"]
    kernels.rotate(  # type: ignore[union-attr]
        x.data_ptr(), out.data_ptr(), cos.data_ptr(), sin.data_ptr(),
        codes[str(x.dtype)[6:]], codes[str(cos.dtype)[6:]], ROTARY_LAYOUTS[layout],
        n0, n1, s, d, 2 * cols if paired else cols, *x.stride()[:3], *out.stride()[:3], cos.stride(0),
        int(paired),
    )  # fmt: skip


def slots(src: Array, dst: Array, index: Array, mode: str) -> None:
    """Shaw et al.'s (2018) slot maps, row ``(ib, h, i)`` of ``src`` and ``dst`` (``[nb, g, s_q, ·]``)
    with row ``(ib, i)`` of ``index`` (``[nb, s_q, k]``, int64) for every head ``h``, in ``mode``
    (:data:`SLOT_MODES`): ``gather`` ``dst[…, j] = src[…, index[ib, i, j]]`` (``src`` ``[…, n]``,
    ``dst`` ``[…, k]``), ``gather_add`` the same added to ``dst``, ``sum`` its adjoint
    ``dst[…, t] = Σ_{j : index[ib, i, j] = t} src[…, j]`` (``src`` ``[…, k]``, ``dst`` ``[…, n]``).

    ``src`` and ``dst`` float32 or float64 alike; all three contiguous; ``dst`` apart from ``src`` and
    ``index``; ``n ≥ 1`` where there is anything to write. An index value outside ``[0, n)`` is an
    ``IndexError``, found by the loop before it reads the row. Requires :data:`kernels`."""
    loop = _loaded()
    code = _choice("mode", mode, SLOT_MODES)
    sb, db, ib = buffer("src", src), buffer("dst", dst), buffer("index", index)
    sb.require_ndim(4, "[nb, g, s_q, n], or [nb, g, s_q, k] for sum")
    db.require_ndim(4, "[nb, g, s_q, k], or [nb, g, s_q, n] for sum")
    ib.require_ndim(3, "[nb, s_q, k]")
    ib.require_dtype(("int64",))
    sb.require_dtype(tuple(_DTYPES["slots"]))
    db.require_dtype((sb.dtype,))
    nb, g, sq = sb.shape[:3]
    k = ib.shape[2]
    ib.require_shape((nb, sq, k), "src's nb and s_q")
    adjoint = code == SLOT_MODES["sum"]
    slotted, keyed = (db, sb) if adjoint else (sb, db)
    n = slotted.shape[3]
    keyed.require_shape((nb, g, sq, k), "src's nb, g, s_q and index's k")
    slotted.require_shape((nb, g, sq, n), "src's nb, g and s_q")
    for b in (sb, db, ib):
        b.require_contiguous()
        b.require_inside()
    require_disjoint(db, sb, ib)
    if db.numel == 0:
        return
    if n < 1:
        raise ValueError(f"{slotted.name}: n = 0 slots per row, expected at least 1")
    loop.slots(sb.ptr, db.ptr, ib.ptr, _DTYPES["slots"][sb.dtype], code, nb, g, sq, k, n)


def expi_rows(out: Array, layout: str, w: NDArray[np.float64], start: float, step: float, block: int) -> None:
    """Row ``r`` of ``out`` (``[n, 2f]``, float32 or float64, contiguous rows, no element twice) at
    ``t = start + step·r`` for the ``f`` angular frequencies ``w``: row ``q·b + j`` (``b = block ≥ 1``;
    rows past ``n`` are not written) holds ``fine[j]·coarse[q]`` (float64 complex products) rounded to ``out``'s dtype, in
    ``layout`` (:data:`ROW_LAYOUTS`), streamed when the rows reach :data:`STREAM_BYTES`. The ``b`` fine and
    ``⌈n/b⌉`` coarse rows are those of :func:`posenc.tables._expi_ranges` (``(0, step, b, True)`` and
    ``(start, step·b, ⌈n/b⌉, False)``), built the same way in the loop. Requires :data:`kernels`."""
    loop = _loaded()
    code = _choice("layout", layout, ROW_LAYOUTS)
    ob = buffer("out", out)
    ob.require_ndim(2, "[n, 2f]")
    ob.require_dtype(tuple(_DTYPES["expi_rows"]))
    w = np.ascontiguousarray(w, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"w: shape {w.shape}, expected 1-D frequencies")
    n, f = ob.shape[0], w.shape[0]
    ob.require_shape((n, 2 * f), "2f columns for the f frequencies of w")
    ob.require_unit_stride()
    ob.require_inside()
    if n > 1 and ob.strides[0] < 2 * f:
        raise ValueError(f"out: row stride {ob.strides[0]}, expected at least its {2 * f} columns")
    if n == 0:
        return
    if block < 1:
        raise ValueError(f"block = {block}, expected at least 1")
    loop.expi_rows(
        ob.ptr, _DTYPES["expi_rows"][ob.dtype], code, n, block, f, ob.strides[0] if n > 1 else 2 * f,
        w.ctypes.data, float(start), float(step), streams(n * 2 * f * ob.itemsize),
    )  # fmt: skip


def streams(nbytes: int) -> int:
    """The kernels' ``stream`` flag for an output of ``nbytes``: 1 from :data:`STREAM_BYTES` on."""
    return int(nbytes >= STREAM_BYTES)
