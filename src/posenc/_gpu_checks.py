"""The checked boundary of posenc's Triton kernels (:mod:`posenc._gpu_kernels`): before a launch, every
argument's dimensions, sizes, dtypes, unit last stride, device and storage bounds, so that a shape or
stride mistake is a ``ValueError``/``TypeError`` naming the argument, never an out-of-bounds access on
the GPU.

Only tensor metadata is read (no element, no device synchronisation), so the checks run inside CUDA
graph capture and compiled graphs alike. This module imports neither Triton nor torch: the tests
exercise it with CPU tensors on machines without a GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from posenc._buffers import Buffer, buffer, require_disjoint
from posenc._gpu import DTYPES

LAYOUTS = ("adjacent", "half_split")
FLOATS = tuple(sorted(DTYPES))
POSITIONS = ("int32", "int64")


def _buffers(
    names: Sequence[str],
    tensors: Sequence[Any],
    *,
    device: Any = None,
    unit_stride: bool = True,
    storage: bool = True,
) -> list[Buffer]:
    """Buffers of ``tensors``, all required on ``device`` (default the first one's) and, with ``storage``,
    inside their storage; with ``unit_stride``, each with contiguous rows (the kernels that take a row stride
    only)."""
    device = getattr(tensors[0], "device", None) if device is None else device
    if device is None:
        raise TypeError(f"{names[0]}: {type(tensors[0]).__name__}, expected a torch tensor")
    out = [buffer(name, t, device=device) for name, t in zip(names, tensors)]
    for b in out:
        if unit_stride:
            b.require_unit_stride()
        if storage:
            b.require_inside()
    return out


def _layout(layout: object) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}, got {layout!r}")


def _rotated(r: object, d: int, name: str) -> int:
    if not isinstance(r, int) or isinstance(r, bool) or r < 2 or r % 2 or r > d:
        raise ValueError(f"{name}: r = {r!r} rotated dims; r must be an even int in [2, d = {d}]")
    return r


def _tables(c: Buffer, s: Buffer, rows: int | None, cols: int, work: Sequence[str]) -> None:
    """``c``, ``s``: ``[rows, cols]`` (any row count when ``rows`` is ``None``), one dtype of ``work``, alike."""
    c.require_ndim(2, "[rows, pairs]")
    c.require_dtype(work)
    s.require_shape(c.shape, "cos's shape")
    s.require_dtype((c.dtype,))
    if (rows is not None and c.shape[0] != rows) or c.shape[1] != cols:
        expected = f"[{'n' if rows is None else rows}, {cols}]"
        raise ValueError(f"cos: shape {c.shape}, expected {expected}")
    if c.numel > 1 and c.strides != s.strides:
        raise ValueError(f"sin: strides {s.strides}, expected cos's {c.strides}")


def check_rotate(
    x: Any, out: Any, c: Any, s: Any, layout: str, r: int, paired: bool, *, storage: bool = True
) -> None:
    """The arguments of :func:`posenc._gpu_kernels.rotate`: ``x``/``out`` ``[n0, n1, seq, d]`` alike,
    ``c``/``s`` ``[seq, r/2]`` (``paired``) or ``[seq, r]`` in the work dtype (float64 beside float64 ``x``,
    else float32), ``out`` apart from the inputs and writing no element twice."""
    _layout(layout)
    xb, ob, cb, sb = _buffers(("x", "out", "cos", "sin"), (x, out, c, s), storage=storage)
    xb.require_ndim(4, "[n0, n1, seq, d]")
    xb.require_dtype(FLOATS)
    ob.require_shape(xb.shape, "x's shape")
    ob.require_dtype((xb.dtype,))
    seq, d = xb.shape[2], xb.shape[3]
    r = _rotated(r, d, "r")
    _tables(cb, sb, seq, r // 2 if paired else r, ("float64",) if xb.dtype == "float64" else ("float32",))
    ob.require_unaliased()
    if storage:
        require_disjoint(ob, xb, cb, sb)


def check_waves(
    out: Any,
    fine: tuple[Any, Any],
    coarse: tuple[Any, Any],
    layout: int,
    layouts: int,
    *,
    storage: bool = True,
) -> None:
    """The arguments of :func:`posenc._gpu_kernels.waves`: ``out [n, c]``, the fine rows ``[b, f]`` and the
    coarse rows ``[⌈n/b⌉, f]`` contiguous float64 with ``c ≤ 2f``; ``layout`` one of ``range(layouts)``."""
    if not isinstance(layout, int) or isinstance(layout, bool) or not 0 <= layout < layouts:
        raise ValueError(f"layout must be a column layout code in [0, {layouts}), got {layout!r}")
    ob, fs, fc, cs, cc = _buffers(
        ("out", "fine sin", "fine cos", "coarse sin", "coarse cos"), (out, *fine, *coarse), storage=storage
    )
    ob.require_ndim(2, "[n, columns]")
    ob.require_dtype(FLOATS)
    for b in (fs, fc, cs, cc):
        b.require_ndim(2, "[rows, frequencies]")
        b.require_dtype(("float64",))
        b.require_contiguous()
    n, columns = ob.shape
    rows, f = fs.shape
    fc.require_shape(fs.shape, "fine sin's shape")
    if rows < 1 and n:
        raise ValueError(f"fine sin: {rows} rows; at least one is needed for {n} output rows")
    blocks = -(-n // rows) if rows else 0
    cs.require_shape((blocks, f), f"⌈n/b⌉ = ⌈{n}/{rows}⌉ coarse rows of the {f} frequencies")
    cc.require_shape(cs.shape, "coarse sin's shape")
    if columns > 2 * f:
        raise ValueError(f"out: {columns} columns, at most 2·f = {2 * f} for {f} frequencies")
    ob.require_unaliased()
    if storage:
        require_disjoint(ob, fs, fc, cs, cc)


def check_rotate_qk(
    q: Any,
    k: Any,
    q_out: Any,
    k_out: Any,
    positions: tuple[Any, Any] | None,
    offsets: tuple[int, int],
    tables: tuple[Any, Any],
    theta: Any,
    layout: str,
    r: int,
    *,
    storage: bool = True,
) -> None:
    """The arguments of :func:`posenc._gpu_kernels.rotate_qk`: ``q``/``q_out`` ``[b, h, s_q, d]`` and
    ``k``/``k_out`` ``[b, h_k, s_k, d]`` of one dtype; positions ``([b or 1, s_q], [b or 1, s_k])`` of one
    integer dtype, or ``None`` with int ``offsets``; the cached tables ``[n, r/2]`` in the work dtype;
    ``theta`` float64 holding at least ``r/2 + 1`` values; no output element written twice. With
    ``storage`` (the default) also every view inside its storage and the outputs apart from every input."""
    _layout(layout)
    qb, kb, qo, ko, tb = _buffers(
        ("q", "k", "q_out", "k_out", "theta"), (q, k, q_out, k_out, theta), storage=storage
    )
    cb, sb = _buffers(("cos", "sin"), tables, device=q.device, unit_stride=False, storage=storage)
    qb.require_ndim(4, "[b, h, s_q, d]")
    qb.require_dtype(FLOATS)
    kb.require_ndim(4, "[b, h_k, s_k, d]")
    kb.require_dtype((qb.dtype,))
    b, d = qb.shape[0], qb.shape[3]
    if kb.shape[0] != b or kb.shape[3] != d:
        raise ValueError(f"k: shape {kb.shape}, expected [b = {b}, h_k, s_k, d = {d}] like q {qb.shape}")
    qo.require_shape(qb.shape, "q's shape")
    qo.require_dtype((qb.dtype,))
    ko.require_shape(kb.shape, "k's shape")
    ko.require_dtype((kb.dtype,))
    r = _rotated(r, d, "r")
    _tables(cb, sb, None, r // 2, ("float64",) if qb.dtype == "float64" else ("float32",))
    tb.require_ndim(1, "[r/2 + 1] (the frequencies, then the attention factor)")
    tb.require_dtype(("float64",))
    tb.require_contiguous()
    if tb.shape[0] < r // 2 + 1:
        raise ValueError(f"theta: {tb.shape[0]} values, expected at least r/2 + 1 = {r // 2 + 1}")
    inputs = [qb, kb, cb, sb, tb]
    if positions is None:
        _offsets(offsets)
    else:
        qp, kp = _buffers(
            ("q_positions", "k_positions"), positions, device=q.device, unit_stride=False, storage=storage
        )
        for p, seq, name in ((qp, qb.shape[2], "q_positions"), (kp, kb.shape[2], "k_positions")):
            p.require_ndim(2, "[b or 1, s]")
            p.require_dtype(POSITIONS)
            if p.shape[0] not in (1, b) or p.shape[1] != seq:
                raise ValueError(f"{name}: shape {p.shape}, expected [{b} or 1, {seq}]")
        kp.require_dtype((qp.dtype,))
        inputs += [qp, kp]
    for out in (qo, ko):
        out.require_unaliased()
        if storage:
            require_disjoint(out, *inputs)
    if storage:
        require_disjoint(qo, ko)


def _offsets(offsets: Any) -> None:
    if (
        not isinstance(offsets, tuple)
        or len(offsets) != 2
        or any(not isinstance(o, int) or isinstance(o, bool) or o < 0 for o in offsets)
    ):
        raise ValueError(f"offsets must be two ints >= 0 when no positions are given, got {offsets!r}")


_SIGNATURES: set[tuple[Any, ...]] = set()
"""Signatures that passed a ``check_*_signature`` (emptied when it reaches :data:`_MAX_SIGNATURES`)."""
_MAX_SIGNATURES = 4096


def _once(name: str, tensors: Any, scalars: tuple[Any, ...], check: Callable[[], None]) -> None:
    """``check()`` unless the signature of ``tensors`` (types aside: shapes, strides, dtypes, devices) and
    ``scalars`` passed it before; remembered once it passes."""
    try:
        key = (name, *scalars, *[(t.shape, t.stride(), t.dtype, t.device) for t in tensors])
        seen = key in _SIGNATURES
    except (TypeError, AttributeError):  # not a pair, not a tensor, unhashable: the full check names it
        seen, key = False, None
    if seen:
        return
    check()
    if key is None:
        return
    if len(_SIGNATURES) >= _MAX_SIGNATURES:
        _SIGNATURES.clear()
    _SIGNATURES.add(key)


def check_rotate_signature(x: Any, out: Any, c: Any, s: Any, layout: str, r: int, paired: bool) -> None:
    """:func:`check_rotate` without its storage checks, once per signature (``layout``, ``r``, ``paired``
    and every tensor's shape, strides, dtype and device): for a caller whose ``out`` is a fresh allocation
    and whose inputs are ordinary tensors (which torch keeps inside their storage)."""
    _once(
        "rotate", (x, out, c, s), (layout, r, paired),
        lambda: check_rotate(x, out, c, s, layout, r, paired, storage=False),
    )  # fmt: skip


def check_waves_signature(
    out: Any, fine: tuple[Any, Any], coarse: tuple[Any, Any], layout: int, layouts: int
) -> None:
    """:func:`check_waves` without its storage checks, once per signature (``layout``, ``layouts`` and
    every tensor's shape, strides, dtype and device), for a caller whose ``out`` is a fresh allocation."""
    _once(
        "waves", (out, *fine, *coarse), (layout, layouts),
        lambda: check_waves(out, fine, coarse, layout, layouts, storage=False),
    )  # fmt: skip


def check_rotate_qk_signature(
    q: Any,
    k: Any,
    q_out: Any,
    k_out: Any,
    positions: tuple[Any, Any] | None,
    offsets: tuple[int, int],
    tables: tuple[Any, Any],
    theta: Any,
    layout: str,
    r: int,
) -> None:
    """:func:`check_rotate_qk` without its storage checks (bounds, overlaps), once per signature: the
    shapes, strides, dtypes and devices of every tensor, ``layout``, ``r`` and whether positions are
    given; ``offsets`` (which change at every decoding step) at every call. For a caller whose outputs are
    fresh allocations (so apart from every input) of ordinary tensors (which torch keeps inside their
    storage)."""
    if positions is None:
        _offsets(offsets)
    _once(
        "rotate_qk",
        (q, k, q_out, k_out, theta, *tables, *(() if positions is None else positions)),
        (layout, r, positions is None),
        lambda: check_rotate_qk(
            q, k, q_out, k_out, positions, offsets, tables, theta, layout, r, storage=False
        ),
    )
