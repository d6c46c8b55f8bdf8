"""Functional core shared by every PyTorch encoding: exact sin/cos of ``positions ⊗ frequencies``.

One mechanism — frequencies → angles → sin/cos → layout columns — for every table in
:mod:`posenc.nn` (Vaswani et al. 2017, §3.5, for any frequencies). A table is described by its ``f`` angular
frequencies ``w`` and, for each of its ``c`` columns, which entry of the ``[2f]`` row
``[sin(t·w_0) … sin(t·w_(f−1)), cos(t·w_0) … cos(t·w_(f−1))]`` it holds (``columns``) and
with what amplitude. :func:`layout_index` gives the ``columns`` of the sinusoidal layouts of
:data:`posenc.spectrum.LAYOUTS`; the DFT encoding's order (Idé, Labaien & Chen 2024, eq. 21) is another
index into the same row.

**Precision.** Angles ``t·w`` are formed in float64 and only the finished values are cast:
in float32 the angle at ``t = 10^6`` is already off by ~0.06 rad.

**Speed (the shift identity: the angle addition formulas).** For a range of positions ``t = t0 + j``, the row at
``t0 + j`` is the row at ``j`` rotated by ``t0·w``::

    sin((t0 + j)·w) = sin(j·w)·cos(t0·w) + cos(j·w)·sin(t0·w)
    cos((t0 + j)·w) = cos(j·w)·cos(t0·w) − sin(j·w)·sin(t0·w)

so an ``S``-row table needs sin/cos only of ``√S`` offsets ``j`` and ``√S`` block starts
``t0`` (themselves built the same way), and one multiply-add per entry. The multiply-add is
done in float64, one cache-sized block at a time, then cast: combining in float32 would leave
an error of up to ~1.3e-7 (four float32 roundings), while the float64 combination is within
a few 1e-16 of the float64 angle's sin/cos, so the float32 table is correctly rounded
(error ≤ 3e-8) at every position up to 10^7 and beyond. Ranges are taken when ``positions`` is
an int (with an ``offset``); a tensor of positions — whose values are never read on the host to
detect a range — and gradients to the frequencies form every angle directly, which is exact and
differentiable but slower (``benchmarks/README.md``).
The interleaved ``(sin, cos)`` layout without amplitudes (the sinusoidal encoding) does the
same by one complex multiply per pair (:func:`_range_interleaved`), written straight into the
output.

**CUDA.** With Triton installed, ranges of positions in the sinusoidal layouts on CUDA are written by
one kernel (:mod:`posenc._gpu`, from :func:`_fine_coarse`): the same shift identity in float64, every entry
of the output computed from ``√S`` fine and ``√S`` coarse rows and rounded once, in one pass.

Which of these writes a table is chosen in one place, :func:`posenc.backends.select` over the backends of
:mod:`posenc.backends.waves`; this module keeps the arithmetic.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
import torch

from posenc import spectrum, tables
from posenc.backends import waves as waves_backends

_DIRECT_ROWS = 64
"""Ranges of at most this many positions form every angle directly."""

_BLOCK_BYTES = 1 << 20
"""Size of the float64 scratch block the multiply-add works in (about the L2 cache)."""


def layout_index(dim: int, layout: str = "interleaved") -> torch.Tensor:
    """``columns`` ``[dim]`` (int64) of a sinusoidal table of ``⌈dim/2⌉`` frequencies in ``layout``.

    Column ``c`` holds entry ``columns[c]`` of the ``[sin | cos]`` row (see module docstring);
    the columns themselves come from :func:`posenc.spectrum.layout_columns`.
    """
    sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
    index = torch.empty(dim, dtype=torch.int64)
    index[torch.from_numpy(sin_cols)] = torch.arange(sin_cols.size)
    index[torch.from_numpy(cos_cols)] = sin_cols.size + torch.arange(cos_cols.size)
    return index


@functools.lru_cache(maxsize=64)
def _interleaved_columns(dim: int) -> torch.Tensor:
    """:func:`layout_index` of the interleaved layout, built once per ``dim`` (never written to)."""
    return layout_index(dim)


def sincos(
    positions: torch.Tensor | int, frequencies: torch.Tensor, *, dtype: torch.dtype, offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin(t ⊗ w), cos(t ⊗ w))``, each ``[s, f]``, from float64 angles, returned in ``dtype``.

    Args:
        positions: ``[s]`` positions (any real dtype; promoted to float64), or an int ``s``
            meaning ``offset … offset+s−1``.
        frequencies: ``[f]`` angular frequencies (promoted to float64); their device is used.
        dtype: dtype of the returned tensors.
        offset: first position when ``positions`` is an int.
    """
    f = frequencies.shape[-1]
    both = waves(
        positions, frequencies, torch.arange(2 * f, device=frequencies.device), dtype=dtype, offset=offset
    )
    return both[:, :f], both[:, f:]


