"""Triton kernels for CUDA tensors: rotary pairs and sinusoidal tables (loaded by :mod:`posenc._gpu`).

Each kernel is one launch and one pass over its output. Each launcher checks its arguments first
(:mod:`posenc._gpu_checks`: shapes, dtypes, unit last strides, device, storage bounds, overlaps;
metadata only). Importing this module imports Triton.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from posenc._gpu_checks import check_rotate, check_rotate_qk, check_waves

_TILE = 4096
"""Elements of ``x`` (or of the table) one program works on: enough loads in flight per program to
hide memory latency, few enough registers per thread for full occupancy."""


@triton.jit
def _rotate_kernel(
    x, out, c, s, n1, seq, r, d, xs0, xs1, xs2, os0, os1, os2, ts, n_seq_blocks,
    PAIRED: tl.constexpr, HALF_SPLIT: tl.constexpr, HAS_REST: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """Rows ``BLOCK_S`` positions long of one ``(i0, i1)`` of ``x[n0, n1, seq, d]``: pairs ``(a, b)`` of
    the first ``r`` dims rotated, ``out_a = x_a·c_a + x_b·σ_a``, ``out_b = x_b·c_b + x_a·σ_b``, in the
    tables' dtype; dims ``r … d−1`` copied. ``PAIRED``: tables ``[seq, r/2]``, ``c_a = c_b = c``,
    ``(σ_a, σ_b) = (−s, s)``; else ``[seq, r]`` in the layout with signed sines ``σ``. ``half_split``
    halves are read as two contiguous tiles; ``adjacent`` rows as one, split into its pairs in
    registers (strided loads of every other element measured slower; benchmarks/README.md)."""
    pid = tl.program_id(0)
    lead = pid // n_seq_blocks
    i0 = (lead // n1).to(tl.int64)
    i1 = (lead % n1).to(tl.int64)
    rows = (pid % n_seq_blocks) * BLOCK_S + tl.arange(0, BLOCK_S)
    row_ok = rows < seq
    rows = rows.to(tl.int64)
    x_row = x + i0 * xs0 + i1 * xs1 + rows[:, None] * xs2
    o_row = out + i0 * os0 + i1 * os1 + rows[:, None] * os2
    t_row = rows[:, None] * ts
    pair = tl.arange(0, BLOCK_P)[None, :]
    half = r // 2
    pair_ok = row_ok[:, None] & (pair < half)
    if PAIRED:
        c_a = tl.load(c + t_row + pair, mask=pair_ok)
        c_b = c_a
        s_b = tl.load(s + t_row + pair, mask=pair_ok)
        s_a = -s_b
    if HALF_SPLIT:
        if not PAIRED:
            c_a = tl.load(c + t_row + pair, mask=pair_ok)
            c_b = tl.load(c + t_row + half + pair, mask=pair_ok)
            s_a = tl.load(s + t_row + pair, mask=pair_ok)
            s_b = tl.load(s + t_row + half + pair, mask=pair_ok)
        x_a = tl.load(x_row + pair, mask=pair_ok).to(c_a.dtype)
        x_b = tl.load(x_row + half + pair, mask=pair_ok).to(c_a.dtype)
        tl.store(o_row + pair, (x_a * c_a + x_b * s_a).to(out.dtype.element_ty), mask=pair_ok)
        tl.store(o_row + half + pair, (x_b * c_b + x_a * s_b).to(out.dtype.element_ty), mask=pair_ok)
    else:
        col = tl.arange(0, 2 * BLOCK_P)[None, :]
        col_ok = row_ok[:, None] & (col < r)
        if not PAIRED:
            c_a, c_b = tl.split(tl.reshape(tl.load(c + t_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
            s_a, s_b = tl.split(tl.reshape(tl.load(s + t_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
        x_a, x_b = tl.split(tl.reshape(tl.load(x_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
        x_a = x_a.to(c_a.dtype)
        x_b = x_b.to(c_a.dtype)
        rotated = tl.reshape(tl.join(x_a * c_a + x_b * s_a, x_b * c_b + x_a * s_b), (BLOCK_S, 2 * BLOCK_P))
        tl.store(o_row + col, rotated.to(out.dtype.element_ty), mask=col_ok)
    if HAS_REST:
        rest = r + tl.arange(0, BLOCK_REST)[None, :]
        rest_ok = row_ok[:, None] & (rest < d)
        tl.store(o_row + rest, tl.load(x_row + rest, mask=rest_ok), mask=rest_ok)


def _rows_per_program(row_elements: int, rows: int) -> int:
    """A power of two of rows, about :data:`_TILE` elements in all, no more than ``rows`` needs."""
    return max(1, min(triton.next_power_of_2(rows), 2 ** (max(_TILE // row_elements, 1).bit_length() - 1)))


def rotate(
    x: torch.Tensor, out: torch.Tensor, c: torch.Tensor, s: torch.Tensor, layout: str, r: int, paired: bool
) -> None:
    """``out = R x`` over ``x[n0, n1, seq, d]`` (``out`` the same shape; both unit last stride), the
    first ``r`` dims rotated in ``layout`` (``"adjacent"`` or ``"half_split"``) by the tables ``c``, ``s``
    (``[seq, r/2]`` when ``paired``, else ``[seq, r]``; rows ``c.stride(0)`` apart, both alike), the rest
    copied. The work dtype is the tables' (float32, or float64 for float64 ``x``)."""
    check_rotate(x, out, c, s, layout, r, paired)
    n0, n1, seq, d = x.shape
    block_p = triton.next_power_of_2(max(r // 2, 1))
    block_rest = triton.next_power_of_2(d - r) if d > r else 1
    block_s = _rows_per_program(2 * block_p + (block_rest if d > r else 0), seq)
    n_seq_blocks = triton.cdiv(seq, block_s)
    _rotate_kernel[(n0 * n1 * n_seq_blocks,)](
        x, out, c, s, n1, seq, r, d, *x.stride()[:3], *out.stride()[:3], c.stride(0), n_seq_blocks,
        PAIRED=paired, HALF_SPLIT=layout == "half_split", HAS_REST=d > r,
        BLOCK_S=block_s, BLOCK_P=block_p, BLOCK_REST=block_rest,
    )  # fmt: skip


PAIRS_SIN_COS, PAIRS_COS_SIN, SPLIT = 0, 1, 2
"""Column layouts of :func:`waves`, over ``f`` frequencies: ``(sin_k, cos_k)`` pairs, ``(cos_k, sin_k)``
pairs, or all sines then all cosines; the last columns may be cut off."""


@triton.jit
def _waves_kernel(
    out, fine_sin, fine_cos, coarse_sin, coarse_cos, n, c, f, b, ld,
    LAYOUT: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_F: tl.constexpr,
):  # fmt: skip
    """Rows ``i = q·b + u`` of ``BLOCK_N`` positions, frequencies ``k`` of ``BLOCK_F``: ``sin((t_q + u)·w_k)``
    and ``cos(…)`` by the angle addition formulas in float64 from the ``[b, f]`` fine and ``[⌈n/b⌉, f]``
    coarse tables, rounded once to ``out``'s dtype and stored in ``LAYOUT`` (pairs joined in registers,
    so every store is contiguous)."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    k = tl.program_id(1) * BLOCK_F + tl.arange(0, BLOCK_F)
    row_ok = rows < n
    ok = row_ok[:, None] & (k < f)[None, :]
    fine = (rows % b)[:, None] * f + k[None, :]
    coarse = (rows // b)[:, None] * f + k[None, :]
    s_u = tl.load(fine_sin + fine, mask=ok, other=0.0)
    c_u = tl.load(fine_cos + fine, mask=ok, other=0.0)
    s_q = tl.load(coarse_sin + coarse, mask=ok, other=0.0)
    c_q = tl.load(coarse_cos + coarse, mask=ok, other=0.0)
    sin = (s_u * c_q + c_u * s_q).to(out.dtype.element_ty)
    cos = (c_u * c_q - s_u * s_q).to(out.dtype.element_ty)
    row = out + rows.to(tl.int64)[:, None] * ld
    if LAYOUT == 2:
        tl.store(row + k[None, :], sin, mask=ok & (k < c)[None, :])
        tl.store(row + f + k[None, :], cos, mask=ok & (f + k < c)[None, :])
    else:
        col = tl.program_id(1) * 2 * BLOCK_F + tl.arange(0, 2 * BLOCK_F)
        if LAYOUT == 0:
            pairs = tl.join(sin, cos)
        else:
            pairs = tl.join(cos, sin)
        tl.store(
            row + col[None, :],
            tl.reshape(pairs, (BLOCK_N, 2 * BLOCK_F)),
            mask=row_ok[:, None] & (col < c)[None, :],
        )


def waves(
    out: torch.Tensor,
    fine: tuple[torch.Tensor, torch.Tensor],
    coarse: tuple[torch.Tensor, torch.Tensor],
    layout: int,
) -> None:
    """``out[q·b + u]``, ``[n, c]`` (unit last stride), the sines and cosines of ``(t_q + u)·w`` in ``layout``
    (:data:`PAIRS_SIN_COS`, :data:`PAIRS_COS_SIN` or :data:`SPLIT`), from ``fine = (sin(u·w), cos(u·w))``,
    ``[b, f]``, and ``coarse = (sin(t_q·w), cos(t_q·w))``, ``[⌈n/b⌉, f]``, all contiguous float64."""
    check_waves(out, fine, coarse, layout, SPLIT + 1)
    n, c = out.shape
    b, f = fine[0].shape
    block_f = min(triton.next_power_of_2(f), 64)
    block_n = _rows_per_program(2 * block_f, n)
    _waves_kernel[(triton.cdiv(n, block_n), triton.cdiv(f, block_f))](
        out, *fine, *coarse, n, c, f, b, out.stride(0), LAYOUT=layout, BLOCK_N=block_n, BLOCK_F=block_f
    )


@triton.jit
def _rotate_heads(
    x_row, o_row, out_ty: tl.constexpr, c_a, s_a, r, d, n_heads, xsh, osh, row_ok, pair_ok,
    HALF_SPLIT: tl.constexpr, HAS_REST: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """Every head of one block of rows (``x_row``/``o_row``: head 0, heads ``xsh``/``osh`` apart):
    ``out_a = x_a·c − x_b·s``, ``out_b = x_b·c + x_a·s`` in the tables' dtype, ``c``, ``s`` the
    ``[BLOCK_S, BLOCK_P]`` pair values; dims ``r … d−1`` copied."""
    half = r // 2
    pair = tl.arange(0, BLOCK_P)[None, :]
    for h in range(n_heads):
        xh = x_row + h * xsh
        oh = o_row + h * osh
        if HALF_SPLIT:
            x_a = tl.load(xh + pair, mask=pair_ok).to(c_a.dtype)
            x_b = tl.load(xh + half + pair, mask=pair_ok).to(c_a.dtype)
            tl.store(oh + pair, (x_a * c_a - x_b * s_a).to(out_ty), mask=pair_ok)
            tl.store(oh + half + pair, (x_b * c_a + x_a * s_a).to(out_ty), mask=pair_ok)
        else:
            col = tl.arange(0, 2 * BLOCK_P)[None, :]
            col_ok = row_ok[:, None] & (col < r)
            x_a, x_b = tl.split(tl.reshape(tl.load(xh + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
            x_a = x_a.to(c_a.dtype)
            x_b = x_b.to(c_a.dtype)
            rotated = tl.reshape(
                tl.join(x_a * c_a - x_b * s_a, x_b * c_a + x_a * s_a), (BLOCK_S, 2 * BLOCK_P)
            )
            tl.store(oh + col, rotated.to(out_ty), mask=col_ok)
        if HAS_REST:
            rest = r + tl.arange(0, BLOCK_REST)[None, :]
            rest_ok = row_ok[:, None] & (rest < d)
            tl.store(oh + rest, tl.load(xh + rest, mask=rest_ok), mask=rest_ok)


_QK_SCALARS = (
    "batch", "n_cache", "cs0", "cs1", "offset_q", "offset_k", "r", "d",
    "q_heads", "q_seq", "qs0", "qs1", "qs2", "qos0", "qos1", "qos2", "qps0", "qps1", "q_blocks",
    "k_heads", "k_seq", "ks0", "ks1", "ks2", "kos0", "kos1", "kos2", "kps0", "kps1", "k_blocks",
)  # fmt: skip
"""Integer arguments of :func:`_rotate_qk_kernel` that Triton must not specialise (a value of 1 would become a
constant): the kernel picks the query's or the key's of each pair at run time, and both must have one type."""


@triton.jit(do_not_specialize=_QK_SCALARS)
def _rotate_qk_kernel(
    q, k, q_out, k_out, q_pos, k_pos, c, s, theta,
    batch, n_cache, cs0, cs1, sign, offset_q, offset_k, r, d,
    q_heads, q_seq, qs0, qs1, qs2, qos0, qos1, qos2, qps0, qps1, q_blocks,
    k_heads, k_seq, ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1, k_blocks,
    HAS_POS: tl.constexpr, HALF_SPLIT: tl.constexpr, HAS_REST: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """One launch for queries and keys: program ``p < b·q_blocks`` takes ``BLOCK_S`` query rows of one
    sequence (every head), the others key rows. A row's ``cos``/``sin`` pair values are gathered from
    the cached ``[n_cache, r/2]`` tables (strides ``cs0``, ``cs1``) at its position (``offset + row``
    without ``HAS_POS``); a block holding a position outside the cache forms its angles ``t·θ_i`` in
    float64 instead, times ``theta[r/2]`` (the tables' attention factor), as the tables were built.
    ``sign = −1`` rotates by the opposite angle (the backward)."""
    pid = tl.program_id(0)
    n_q = batch * q_blocks
    if pid < n_q:
        blk = pid
        x, out, pos, offset, seq, nb, n_heads = q, q_out, q_pos, offset_q, q_seq, q_blocks, q_heads
        xs0, xs1, xs2, os0, os1, os2, ps0, ps1 = qs0, qs1, qs2, qos0, qos1, qos2, qps0, qps1
    else:
        blk = pid - n_q
        x, out, pos, offset, seq, nb, n_heads = k, k_out, k_pos, offset_k, k_seq, k_blocks, k_heads
        xs0, xs1, xs2, os0, os1, os2, ps0, ps1 = ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1
    i0 = (blk // nb).to(tl.int64)
    rows = (blk % nb) * BLOCK_S + tl.arange(0, BLOCK_S)
    row_ok = rows < seq
    rows = rows.to(tl.int64)
    if HAS_POS:
        t = tl.load(pos + i0 * ps0 + rows * ps1, mask=row_ok, other=0).to(tl.int64)
    else:
        t = offset + rows
    pair = tl.arange(0, BLOCK_P)[None, :]
    pair_ok = row_ok[:, None] & (pair < r // 2)
    outside = tl.max((((t < 0) | (t >= n_cache)) & row_ok).to(tl.int32), axis=0)
    if outside > 0:
        w = tl.load(theta + pair, mask=pair < r // 2, other=0.0)
        factor = tl.load(theta + r // 2)
        angle = t.to(tl.float64)[:, None] * w
        c_a = (tl.cos(angle) * factor).to(c.dtype.element_ty)
        s_a = (tl.sin(angle) * factor).to(c.dtype.element_ty)
    else:
        at = t[:, None] * cs0 + pair * cs1
        c_a = tl.load(c + at, mask=pair_ok, other=0.0)
        s_a = tl.load(s + at, mask=pair_ok, other=0.0)
    s_a = s_a * sign
    _rotate_heads(
        x + i0 * xs0 + rows[:, None] * xs2, out + i0 * os0 + rows[:, None] * os2, out.dtype.element_ty,
        c_a, s_a, r, d, n_heads, xs1, os1, row_ok, pair_ok, HALF_SPLIT, HAS_REST, BLOCK_S, BLOCK_P, BLOCK_REST,
    )  # fmt: skip


def rotate_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_out: torch.Tensor,
    k_out: torch.Tensor,
    positions: tuple[torch.Tensor, torch.Tensor] | None,
    offsets: tuple[int, int],
    tables: tuple[torch.Tensor, torch.Tensor],
    theta: torch.Tensor,
    layout: str,
    r: int,
    inverse: bool,
) -> None:
    """``q_out = R q``, ``k_out = R k`` in one launch (``Rᵀ`` when ``inverse``).

    ``q``/``q_out`` ``[b, h, s_q, d]`` and ``k``/``k_out`` ``[b, h_k, s_k, d]``, any strides with unit last
    stride, the same dtype. ``positions``: ``([b or 1, s_q], [b or 1, s_k])`` integer tensors of one dtype
    (a batch of 1 broadcasts), or ``None`` for ``offsets[0] + 0 … s_q−1`` and ``offsets[1] + 0 … s_k−1``.
    ``tables``: the cached ``cos``/``sin`` pair values ``[n, r/2]`` (any strides) in the work dtype (float32,
    or float64 beside float64 ``q``), gathered by position; beyond row ``n`` the angles are formed from the
    float64 frequencies ``theta[:r/2]`` and scaled by ``theta[r/2]``, the tables' attention factor (float64,
    contiguous)."""
    check_rotate_qk(q, k, q_out, k_out, positions, offsets, tables, theta, layout, r)
    b, q_heads, s_q, d = q.shape
    k_heads, s_k = k.shape[1], k.shape[2]
    c, s = tables
    block_p = triton.next_power_of_2(max(r // 2, 1))
    block_rest = triton.next_power_of_2(d - r) if d > r else 1
    block_s = _rows_per_program(2 * block_p + (block_rest if d > r else 0), max(s_q, s_k))
    block_s = min(block_s, 64)
    q_blocks, k_blocks = triton.cdiv(s_q, block_s), triton.cdiv(s_k, block_s)
    if positions is None:
        q_pos = k_pos = theta  # not read
        q_ps = k_ps = (0, 0)
    else:
        q_pos, k_pos = positions
        q_ps = (q_pos.stride(0) if q_pos.shape[0] > 1 else 0, q_pos.stride(1))
        k_ps = (k_pos.stride(0) if k_pos.shape[0] > 1 else 0, k_pos.stride(1))
    _rotate_qk_kernel[(b * (q_blocks + k_blocks),)](
        q, k, q_out, k_out, q_pos, k_pos, c, s, theta,
        b, c.shape[0], c.stride(0), c.stride(1), -1.0 if inverse else 1.0, offsets[0], offsets[1], r, d,
        q_heads, s_q, *q.stride()[:3], *q_out.stride()[:3], *q_ps, q_blocks,
        k_heads, s_k, *k.stride()[:3], *k_out.stride()[:3], *k_ps, k_blocks,
        HAS_POS=positions is not None, HALF_SPLIT=layout == "half_split", HAS_REST=d > r,
        BLOCK_S=block_s, BLOCK_P=block_p, BLOCK_REST=block_rest,
    )  # fmt: skip
