"""posenc's optional compiled loops (the C extension ``posenc._kernels``), each behind one checked wrapper.

The extension is built at install time when a C compiler is available. Where it is missing, or
when the environment variable ``POSENC_NATIVE=0`` is set, :data:`kernels` is ``None`` and posenc runs
its pure NumPy/PyTorch code, which computes the same values (the tests compare the two).

Its four loops (each a single pass over its output; see ``_kernels.c``), called only through the
wrappers here:

* :func:`rotate`: rotary pairs (Su et al. 2021, eq. 34), the first backend of :mod:`posenc.backends.rotate`;
* :func:`rotate_qk`: queries and keys rotated in one call by cached tables gathered at their positions
  (float64 angles beyond the cache), the CPU backend of :mod:`posenc.backends.rotate_qk`;
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

from posenc import validate
from posenc._buffers import Buffer, buffer, require_disjoint

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


def _require_tables(cb: Buffer, sb: Buffer, x_dtype: str, shape: str) -> None:
    """The rotary loops' tables: ``cos`` 2-D (``shape`` names its form) in the work dtype of ``x`` (float64
    beside float64, else float32) or bfloat16 beside bfloat16 ``x``; ``sin`` of ``cos``'s shape and dtype."""
    work = "float64" if x_dtype == "float64" else "float32"
    cb.require_ndim(2, shape)
    cb.require_dtype((work, "bfloat16") if x_dtype == "bfloat16" else (work,))
    sb.require_shape(cb.shape, "cos's shape")
    sb.require_dtype((cb.dtype,))


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
    _require_tables(cb, sb, xb.dtype, "[s, r/2] (paired) or [s, r]")
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


def rotate_qk(
    q: Array,
    k: Array,
    q_out: Array,
    k_out: Array,
    positions: tuple[Array, Array] | None,
    offsets: tuple[int, int],
    cos: Array,
    sin: Array,
    theta: Array,
    layout: str,
    inverse: bool,
) -> None:
    """``q_out = R q``, ``k_out = R k`` (``Rᵀ`` when ``inverse``; Su et al. 2021, eq. 34) in one call, for
    ``q`` ``[b, h, s_q, d]`` and ``k`` ``[b, h_k, s_k, d]`` of one dtype (float32, float64, bfloat16; any
    strides between rows, unit last stride) into outputs of their shapes and dtype (no element twice, apart
    from every input and from each other).

    Positions: ``(q_pos, k_pos)``, int64 ``[b or 1, s_q]`` and ``[b or 1, s_k]`` (a row of 1 broadcasts;
    any strides), or ``None`` for ``offsets[0] + 0 … s_q − 1`` and ``offsets[1] + 0 … s_k − 1``. The table
    row of position ``t`` is row ``t`` of the cache ``cos``/``sin`` ``[n, r/2]`` (per-pair values, unit
    last stride, equal row strides; the work dtype as for :func:`rotate`, or bfloat16 beside bfloat16 ``q``)
    for ``0 ≤ t < n``, else ``a·cos(t·θ_i)``, ``a·sin(t·θ_i)`` from float64 angles rounded once to the
    tables' dtype, ``θ = theta[:r/2]``, ``a = theta[r/2]`` (``theta`` float64, contiguous). A position of
    magnitude ``≥ 2^53`` is a ``ValueError`` naming ``q_positions`` or ``k_positions`` and the first such
    value, found before anything is written. Requires :data:`kernels`."""
    loop = _loaded()
    code = _choice("layout", layout, ROTARY_LAYOUTS)
    qb, kb, qo, ko = buffer("q", q), buffer("k", k), buffer("q_out", q_out), buffer("k_out", k_out)
    cb, sb, tb = buffer("cos", cos), buffer("sin", sin), buffer("theta", theta)
    qb.require_ndim(4, "[b, h, s_q, d]")
    qb.require_dtype(tuple(_DTYPES["rotate"]))
    kb.require_ndim(4, "[b, h_k, s_k, d]")
    kb.require_dtype((qb.dtype,))
    b, d = qb.shape[0], qb.shape[3]
    if kb.shape[0] != b or kb.shape[3] != d:
        raise ValueError(f"k: shape {kb.shape}, expected [b = {b}, h_k, s_k, d = {d}] like q {qb.shape}")
    qo.require_shape(qb.shape, "q's shape")
    ko.require_shape(kb.shape, "k's shape")
    for out in (qo, ko):
        out.require_dtype((qb.dtype,))
    _require_tables(cb, sb, qb.dtype, "[n, r/2]")
    n, half = cb.shape
    if 2 * half > d:
        raise ValueError(f"cos: {half} columns give r = {2 * half} rotated dims, at most d = {d}")
    if n > 1 and (cb.strides[0] < half or sb.strides[0] != cb.strides[0]):
        raise ValueError(
            f"cos, sin: row strides {cb.strides[0]}, {sb.strides[0]}, expected equal and at least {half}"
        )
    tb.require_ndim(1, "[r/2 + 1] (the frequencies, then the attention factor)")
    tb.require_dtype(("float64",))
    tb.require_contiguous()
    if tb.shape[0] < half + 1:
        raise ValueError(f"theta: {tb.shape[0]} values, expected at least r/2 + 1 = {half + 1}")
    inputs = [qb, kb, cb, sb, tb]
    pos: list[Buffer] = []
    if positions is None:
        for name, offset, seq in (("q", offsets[0], qb.shape[2]), ("k", offsets[1], kb.shape[2])):
            if type(offset) is not int or offset < 0 or offset + seq > validate.POSITION_LIMIT:
                raise ValueError(
                    f"offsets: {name}'s {offset!r}, expected an int >= 0 with offset + s <= 2^53"
                )
    else:
        if not isinstance(positions, tuple) or len(positions) != 2:
            raise TypeError(f"positions: {type(positions).__name__}, expected (q_pos, k_pos) or None")
        pos = [buffer("q_pos", positions[0]), buffer("k_pos", positions[1])]
        for p, seq in zip(pos, (qb.shape[2], kb.shape[2]), strict=True):
            p.require_ndim(2, "[b or 1, s]")
            p.require_dtype(("int64",))
            if p.shape[0] not in (1, b) or p.shape[1] != seq:
                raise ValueError(f"{p.name}: shape {p.shape}, expected [{b} or 1, {seq}]")
        inputs += pos
    for t in (qb, kb, qo, ko, cb, sb):
        t.require_unit_stride()
    for t in (*inputs, qo, ko):
        t.require_inside()
    for out in (qo, ko):
        out.require_unaliased()
        require_disjoint(out, *inputs)
    require_disjoint(qo, ko)
    sides = []
    for x, o, i, offset in zip((qb, kb), (qo, ko), (0, 1), offsets, strict=True):
        rows = (pos[i].ptr, pos[i].shape[0], *pos[i].strides) if pos else (0, 0, 0, 0)
        sides.append((rows[0], (x.shape[1], x.shape[2], *rows[1:], offset, *x.strides[:3], *o.strides[:3])))
    (qp, q_side), (kp, k_side) = sides
    found = loop.rotate_qk(
        qb.ptr, kb.ptr, qo.ptr, ko.ptr, qp, kp, cb.ptr, sb.ptr, tb.ptr, _DTYPES["rotate"][qb.dtype],
        _DTYPES["rotate"][cb.dtype], code, int(inverse), int(positions is not None), b, d, 2 * half, n,
        cb.strides[0], *q_side, *k_side,
    )  # fmt: skip
    _refuse_positions(found)