def waves(
    positions: torch.Tensor | int,
    frequencies: torch.Tensor,
    columns: torch.Tensor,
    *,
    amplitude: torch.Tensor | None = None,
    dtype: torch.dtype,
    offset: int = 0,
) -> torch.Tensor:
    """The table ``out[r, c] = amplitude[c] · [sin(t_r·w) | cos(t_r·w)][columns[c]]``, ``[s, len(columns)]``.

    ``[sin(t·w) | cos(t·w)]`` is the ``[2f]`` concatenation of the sines and cosines of the
    ``f`` frequencies; angles are float64 (see the module docstring for the exact
    fast path over ranges of positions).

    Args:
        positions: ``[s]`` real positions ``t_r``, or an int ``s`` meaning ``offset … offset+s−1``.
        frequencies: ``[f]`` angular frequencies ``w``; gradients flow to them (and to
            ``amplitude``) through the direct path.
        columns: ``[c]`` int64 indices into ``[sin | cos]`` (e.g. :func:`layout_index`).
        amplitude: optional ``[c]`` factor per column (1 when ``None``).
        dtype: dtype of the result.
        offset: first position when ``positions`` is an int.
    """
    if isinstance(positions, numbers.Integral):
        positions = int(positions)
    w = frequencies.to(torch.float64)
    amp = None if amplitude is None else amplitude.to(device=w.device, dtype=torch.float64)
    differentiable = torch.is_grad_enabled() and (
        frequencies.requires_grad or (amplitude is not None and amplitude.requires_grad)
    )
    call = waves_backends.Waves(
        positions, w, columns.to(w.device), columns, amp, dtype, offset, differentiable
    )
    return waves_backends.waves(call)


def _direct(
    t: torch.Tensor, w: torch.Tensor, columns: torch.Tensor, amp: torch.Tensor | None
) -> torch.Tensor:
    """Every angle ``t ⊗ w`` formed in float64: ``[s, c]`` float64, differentiable."""
    a = torch.outer(t, w)
    out = torch.cat([torch.sin(a), torch.cos(a)], dim=1)[:, columns]
    return out if amp is None else out * amp


def _gpu_layout(columns: torch.Tensor, f: int) -> int | None:
    """The column layout code of the GPU kernel (``posenc._gpu_kernels.PAIRS_SIN_COS``, ``PAIRS_COS_SIN``
    or ``SPLIT``) that writes ``columns`` of ``f`` frequencies, or ``None`` for other columns."""
    c, k = columns.shape[0], torch.arange(f)
    if c > 2 * f:
        return None
    for code, expected in enumerate(
        (torch.stack([k, f + k], 1).flatten()[:c], torch.stack([f + k, k], 1).flatten()[:c], torch.arange(c))
    ):
        if _same_columns(columns, expected):
            return code
    return None


