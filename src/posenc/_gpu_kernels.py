"""Triton kernels for CUDA tensors: rotary pairs and sinusoidal tables (loaded by :mod:`posenc._gpu`).

Each kernel is one pass over its output; each launcher checks its arguments first
(:mod:`posenc._gpu_checks`: shapes, dtypes, unit last strides, device, storage bounds, overlaps;
metadata only). The head and rotary dims are compile-time constants and no stride is kept from Triton's
specialisation (divisibility by 16, the value 1), so that rows move 16 bytes per access; the float64
angles for positions beyond the cached tables live in a kernel of their own, beside the q+k rotation,
not in its register budget (``benchmarks/kernel_static.py`` reports registers, spills and access widths
for ``sm_90a``). Importing this module imports Triton.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from posenc import _gpu_checks

_TILE = 4096
"""Elements of ``x`` (or of the table) one program works on: enough loads in flight per program to
hide memory latency, few enough registers per thread for full occupancy."""


@triton.jit
def _rotate_kernel(
    x, out, c, s, n1, seq, xs0, xs1, xs2, os0, os1, os2, ts, n_seq_blocks,
    PAIRED: tl.constexpr, HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
    BLOCK_S: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """Rows ``BLOCK_S`` positions long of one ``(i0, i1)`` of ``x[n0, n1, seq, D]``: pairs ``(a, b)`` of
    the first ``R`` dims rotated, ``out_a = x_a·c_a + x_b·σ_a``, ``out_b = x_b·c_b + x_a·σ_b``, in the
    tables' dtype; dims ``R … D−1`` copied. ``PAIRED``: tables ``[seq, R/2]``, ``c_a = c_b = c``,
    ``(σ_a, σ_b) = (−s, s)``; else ``[seq, R]`` in the layout with signed sines ``σ``. ``half_split``
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
    half: tl.constexpr = R // 2
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
        col_ok = row_ok[:, None] & (col < R)
        if not PAIRED:
            c_a, c_b = tl.split(tl.reshape(tl.load(c + t_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
            s_a, s_b = tl.split(tl.reshape(tl.load(s + t_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
        x_a, x_b = tl.split(tl.reshape(tl.load(x_row + col, mask=col_ok), (BLOCK_S, BLOCK_P, 2)))
        x_a = x_a.to(c_a.dtype)
        x_b = x_b.to(c_a.dtype)
        rotated = tl.reshape(tl.join(x_a * c_a + x_b * s_a, x_b * c_b + x_a * s_b), (BLOCK_S, 2 * BLOCK_P))
        tl.store(o_row + col, rotated.to(out.dtype.element_ty), mask=col_ok)
    if D > R:
        rest = R + tl.arange(0, BLOCK_REST)[None, :]
        rest_ok = row_ok[:, None] & (rest < D)
        tl.store(o_row + rest, tl.load(x_row + rest, mask=rest_ok), mask=rest_ok)


def _rows_per_program(row_elements: int, rows: int) -> int:
    """A power of two of rows, about :data:`_TILE` elements in all, no more than ``rows`` needs."""
    return max(1, min(triton.next_power_of_2(rows), 2 ** (max(_TILE // row_elements, 1).bit_length() - 1)))


def _check(checks: str, full: Callable[..., None], once: Callable[..., None], *args: Any) -> None:
    """``full(*args)`` (``checks="full"``) or ``once(*args)`` (``"signature"``), else a ``ValueError``."""
    if checks == "full":
        full(*args)
    elif checks == "signature":
        once(*args)
    else:
        raise ValueError(f"checks must be 'full' or 'signature', got {checks!r}")


def rotate(
    x: torch.Tensor,
    out: torch.Tensor,
    c: torch.Tensor,
    s: torch.Tensor,
    layout: str,
    r: int,
    paired: bool,
    *,
    checks: str = "full",
) -> None:
    """``out = R x`` over ``x[n0, n1, seq, d]`` (``out`` the same shape; both unit last stride), the
    first ``r`` dims rotated in ``layout`` (``"adjacent"`` or ``"half_split"``) by the tables ``c``, ``s``
    (``[seq, r/2]`` when ``paired``, else ``[seq, r]``; rows ``c.stride(0)`` apart, both alike), the rest
    copied. The work dtype is the tables' (float32, or float64 for float64 ``x``). ``checks``: ``"full"``
    (:func:`posenc._gpu_checks.check_rotate`) or ``"signature"`` for a caller whose ``out`` is a fresh
    allocation (:func:`posenc._gpu_checks.check_rotate_signature`)."""
    _check(
        checks, _gpu_checks.check_rotate, _gpu_checks.check_rotate_signature, x, out, c, s, layout, r, paired
    )
    n0, n1, seq, d = x.shape
    block_p = triton.next_power_of_2(max(r // 2, 1))
    block_rest = triton.next_power_of_2(d - r) if d > r else 1
    block_s = _rows_per_program(2 * block_p + (block_rest if d > r else 0), seq)
    n_seq_blocks = triton.cdiv(seq, block_s)
    _rotate_kernel[(n0 * n1 * n_seq_blocks,)](
        x, out, c, s, n1, seq, *x.stride()[:3], *out.stride()[:3], c.stride(0), n_seq_blocks,
        PAIRED=paired, HALF_SPLIT=layout == "half_split", R=r, D=d,
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
    *,
    checks: str = "full",
) -> None:
    """``out[q·b + u]``, ``[n, c]`` (unit last stride), the sines and cosines of ``(t_q + u)·w`` in ``layout``
    (:data:`PAIRS_SIN_COS`, :data:`PAIRS_COS_SIN` or :data:`SPLIT`), from ``fine = (sin(u·w), cos(u·w))``,
    ``[b, f]``, and ``coarse = (sin(t_q·w), cos(t_q·w))``, ``[⌈n/b⌉, f]``, all contiguous float64.
    ``checks``: ``"full"`` or ``"signature"``, as for :func:`rotate`."""
    _check(
        checks,
        _gpu_checks.check_waves,
        _gpu_checks.check_waves_signature,
        out,
        fine,
        coarse,
        layout,
        SPLIT + 1,
    )
    n, c = out.shape
    b, f = fine[0].shape
    block_f = min(triton.next_power_of_2(f), 64)
    block_n = _rows_per_program(2 * block_f, n)
    _waves_kernel[(triton.cdiv(n, block_n), triton.cdiv(f, block_f))](
        out, *fine, *coarse, n, c, f, b, out.stride(0), LAYOUT=layout, BLOCK_N=block_n, BLOCK_F=block_f
    )


_MIN_TILE = 2048
"""Elements of the smallest tile of :func:`_rotate_qk_kernel`: in each half of a row, 8 per thread of its 4
warps, so that every access stays 16 bytes wide (bfloat16) however few rows a call has."""
_ROWS_MAX = 64
"""Rows of one sequence a program of :func:`_rotate_qk_kernel` takes at most."""
_FAR_CHUNK = 64
"""Rows of one sequence a program of :func:`_rotate_qk_far_kernel` looks at, at most."""


@triton.jit
def _rotate_qk_tile(
    x, out, pos, c, s, blk, n_cache, cs0, cs1, sign, offset, seq, heads,
    xs0, xs1, xs2, os0, os1, os2, ps0, ps1, row_blocks,
    HAS_POS: tl.constexpr, HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
    HEADS: tl.constexpr, ROWS: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """``HEADS`` heads × ``ROWS`` rows of one sequence of ``x[b, heads, seq, D]`` (tile ``blk`` of this
    tensor's ``b · row_blocks · ⌈heads/HEADS⌉``) as one ``[HEADS, ROWS, pairs]`` tile: the rows whose
    position ``t`` lies in the cache, ``0 ≤ t < n_cache``, rotated by the cached pair values at ``t``
    (strides ``cs0``, ``cs1``) into ``out``; the others are left to :func:`_rotate_qk_far_kernel`."""
    groups = tl.cdiv(heads, HEADS)
    i0 = (blk // (row_blocks * groups)).to(tl.int64)
    rows = (blk // groups % row_blocks) * ROWS + tl.arange(0, ROWS)
    head = (blk % groups) * HEADS + tl.arange(0, HEADS)
    row_ok = rows < seq
    rows = rows.to(tl.int64)
    if HAS_POS:
        t = tl.load(pos + i0 * ps0 + rows * ps1, mask=row_ok, other=0).to(tl.int64)
    else:
        t = offset + rows
    mine = row_ok & (t >= 0) & (t < n_cache)
    pair = tl.arange(0, BLOCK_P)
    at = t[:, None] * cs0 + pair[None, :] * cs1
    if R // 2 == BLOCK_P:  # no mask across a row, so that its accesses may be 16 bytes wide
        c_a = tl.load(c + at, mask=mine[:, None], other=0.0)[None, :, :]
        s_a = tl.load(s + at, mask=mine[:, None], other=0.0)[None, :, :] * sign
    else:
        c_a = tl.load(c + at, mask=mine[:, None] & (pair < R // 2)[None, :], other=0.0)[None, :, :]
        s_a = tl.load(s + at, mask=mine[:, None] & (pair < R // 2)[None, :], other=0.0)[None, :, :] * sign
    _rotate_tile(
        x, out, i0, head, heads, rows, row_ok, mine, c_a, s_a, xs0, xs1, xs2, os0, os1, os2,
        HALF_SPLIT, R, D, BLOCK_P, BLOCK_REST,
    )  # fmt: skip


@triton.jit
def _rotate_tile(
    x, out, i0, head, heads, rows, row_ok, mine, c_a, s_a, xs0, xs1, xs2, os0, os1, os2,
    HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """``out = R x`` on the tile ``[heads, rows, :]`` of sequence ``i0`` (stored where ``mine``):
    ``out_a = x_a·c − x_b·s``, ``out_b = x_b·c + x_a·s`` in the dtype of ``c_a``/``s_a`` (``[1, rows, pairs]``),
    dims ``R … D−1`` copied."""
    h = head.to(tl.int64)[:, None, None]
    x_at = x + i0 * xs0 + h * xs1 + rows[None, :, None] * xs2
    o_at = out + i0 * os0 + h * os1 + rows[None, :, None] * os2
    head_ok = (head < heads)[:, None, None]
    load_ok = head_ok & row_ok[None, :, None]
    store_ok = head_ok & mine[None, :, None]
    ty = out.dtype.element_ty
    if HALF_SPLIT:
        p = tl.arange(0, BLOCK_P)[None, None, :]
        pair_load, pair_store = load_ok, store_ok
        if R // 2 != BLOCK_P:
            pair_load = load_ok & (p < R // 2)
            pair_store = store_ok & (p < R // 2)
        x_a = tl.load(x_at + p, mask=pair_load).to(c_a.dtype)
        x_b = tl.load(x_at + R // 2 + p, mask=pair_load).to(c_a.dtype)
        tl.store(o_at + p, (x_a * c_a - x_b * s_a).to(ty), mask=pair_store)
        tl.store(o_at + R // 2 + p, (x_b * c_a + x_a * s_a).to(ty), mask=pair_store)
    else:
        col = tl.arange(0, 2 * BLOCK_P)[None, None, :]
        col_load, col_store = load_ok, store_ok
        if R != 2 * BLOCK_P:
            col_load = load_ok & (col < R)
            col_store = store_ok & (col < R)
        pairs = tl.reshape(tl.load(x_at + col, mask=col_load), (x_at.shape[0], x_at.shape[1], BLOCK_P, 2))
        x_a, x_b = tl.split(pairs)
        x_a = x_a.to(c_a.dtype)
        x_b = x_b.to(c_a.dtype)
        rotated = tl.join(x_a * c_a - x_b * s_a, x_b * c_a + x_a * s_a)
        tl.store(
            o_at + col,
            tl.reshape(rotated, (x_at.shape[0], x_at.shape[1], 2 * BLOCK_P)).to(ty),
            mask=col_store,
        )
    if D > R:
        rest = R + tl.arange(0, BLOCK_REST)[None, None, :]
        tl.store(o_at + rest, tl.load(x_at + rest, mask=load_ok & (rest < D)), mask=store_ok & (rest < D))


@triton.jit
def _rotate_qk_kernel(
    q, k, q_out, k_out, q_pos, k_pos, c, s, n_cache, cs0, cs1, sign, offset_q, offset_k,
    q_heads, q_seq, qs0, qs1, qs2, qos0, qos1, qos2, qps0, qps1, q_blocks, q_programs,
    k_heads, k_seq, ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1, k_blocks,
    HAS_POS: tl.constexpr, HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
    Q_HEADS: tl.constexpr, Q_ROWS: tl.constexpr, K_HEADS: tl.constexpr, K_ROWS: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """Queries and keys in one launch: programs ``0 … q_programs − 1`` take tiles of ``q``, the others tiles of
    ``k``, each tensor in its own branch (so each keeps its own strides' specialisation and tile shape)."""
    pid = tl.program_id(0)
    if pid < q_programs:
        _rotate_qk_tile(
            q,
            q_out,
            q_pos,
            c,
            s,
            pid,
            n_cache,
            cs0,
            cs1,
            sign,
            offset_q,
            q_seq,
            q_heads,
            qs0,
            qs1,
            qs2,
            qos0,
            qos1,
            qos2,
            qps0,
            qps1,
            q_blocks,
            HAS_POS,
            HALF_SPLIT,
            R,
            D,
            Q_HEADS,
            Q_ROWS,
            BLOCK_P,
            BLOCK_REST,
        )
    else:
        _rotate_qk_tile(
            k, k_out, k_pos, c, s, pid - q_programs, n_cache, cs0, cs1, sign, offset_k, k_seq, k_heads,
            ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1, k_blocks,
            HAS_POS, HALF_SPLIT, R, D, K_HEADS, K_ROWS, BLOCK_P, BLOCK_REST,
        )  # fmt: skip


@triton.jit
def _rotate_qk_far_rows(
    x, out, pos, c, theta, blk, n_cache, sign, offset, seq, heads, xs0, xs1, xs2, os0, os1, os2, ps0, ps1, chunks,
    HAS_POS: tl.constexpr, HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
    HEADS: tl.constexpr, CHUNK: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """Rows ``CHUNK`` long of one sequence of ``x`` (chunk ``blk`` of ``b · chunks``): those whose position
    lies outside the cache, one at a time, every head (``HEADS ≥ heads``) at once, by ``cos(t·θ_i)·a`` and
    ``sin(t·θ_i)·a`` formed in float64 (``θ = theta[:R/2]``, the attention factor ``a = theta[R/2]``), as
    the tables were built, rounded to the tables' (``c``'s) dtype. A chunk with no such row reads only its
    positions."""
    i0 = (blk // chunks).to(tl.int64)
    first = (blk % chunks) * CHUNK
    rows = first + tl.arange(0, CHUNK)
    row_ok = rows < seq
    if HAS_POS:
        t = tl.load(pos + i0 * ps0 + rows.to(tl.int64) * ps1, mask=row_ok, other=0).to(tl.int64)
        exact = (t < 9007199254740992) & (t > -9007199254740992)  # |t| < 2^53: float64 tells them apart
        tl.device_assert(exact | ~row_ok, "positions must be < 2^53 in magnitude (float64 angles)")
    else:
        t = offset + rows.to(tl.int64)
    if tl.max((row_ok & ((t < 0) | (t >= n_cache))).to(tl.int32), axis=0) > 0:
        pair = tl.arange(0, BLOCK_P)
        w = tl.load(theta + pair, mask=pair < R // 2, other=0.0)[None, :]
        factor = tl.load(theta + R // 2)
        head = tl.arange(0, HEADS)
        for i in range(CHUNK):
            row = (first + i + tl.zeros((1,), tl.int32)).to(tl.int64)
            ok = row < seq
            if HAS_POS:
                t_row = tl.load(pos + i0 * ps0 + row * ps1, mask=ok, other=0).to(tl.int64)
            else:
                t_row = offset + row
            mine = ok & ((t_row < 0) | (t_row >= n_cache))
            if tl.max(mine.to(tl.int32), axis=0) > 0:
                angle = t_row.to(tl.float64)[:, None] * w
                c_a = (tl.cos(angle) * factor).to(c.dtype.element_ty)[None, :, :]
                s_a = (tl.sin(angle) * factor * sign).to(c.dtype.element_ty)[None, :, :]
                _rotate_tile(
                    x, out, i0, head, heads, row, ok, mine, c_a, s_a, xs0, xs1, xs2, os0, os1, os2,
                    HALF_SPLIT, R, D, BLOCK_P, BLOCK_REST,
                )  # fmt: skip


@triton.jit(debug=True)  # its device_assert: a bad position stops the program, never used silently
def _rotate_qk_far_kernel(
    q, k, q_out, k_out, q_pos, k_pos, c, theta, n_cache, sign, offset_q, offset_k,
    q_heads, q_seq, qs0, qs1, qs2, qos0, qos1, qos2, qps0, qps1, q_chunks, q_programs,
    k_heads, k_seq, ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1, k_chunks,
    HAS_POS: tl.constexpr, HALF_SPLIT: tl.constexpr, R: tl.constexpr, D: tl.constexpr,
    Q_HEADS: tl.constexpr, K_HEADS: tl.constexpr, CHUNK: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_REST: tl.constexpr,
):  # fmt: skip
    """The rows of :func:`_rotate_qk_kernel` whose positions lie outside the cache: programs
    ``0 … q_programs − 1`` look at query rows, the others at key rows."""
    pid = tl.program_id(0)
    if pid < q_programs:
        _rotate_qk_far_rows(
            q,
            q_out,
            q_pos,
            c,
            theta,
            pid,
            n_cache,
            sign,
            offset_q,
            q_seq,
            q_heads,
            qs0,
            qs1,
            qs2,
            qos0,
            qos1,
            qos2,
            qps0,
            qps1,
            q_chunks,
            HAS_POS,
            HALF_SPLIT,
            R,
            D,
            Q_HEADS,
            CHUNK,
            BLOCK_P,
            BLOCK_REST,
        )
    else:
        _rotate_qk_far_rows(
            k, k_out, k_pos, c, theta, pid - q_programs, n_cache, sign, offset_k, k_seq, k_heads,
            ks0, ks1, ks2, kos0, kos1, kos2, kps0, kps1, k_chunks,
            HAS_POS, HALF_SPLIT, R, D, K_HEADS, CHUNK, BLOCK_P, BLOCK_REST,
        )  # fmt: skip


def _sm_count(device: torch.device) -> int:
    """Multiprocessors of ``device`` (132 on an H100/H200 SXM, the count assumed off CUDA)."""
    if device.type != "cuda":
        return 132
    return _cuda_sm_count(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _cuda_sm_count(index: int) -> int:
    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def _qk_tile(batch: int, heads: int, seq: int, row_elements: int, programs: int) -> tuple[int, int]:
    """``(heads, rows)`` per program, powers of two, about :data:`_TILE` elements in all: as many heads as
    fit (each row's table values are loaded once for all of them), then rows; while the grid would hold
    fewer than ``programs`` tiles, fewer heads per program (head-parallel rather than token-parallel), so
    that short sequences (decoding) still spread over the chip, down to :data:`_MIN_TILE` elements."""
    per_program = 2 ** (max(_TILE // row_elements, 1).bit_length() - 1)  # a power of two, as tl.arange needs
    tile_heads = min(triton.next_power_of_2(heads), per_program)
    rows = max(1, min(triton.next_power_of_2(seq), per_program // tile_heads, _ROWS_MAX))
    while (
        tile_heads > 1
        and tile_heads * rows * row_elements > _MIN_TILE
        and batch * triton.cdiv(seq, rows) * triton.cdiv(heads, tile_heads) < programs
    ):
        tile_heads //= 2
    return tile_heads, rows


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
    *,
    checks: str = "full",
) -> None:
    """``q_out = R q``, ``k_out = R k`` (``Rᵀ`` when ``inverse``): one launch, and a second small one for the
    rows whose positions lie outside the cache whenever the host cannot rule them out (tensor positions, or
    int offsets that run beyond the cache); every element is written by exactly one of the two.

    ``q``/``q_out`` ``[b, h, s_q, d]`` and ``k``/``k_out`` ``[b, h_k, s_k, d]``, any strides with unit last
    stride, the same dtype. ``positions``: ``([b or 1, s_q], [b or 1, s_k])`` integer tensors of one dtype
    (a batch of 1 broadcasts), or ``None`` for ``offsets[0] + 0 … s_q−1`` and ``offsets[1] + 0 … s_k−1``.
    ``tables``: the cached ``cos``/``sin`` pair values ``[n, r/2]`` (any strides) in the work dtype (float32,
    or float64 beside float64 ``q``), gathered by position; beyond row ``n`` (and below 0) the angles are
    formed from the float64 frequencies ``theta[:r/2]`` and scaled by ``theta[r/2]``, the tables' attention
    factor (float64, contiguous), by the second launch. Tensor positions must be below ``2^53`` in magnitude
    (beyond, float64 cannot tell neighbours apart): the second launch, which reads every one of them,
    asserts it on the device (a failure stops the program at the next synchronisation, as
    ``torch._assert_async`` does), so a caller needs no check of its own for that.

    ``checks``: ``"full"`` (every argument, storage bounds and overlaps included:
    :func:`posenc._gpu_checks.check_rotate_qk`), or ``"signature"`` for a caller whose ``q_out``/``k_out``
    are fresh allocations (``torch.empty_like``): the checks that depend only on shapes, strides, dtypes and
    devices run once per such signature (:func:`posenc._gpu_checks.check_rotate_qk_signature`)."""
    _check(
        checks, _gpu_checks.check_rotate_qk, _gpu_checks.check_rotate_qk_signature,
        q, k, q_out, k_out, positions, offsets, tables, theta, layout, r,
    )  # fmt: skip
    b, q_heads, s_q, d = q.shape
    k_heads, s_k = k.shape[1], k.shape[2]
    c, s = tables
    n_cache = c.shape[0]
    block_p = triton.next_power_of_2(r // 2)
    block_rest = triton.next_power_of_2(d - r) if d > r else 1
    row_elements = 2 * block_p + (block_rest if d > r else 0)
    programs = 4 * _sm_count(q.device)
    q_tile, k_tile = (_qk_tile(b, h, n, row_elements, programs) for h, n in ((q_heads, s_q), (k_heads, s_k)))
    q_blocks, k_blocks = triton.cdiv(s_q, q_tile[1]), triton.cdiv(s_k, k_tile[1])
    # 8 elements of each half row per thread, where a tile is that small: 16-byte accesses (bfloat16)
    warps = min(4, max(1, min(q_tile[0] * q_tile[1], k_tile[0] * k_tile[1]) * block_p // 256))
    q_programs = b * q_blocks * triton.cdiv(q_heads, q_tile[0])
    k_programs = b * k_blocks * triton.cdiv(k_heads, k_tile[0])
    if q_programs + k_programs == 0:
        return
    if positions is None:
        q_pos = k_pos = theta  # not read
        q_ps = k_ps = (0, 0)
        far = offsets[0] + s_q > n_cache or offsets[1] + s_k > n_cache
    else:
        q_pos, k_pos = positions
        q_ps = (q_pos.stride(0) if q_pos.shape[0] > 1 else 0, q_pos.stride(1))
        k_ps = (k_pos.stride(0) if k_pos.shape[0] > 1 else 0, k_pos.stride(1))
        far = True  # the host cannot know without reading the positions: the second launch looks
    sign, half_split = -1.0 if inverse else 1.0, layout == "half_split"
    _rotate_qk_kernel[(q_programs + k_programs,)](
        q, k, q_out, k_out, q_pos, k_pos, c, s, n_cache, c.stride(0), c.stride(1), sign, offsets[0], offsets[1],
        q_heads, s_q, *q.stride()[:3], *q_out.stride()[:3], *q_ps, q_blocks, q_programs,
        k_heads, s_k, *k.stride()[:3], *k_out.stride()[:3], *k_ps, k_blocks,
        HAS_POS=positions is not None, HALF_SPLIT=half_split, R=r, D=d,
        Q_HEADS=q_tile[0], Q_ROWS=q_tile[1], K_HEADS=k_tile[0], K_ROWS=k_tile[1],
        BLOCK_P=block_p, BLOCK_REST=block_rest, num_warps=warps,
    )  # fmt: skip
    if not far:
        return
    chunk = min(_FAR_CHUNK, triton.next_power_of_2(max(s_q, s_k)))
    q_chunks, k_chunks = triton.cdiv(s_q, chunk), triton.cdiv(s_k, chunk)
    _rotate_qk_far_kernel[(b * (q_chunks + k_chunks),)](
        q, k, q_out, k_out, q_pos, k_pos, c, theta, n_cache, sign, offsets[0], offsets[1],
        q_heads, s_q, *q.stride()[:3], *q_out.stride()[:3], *q_ps, q_chunks, b * q_chunks,
        k_heads, s_k, *k.stride()[:3], *k_out.stride()[:3], *k_ps, k_chunks,
        HAS_POS=positions is not None, HALF_SPLIT=half_split, R=r, D=d,
        Q_HEADS=triton.next_power_of_2(q_heads), K_HEADS=triton.next_power_of_2(k_heads), CHUNK=chunk,
        BLOCK_P=block_p, BLOCK_REST=block_rest, sanitize_overflow=False,
    )  # fmt: skip