def rotate_qk_trusted(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    positions: tuple[torch.Tensor, torch.Tensor] | None,
    offsets: tuple[int, int],
    cos: torch.Tensor,
    sin: torch.Tensor,
    theta: torch.Tensor,
    layout: str,
    inverse: bool,
) -> None:
    """The loop of :func:`rotate_qk` without its checks, for torch tensors whose signature (shapes, strides,
    dtypes, storage offsets and sizes: all the checks read but the addresses) already passed them, with
    outputs made for the call (apart from the inputs). Only :mod:`posenc.backends.rotate_qk` calls it, once
    it has checked that signature through :func:`rotate_qk`. Positions are still refused by value."""
    b, h_q, s_q, d = q.shape
    h_k, s_k = k.shape[1], k.shape[2]
    q_rows: tuple[int, ...] = (0, 0, 0, 0)
    k_rows: tuple[int, ...] = (0, 0, 0, 0)
    if positions is not None:
        qp, kp = positions
        q_rows, k_rows = (
            (qp.data_ptr(), qp.shape[0], *qp.stride()),
            (kp.data_ptr(), kp.shape[0], *kp.stride()),
        )
    codes = _DTYPES["rotate"]
    found = kernels.rotate_qk(  # type: ignore[union-attr]
        q.data_ptr(), k.data_ptr(), q_out.data_ptr(), k_out.data_ptr(), q_rows[0], k_rows[0], cos.data_ptr(),
        sin.data_ptr(), theta.data_ptr(), codes[str(q.dtype)[6:]], codes[str(cos.dtype)[6:]],
        ROTARY_LAYOUTS[layout], int(inverse), int(positions is not None), b, d, 2 * cos.shape[1], cos.shape[0], cos.stride(0),
        h_q, s_q, *q_rows[1:], offsets[0], *q.stride()[:3], *q_out.stride()[:3],
        h_k, s_k, *k_rows[1:], offsets[1], *k.stride()[:3], *k_out.stride()[:3],
    )  # fmt: skip
    if found is not None:
        _refuse_positions(found)


def _refuse_positions(found: tuple[int, int] | None) -> None:
    """The ``ValueError`` of a position of magnitude ``≥ 2^53`` that :func:`rotate_qk`'s loop found first,
    as :func:`posenc.nn._positions.check_values` words it (``side``: 0 the queries', 1 the keys')."""
    if found is not None:
        side, value = found
        name = ("q_positions", "k_positions")[side]
        raise ValueError(f"{validate.position_limit_message(name)}, got {value!r}")


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