def _same_columns(columns: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether the column index ``columns`` equals the CPU tensor ``expected``, read without a torch
    operator (so without a device synchronisation): CPU indices are compared as NumPy arrays, indices
    on another device are taken as different (the general path)."""
    if columns.device.type != "cpu" or columns.shape != expected.shape:
        return False
    return bool(np.array_equal(columns.detach().numpy(), expected.numpy()))


def _fine_coarse(
    start: float, n: int, w: torch.Tensor
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """What the GPU kernel (:mod:`posenc._gpu`) builds rows ``t = start … start+n−1`` from by the shift
    identity of :func:`_range`: the sines and cosines of ``u·w`` for the ``b = ⌈√n⌉`` offsets ``u`` (fine)
    and of ``t_q·w`` for the block starts ``t_q = start + b·q`` (coarse), every angle formed directly in
    float64."""
    b = tables._shift_block(n)
    fine = torch.outer(torch.arange(b, dtype=torch.float64, device=w.device), w)
    coarse = torch.outer(start + b * torch.arange(-(-n // b), dtype=torch.float64, device=w.device), w)
    return (fine.sin(), fine.cos()), (coarse.sin(), coarse.cos())


def _range(
    start: float,
    step: float,
    n: int,
    w: torch.Tensor,
    columns: torch.Tensor,
    amp: torch.Tensor | None,
    dtype: torch.dtype,
) -> torch.Tensor:
    """Rows ``t_r = start + step·r``, ``r < n``, of :func:`waves` by the shift identity (angle addition).

    Blocks of ``b ≈ √n`` rows: row ``q·b + j`` is row ``j`` (offsets ``step·j``, formed directly)
    rotated by the angle of block start ``start + step·b·q`` (built recursively the same way).
    Layout of the work::

        fine   P[j, c] = amp·[sin | cos](step·j·w)[columns]     Q[j, c] = amp·[cos | −sin](…)[columns]
        coarse C[q, c] = cos((start + step·b·q)·w_c)            S[q, c] = sin(…)
        out[q·b + j, c] = P[j, c]·C[q, c] + Q[j, c]·S[q, c]     (float64, then cast to dtype)
    """
    if n <= _DIRECT_ROWS:
        t = start + step * torch.arange(n, dtype=torch.float64, device=w.device)
        return _direct(t, w, columns, amp).to(dtype)
    f, c = w.shape[0], columns.shape[0]
    if amp is None and c == 2 * f and _same_columns(columns, _interleaved_columns(c)):
        return _range_interleaved(start, step, n, w, dtype)
    b = tables._shift_block(n)
    n_blocks = -(-n // b)
    a = torch.outer(step * torch.arange(b, dtype=torch.float64, device=w.device), w)
    sin_j, cos_j = torch.sin(a), torch.cos(a)
    fine_p = torch.cat([sin_j, cos_j], dim=1)[:, columns]
    fine_q = torch.cat([cos_j, -sin_j], dim=1)[:, columns]
    if amp is not None:
        fine_p, fine_q = fine_p * amp, fine_q * amp
    coarse = _range(start, step * b, n_blocks, w, torch.arange(2 * f, device=w.device), None, torch.float64)
    pair = columns % f
    coarse_cos, coarse_sin = coarse[:, f + pair], coarse[:, pair]

    out = torch.empty(n, c, dtype=dtype, device=w.device)
    per_chunk = max(1, _block_bytes(8 * n * c, w.device) // (8 * b * c))
    scratch = torch.empty(per_chunk, b, c, dtype=torch.float64, device=w.device)
    for q0 in range(0, n_blocks, per_chunk):
        q1 = min(q0 + per_chunk, n_blocks)
        r0, r1 = q0 * b, min(q1 * b, n)
        in_place = dtype == torch.float64 and r1 - r0 == (q1 - q0) * b
        block = out[r0:r1].view(q1 - q0, b, c) if in_place else scratch[: q1 - q0]
        torch.mul(fine_p, coarse_cos[q0:q1, None], out=block)
        block.addcmul_(fine_q, coarse_sin[q0:q1, None])
        if not in_place:
            out[r0:r1].copy_(block.view(-1, c)[: r1 - r0])
    return out


def _block_bytes(total: int, device: torch.device) -> int:
    """Bytes of float64 scratch per block, for ``total`` bytes of scratch work in all on ``device``.

    One CPU thread: :data:`_BLOCK_BYTES`, so that every pass stays in the cache. More threads: each
    operation is one parallel region whose threads meet at a barrier, and on a busy machine a thread
    that is not scheduled keeps the others waiting there; so at most two blocks (scratch of about
    the float32 table's size) rather than many cache-sized ones. Other devices: one block (each block
    is a kernel launch).
    """
    if device.type != "cpu":
        return total
    if torch.get_num_threads() <= 1:
        return _BLOCK_BYTES
    return max(_BLOCK_BYTES, -(-total // 2))


def _expi_doubling(start: float, step: float, n: int, w: torch.Tensor) -> torch.Tensor:
    """``exp(i·(start + step·r)·w)``, ``r < n``, ``[n, f]`` complex128, by doubling.

    Rows ``m … 2m−1`` are rows ``0 … m−1`` times ``exp(i·step·m·w)``: row ``r`` is the product of
    ``exp(i·start·w)`` and one directly computed factor ``exp(i·step·2^k·w)`` per set bit of ``r``
    (``log2 n`` float64 roundings of ~1e-16, ``log2 n`` rows of ``sin``/``cos`` instead of ``n``).
    """
    shifts = [start] + [step * 2.0**k for k in range(max(n - 1, 0).bit_length())]
    a = torch.outer(torch.tensor(shifts, dtype=torch.float64, device=w.device), w)
    factors = torch.polar(torch.ones_like(a), a)
    out = torch.empty(n, w.shape[0], dtype=torch.complex128, device=w.device)
    out[0] = factors[0]
    m = 1
    for k in range(1, len(shifts)):
        torch.mul(out[: min(m, n - m)], factors[k], out=out[m : min(2 * m, n)])
        m *= 2
    return out


def _range_interleaved(
    start: float, step: float, n: int, w: torch.Tensor, dtype: torch.dtype
) -> torch.Tensor:
    """:func:`_range` for the interleaved ``(sin, cos)`` layout without amplitudes, by complex products.

    Pair ``i`` of row ``q·b + j`` is ``z = (sin(j·w_i) + i·cos(j·w_i))·(cos(t_q·w_i) − i·sin(t_q·w_i))
    = sin((t_q + j)·w_i) + i·cos((t_q + j)·w_i)``: one float64 complex multiply gives both entries,
    stored as they fall (``(re, im)`` is the ``(sin, cos)`` pair) and rounded once to ``dtype`` by
    the multiply itself, one cache-sized block of rows at a time (where the compiled loop of
    :mod:`posenc._native` is built, the backend ``loop`` of :mod:`posenc.backends.waves` does all of this
    in one pass instead). The factors come on the CPU from :func:`posenc.tables._expi_ranges` (the same
    rows, bit for bit: the table equals :func:`posenc.sinusoidal`'s), on other devices from
    :func:`_expi_doubling`, built where ``w`` lives (no host round trip).
    """
    f = w.shape[0]
    b = tables._shift_block(n)
    n_blocks = -(-n // b)
    out = torch.empty(n, 2 * f, dtype=dtype, device=w.device)
    if w.device.type == "cpu":  # posenc.sinusoidal's factors: the two tables are equal bit for bit
        fine_np, coarse_np = tables._expi_ranges(
            w.detach().numpy(), (0.0, step, b, True), (start, step * b, n_blocks, False)
        )
        fine, coarse = torch.from_numpy(fine_np), torch.from_numpy(coarse_np)
    else:
        fine = _expi_doubling(0.0, step, b, w)
        fine = torch.complex(fine.imag, fine.real)  # i·conj(e^(ia)) = sin a + i·cos a
        coarse = _expi_doubling(start, step * b, n_blocks, w).conj_physical()
    complex_dtype = {torch.float64: torch.complex128, torch.float32: torch.complex64}.get(dtype)
    per_chunk = max(1, _block_bytes(16 * n * f, w.device) // (16 * b * f))
    scratch = None
    for q0 in range(0, n_blocks, per_chunk):
        q1 = min(q0 + per_chunk, n_blocks)
        r0, r1 = q0 * b, min(q1 * b, n)
        if complex_dtype is not None and r1 - r0 == (q1 - q0) * b:
            rows = torch.view_as_complex(out[r0:r1].view(q1 - q0, b, f, 2))
            torch.mul(fine, coarse[q0:q1, None], out=rows)
            continue
        if scratch is None:
            scratch = torch.empty(per_chunk, b, f, dtype=torch.complex128, device=w.device)
        block = torch.mul(fine, coarse[q0:q1, None], out=scratch[: q1 - q0])
        out[r0:r1].copy_(torch.view_as_real(block).view(-1, 2 * f)[: r1 - r0])
    return out
