"""Triton kernels for CUDA tensors: rotary pairs and sinusoidal tables (loaded by :mod:`posenc._gpu`).

Each kernel is one launch and one pass over its output. Callers check shapes, dtypes and devices;
the launchers take views whose last stride is 1. Importing this module imports Triton.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

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
    registers (strided loads of every other element measured 6× slower)."""
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
    n, c = out.shape
    b, f = fine[0].shape
    block_f = min(triton.next_power_of_2(f), 64)
    block_n = _rows_per_program(2 * block_f, n)
    _waves_kernel[(triton.cdiv(n, block_n), triton.cdiv(f, block_f))](
        out, *fine, *coarse, n, c, f, b, out.stride(0), LAYOUT=layout, BLOCK_N=block_n, BLOCK_F=block_f
    )
