"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer): rotate query/key pairs by ``t·θ_i``.

Pair ``i`` of a query or key at position ``t`` is rotated by the angle ``t·θ_i`` (Su et al. 2021, eq. 34)::

    out_a = x_a·cos(tθ_i) − x_b·sin(tθ_i)
    out_b = x_b·cos(tθ_i) + x_a·sin(tθ_i)

so ``⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩`` depends on ``n − m`` only (Su et al. 2021).
``θ_i = base^(−2i/r)``, ``i < r/2``, over the ``r = rotary_dim`` rotated dimensions (:func:`posenc.spectrum.geometric`); dimensions ``r … d_h − 1`` pass
through unchanged (partial rotary, GPT-NeoX ``rotary_pct`` / GPT-J ``rotary_dim``).

Which coordinates form pair ``i`` is the *layout*; both are in use and must not be mixed up
when loading weights. For ``r = 8`` (pairs 0…3)::

    adjacent     a0 b0 a1 b1 a2 b2 a3 b3    RoFormer, GPT-J ``rotate_every_two``, Meta LLaMA (complex)
    half_split   a0 a1 a2 a3 b0 b1 b2 b3    GPT-NeoX, Hugging Face ``rotate_half`` (LLaMA, Mistral …)

The cos/sin tables handed to :func:`apply_rotary` are ``[s, r]`` in the same layout
(``cos(tθ_i)`` stands in both columns of pair ``i``): for ``half_split`` they equal Hugging
Face's ``cos``/``sin`` (``cat(freqs, freqs)``), for ``adjacent`` GPT-J's ``repeat_interleave``.

Context extension (``scaling``) changes the frequencies (and, for YaRN/LongRoPE, scales the
tables by an attention factor) so that angles stay ``t·θ_i`` in float64: ``"linear"`` (Chen et
al. 2023), ``"ntk"`` (bloc97 2023), and Hugging Face's ``"dynamic"``, ``"yarn"`` (Peng et al.
2023), ``"longrope"`` (Ding et al. 2024) and ``"llama3"`` — the registry of
:mod:`posenc.nn.rope_types`; :meth:`RotaryEmbedding.from_hf` reads them from a transformers config.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np
import torch

from posenc import _gpu, _native, spectrum, validate
from posenc.nn import _positions, rope_types
from posenc.nn.contracts import PositionContext, RotaryContract
from posenc.nn.functional import sincos
from posenc.registry import EncodingView

LAYOUTS: tuple[str, ...] = ("adjacent", "half_split")


@dataclasses.dataclass(frozen=True)
class _Positions:
    """A rotary context's positions (``None``: the default ``0 … s−1``), read back by ``transform_qk``."""

    positions: torch.Tensor | None


_CHUNK_BYTES = 1 << 20
"""Eager :func:`apply_rotary` works through ``x`` in blocks of about this many bytes (of rows of the
merged batch·head dims and of the sequence), so that its passes run in the cache, not in main memory."""


def _pairs(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the first (``a``) and second (``b``) coordinates of every pair of ``t[..., r]``."""
    half = t.shape[-1] // 2
    if layout == "half_split":
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def rotation_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool = False
) -> torch.Tensor:
    """The definition every backend of :func:`apply_rotary` is tested against, and the form compilers fuse.

    ``R x`` (``Rᵀ x`` when ``inverse``) over the first ``r`` dims of ``x[..., s, d]``, dims ``r …`` passed
    through; ``cos``, ``sin`` ``[s, r]`` in ``layout``, pair ``i`` rotated by ``[[c_a, −s_a], [s_b, c_b]]``
    (Su et al. 2021, eq. 34, where ``c_a = c_b``, ``s_a = s_b``). One out-of-place real expression: no
    complex dtype, no in-place writes, so ``torch.compile`` makes one loop of it and ``torch.export``
    graphs stay real.
    """
    r = cos.shape[-1]
    (x_a, x_b), (c_a, c_b), (s_a, s_b) = _pairs(x[..., :r], layout), _pairs(cos, layout), _pairs(sin, layout)
    if inverse:
        o_a, o_b = x_a * c_a + x_b * s_b, x_b * c_b - x_a * s_a
    else:
        o_a, o_b = x_a * c_a - x_b * s_a, x_b * c_b + x_a * s_b
    rotated = torch.cat([o_a, o_b], -1) if layout == "half_split" else torch.stack([o_a, o_b], -1).flatten(-2)
    return rotated if r == x.shape[-1] else torch.cat([rotated, x[..., r:]], dim=-1)


_Pairs = tuple[torch.Tensor, torch.Tensor]
"""``(cos_a, sin_a)``: the ``[s, r/2]`` per-pair values of rotation tables (both columns of every pair
equal), any strides; what the fast paths read instead of the ``[s, r]`` tables."""


def _pair_values(cos: torch.Tensor, sin: torch.Tensor, layout: str, rotation: bool) -> _Pairs | None:
    """``(cos_a, sin_a)``, views of the ``[s, r/2]`` per-pair values, when both columns of every pair of
    the tables are equal (a rotation table); else ``None``. ``rotation``: the caller made the tables so
    (:class:`RotaryEmbedding`), and they are not read on the host to find out."""
    (c_a, c_b), (s_a, s_b) = _pairs(cos, layout), _pairs(sin, layout)
    if rotation:
        return c_a, s_a
    return (c_a, s_a) if torch.equal(c_a, c_b) and torch.equal(s_a, s_b) else None


def _given_pairs(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> _Pairs | None:
    """The per-pair values of tables a caller gave :func:`apply_rotary`, found by reading them
    (:func:`_pair_values`) and copied contiguous, or ``None`` where the two columns of a pair differ.

    Finding them costs a tenth to a third of a call (``benchmarks/README.md``), so the results for the
    :data:`_GIVEN_SIZE` tables used last are kept while those tables are alive and unchanged. A table is
    known by the memory it reads (:func:`_memory_key`: its storage, held by weak reference, and its offset,
    shape, strides and dtype) and by its version counter, which views and detached aliases share with their
    base: the fresh slice ``cos[:s]`` handed out at every call, or the alias a compiled backward receives,
    finds the entry of the last call, and an in-place change through any of them misses it. Inference
    tensors keep no version counter: theirs are found at every call. (:class:`RotaryEmbedding` keeps its
    own per-pair values beside its tables and never comes here.)"""
    if cos.is_inference() or sin.is_inference():
        return _contiguous(_pair_values(cos, sin, layout, False))
    (cos_mem, cos_view), (sin_mem, sin_view) = _memory_key(cos), _memory_key(sin)
    ident = (cos_view, sin_view, int(cos._version), int(sin._version), layout)
    for i, (ref_cos, ref_sin, entry_ident, pairs) in enumerate(_GIVEN):
        if entry_ident == ident and ref_cos() is cos_mem and ref_sin() is sin_mem:
            _GIVEN.insert(0, _GIVEN.pop(i))  # most recently used first
            return pairs
    pairs = _contiguous(_pair_values(cos, sin, layout, False))
    _GIVEN[:] = [e for e in _GIVEN if e[0]() is not None and e[1]() is not None]  # drop dead tables
    _GIVEN.insert(0, (weakref.ref(cos_mem), weakref.ref(sin_mem), ident, pairs))
    del _GIVEN[_GIVEN_SIZE:]
    return pairs


def _contiguous(pairs: _Pairs | None) -> _Pairs | None:
    return None if pairs is None else (pairs[0].contiguous(), pairs[1].contiguous())


def _memory_key(t: torch.Tensor) -> tuple[torch.UntypedStorage, tuple[Any, ...]]:
    """``(storage, geometry)``: the storage ``t`` reads (one Python object per storage, for as long as the
    storage lives) and where in it ``t`` lies (storage offset, shape, strides, dtype)."""
    return t.untyped_storage(), (t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


_GIVEN_SIZE = 8
"""How many given tables :func:`_given_pairs` keeps (least recently used dropped first)."""

_GIVEN: list[
    tuple[
        weakref.ref[torch.UntypedStorage], weakref.ref[torch.UntypedStorage], tuple[Any, ...], _Pairs | None
    ]
] = []
"""Recent :func:`_given_pairs` results, most recently used first: ``(weakref cos storage, weakref sin
storage, (cos geometry, sin geometry, versions, layout), pairs)``."""


def _rotate_into(
    out: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool
) -> None:
    """Write ``R x`` (or ``Rᵀ x`` when ``inverse``) into ``out`` by real arithmetic on the pair views.

    ``x``, ``out``: ``[..., s, r]``; ``cos``, ``sin``: ``[s, r]`` in ``layout``, any values (the two
    columns of a pair may differ: ``R = [[c_a, −s_a], [s_b, c_b]]`` per pair).
    """
    torch.mul(x, cos, out=out)
    (x_a, x_b), (o_a, o_b), (s_a, s_b) = _pairs(x, layout), _pairs(out, layout), _pairs(sin, layout)
    if inverse:  # the transpose: [[c_a, −s_a], [s_b, c_b]]ᵀ = [[c_a, s_b], [−s_a, c_b]]
        o_a.addcmul_(x_b, s_b)
        o_b.addcmul_(x_a, s_a, value=-1.0)
    else:
        o_a.addcmul_(x_b, s_a, value=-1.0)
        o_b.addcmul_(x_a, s_b)


def _pair_table(pairs: _Pairs | None, layout: str, inverse: bool, work: torch.dtype) -> torch.Tensor | None:
    """What the complex and blocked paths need of a rotation table's per-pair values ``pairs``
    (``None`` for other tables: then ``None``): ``adjacent``, the ``[s, r/2]`` complex rotor ``c ± i·s``
    in the complex dtype of ``work``; ``half_split``, the contiguous ``[s, r/2]`` sines (the addends'
    inner loops then read one contiguous table instead of a strided half). Made at every call, one
    operation on ``s·r/2`` values (these paths serve where the compiled loop does not)."""
    if pairs is None:
        return None
    c_a, s_a = pairs
    if layout == "half_split":
        return s_a.contiguous()
    s_a = s_a.to(work)
    return torch.complex(c_a.to(work), -s_a if inverse else s_a)


def _rotate_complex_into(out: torch.Tensor, x: torch.Tensor, rotor: torch.Tensor) -> None:
    """``out = R x`` for ``adjacent`` pairs read as complex numbers: one complex multiply by ``rotor``."""
    torch.mul(
        torch.view_as_complex(x.unflatten(-1, (-1, 2))),
        rotor,
        out=torch.view_as_complex(out.unflatten(-1, (-1, 2))),
    )


def _complex_viewable(t: torch.Tensor) -> bool:
    """Whether ``view_as_complex`` can read the pairs of ``t[..., r]`` in place."""
    return t.stride(-1) == 1 and all(st % 2 == 0 for st in t.stride()[:-1]) and t.storage_offset() % 2 == 0


def _leading_mergeable(t: torch.Tensor) -> bool:
    """Whether the dims before the last two of ``t`` can be merged into one without a copy."""
    return all(t.stride(i) == t.stride(i + 1) * t.shape[i + 1] for i in range(t.dim() - 3))


def _blocks(t: torch.Tensor, lead_step: int, seq_step: int) -> list[torch.Tensor]:
    """Views of ``t[l, s, …]`` in blocks of ``lead_step`` × ``seq_step``, lead-major."""
    if seq_step >= t.shape[-2]:
        return list(t.split(lead_step, 0))
    return [blk for rows in t.split(lead_step, 0) for blk in rows.split(seq_step, -2)]


def _native_ok(x: torch.Tensor) -> bool:
    """Whether the compiled loop of :mod:`posenc._native` can rotate ``x``: built, CPU, float32/float64/
    bfloat16, unit stride along the last dim."""
    return (
        _native.kernels is not None
        and x.device.type == "cpu"
        and _native.dtype_code(x.dtype, "rotate") is not None
        and x.stride(-1) == 1
        and x.dim() >= 2
    )


def _gpu_for(x: torch.Tensor) -> ModuleType | None:
    """The Triton kernels of :mod:`posenc._gpu` if they can rotate ``x`` (CUDA, Triton installed, half,
    single or double precision, unit stride along the last dim), else ``None``."""
    if x.dim() < 2 or x.stride(-1) != 1:
        return None
    return _gpu.kernels(x.device.type, x.dtype)


def _fused_ok(x: torch.Tensor) -> bool:
    """Whether a one-pass kernel rotates ``x``: the CPU loop (:func:`_native_ok`) or the GPU kernel
    (:func:`_gpu_for`)."""
    return _native_ok(x) or _gpu_for(x) is not None


def _loop_tables(
    cos: torch.Tensor, sin: torch.Tensor, pairs: _Pairs | None, layout: str, inverse: bool, work: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(cos, sin, paired)`` as the native loop reads them, in ``work`` (the loop's
    work dtype, or bfloat16 beside bfloat16 ``x`` when the tables are bfloat16: exact either way).

    With ``paired`` (both columns of every pair equal: half the table traffic), ``[s, r/2]``, one value
    per pair, and the loop computes ``out_a = x_a·c − x_b·s``, ``out_b = x_b·c + x_a·s``;
    ``Rᵀ`` (``inverse``) is that form with ``−s``. Else ``[s, r]`` in ``layout`` with signed sines
    ``(σ_a, σ_b)`` and the loop computes two sums, ``out_a = x_a·c_a + x_b·σ_a``,
    ``out_b = x_b·c_b + x_a·σ_b``: ``R`` has ``(σ_a, σ_b) = (−s_a, s_b)``, ``Rᵀ = [[c_a, s_b], [−s_a, c_b]]``
    has ``(s_b, −s_a)``. Rows may lie apart (pair values viewed in ``half_split`` tables are read in place,
    every row ``r`` values apart); else they are copied. Made at every call; for the per-pair values a
    module keeps (:meth:`RotaryEmbedding._pair_tables`) and those of given tables (:func:`_given_pairs`)
    the forward rotation's are those values themselves, and nothing is made."""
    if pairs is not None:
        c, s = pairs if pairs[0].dtype == pairs[1].dtype == work else (pairs[0].to(work), pairs[1].to(work))
        s = -s if inverse else s
        if c.is_contiguous() and s.is_contiguous():
            return c, s, True
        if not (_rows_apart(c) and c.stride() == s.stride()):
            c, s = c.contiguous(), s.contiguous()
        return c, s, True
    sin_w = sin.to(work)
    s_a, s_b = _pairs(sin_w, layout)
    signed = torch.empty_like(sin_w)
    o_a, o_b = _pairs(signed, layout)
    if inverse:
        o_a.copy_(s_b)
        torch.neg(s_a, out=o_b)
    else:
        torch.neg(s_a, out=o_a)
        o_b.copy_(s_b)
    return cos.to(work).contiguous(), signed, False


def _rows_apart(t: torch.Tensor) -> bool:
    """Whether the loops read ``t [s, n]`` as it is: unit stride along a row, rows at least ``n`` apart."""
    return t.stride(-1) == 1 and (t.shape[0] <= 1 or t.stride(0) >= t.shape[1])


def _rotate_fused(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor | None:
    """``R x`` (``Rᵀ x``) in one pass over ``x`` (all dims ``r …`` copied) by the CPU loop of
    :mod:`posenc._native` or the GPU kernel of :mod:`posenc._gpu`, or ``None`` where neither applies
    (:func:`_fused_ok`; more than two leading dims that cannot be merged)."""
    native = _native_ok(x)
    gpu = None if native else _gpu_for(x)
    if not native and gpu is None:
        return None
    out = torch.empty_like(x)  # x's strides if dense, else contiguous: unit last stride either way
    if x.numel() == 0:
        return out
    xs, os_ = x, out
    if x.dim() > 4:
        try:
            xs, os_ = x.view(-1, *x.shape[-3:]), out.view(-1, *x.shape[-3:])
        except RuntimeError:  # leading dims that cannot be merged without a copy
            return None
    while xs.dim() < 4:
        xs, os_ = xs.unsqueeze(0), os_.unsqueeze(0)
    if native and x.dtype == torch.bfloat16 and cos.dtype == sin.dtype == torch.bfloat16:
        table_dtype = torch.bfloat16  # widened exactly in the loop: half the table traffic of float32
    else:
        table_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    c, s_, paired = _loop_tables(cos, sin, pairs, layout, inverse, table_dtype)
    if gpu is not None:
        gpu.rotate(xs, os_, c.contiguous(), s_.contiguous(), layout, cos.shape[-1], paired)
        return out
    _native.rotate(xs, os_, c, s_, layout, paired)
    return out


def _rotate_compiled(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor:
    """:func:`_rotate` while ``torch.compile`` traces (inside :class:`_Rotate`, whose backward is the
    inverse rotation, traced the same way).

    On the CPU, where the compiled loop of :mod:`posenc._native` applies (:func:`_native_ok`), and for
    ``adjacent`` without it: the eager kernel as the opaque operator ``posenc::rotate`` (given the
    tables' per-pair values where they are known): the loop measured faster than the compiler's own,
    and for ``adjacent`` without the loop the compiler's CPU code for stride-2 pairs slower than torch's complex multiply
    (``benchmarks/README.md``). Otherwise (other devices, ``half_split`` without the loop), and
    everything under ``torch.export``: the reference expression :func:`rotation_reference`, which the compiler
    fuses into one kernel (on CUDA it measured closer to a copy than the Triton kernel launched from
    Python on mid-sized tensors).
    """
    cpu = x.device.type == "cpu"
    if cpu and (_native_ok(x) or layout == "adjacent") and not torch.compiler.is_exporting():
        pair_cos, pair_sin = (None, None) if pairs is None else pairs
        fused: torch.Tensor = torch.ops.posenc.rotate(x, cos, sin, pair_cos, pair_sin, layout, inverse)
        return fused
    return rotation_reference(x, cos, sin, layout, inverse)


def _whole_rotor(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor | None:
    """The complex rotor (:func:`_pair_table`) when all of ``x`` is one complex multiply by it and no
    one-pass kernel applies (:func:`_fused_ok`; the CPU loop measured faster): ``adjacent`` rotation
    tables, every dim rotated, a contiguous float32/float64 ``x``; else ``None``."""
    if (
        not _fused_ok(x)
        and layout == "adjacent"
        and cos.shape[-1] == x.shape[-1]
        and x.dtype in (torch.float32, torch.float64)
        and x.is_contiguous()
    ):
        return _pair_table(pairs, layout, inverse, x.dtype)
    return None


def _backends(x: torch.Tensor) -> tuple[Callable[..., torch.Tensor | None], ...]:
    """The one place a rotation's backend is chosen: the candidates for ``x``, in order; each returns
    ``None`` where it cannot serve after all (leading dims that cannot be merged, a table that is not a
    rotation), and :func:`_rotate_blocks` always serves.

    ====================  ==========================================================================
    backend               where
    ====================  ==========================================================================
    _rotate_compiled      while ``torch.compile`` traces: the CPU loop as an opaque operator, or the
                          reference expression (:func:`rotation_reference`) for the compiler to fuse
    _rotate_fused         the CPU loop of :mod:`posenc._native` (float32/float64/bfloat16) or the
                          Triton kernel on CUDA: one pass, both layouts, partial rotary, strided ``x``
    _rotate_whole_complex ``adjacent`` rotation tables over all of a contiguous float32/float64 ``x``:
                          one complex multiply (:func:`_whole_rotor`)
    _rotate_blocks        the pair arithmetic, block by block in the cache on the CPU
    ====================  ==========================================================================
    """
    if torch.compiler.is_compiling():
        return (_rotate_compiled,)
    if _fused_ok(x):
        return (_rotate_fused, _rotate_blocks)
    return (_rotate_whole_complex, _rotate_blocks)


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor:
    """``R x`` (``Rᵀ x`` when ``inverse``) over the first ``r`` dims of ``x[..., s, d]``; dims ``r …`` are
    copied: the first of :func:`_backends` that serves."""
    for backend in _backends(x):
        out = backend(x, cos, sin, layout, inverse, pairs)
        if out is not None:
            return out
    raise AssertionError("_rotate_blocks serves every rotation")


def _rotate_whole_complex(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor | None:
    """One complex multiply over all of ``x`` by :func:`_whole_rotor`, with the least Python; ``None``
    where that rotor does not apply."""
    rotor = _whole_rotor(x, cos, sin, layout, inverse, pairs)
    if rotor is None:
        return None
    out = torch.empty_like(x)
    _rotate_complex_into(out, x, rotor)
    return out


def _rotate_blocks(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool, pairs: _Pairs | None
) -> torch.Tensor:
    """The pair arithmetic (one multiply, two multiply-adds; ``half_split`` halves are contiguous) or, for
    half precision ``adjacent``, an upcast complex multiply rounded back: on the CPU in blocks of rows
    and of positions of about :data:`_CHUNK_BYTES`, each worked on while it is in the cache; elsewhere
    over all of ``x`` at once (every block would be a kernel launch)."""
    r = cos.shape[-1]
    out = torch.empty_like(x)
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])
    xs, outs = x[..., :r], out[..., :r]
    if xs.dim() == 2:
        xs, outs = xs.unsqueeze(0), outs.unsqueeze(0)
    if _leading_mergeable(xs) and _leading_mergeable(outs):  # [b, h, s, r] → [b·h, s, r]: finer blocks
        xs, outs = xs.view(-1, *xs.shape[-2:]), outs.view(-1, *outs.shape[-2:])
    work = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    fast_ok = layout == "half_split" or (
        work in (torch.float32, torch.float64)
        and (work != x.dtype or (_complex_viewable(xs) and _complex_viewable(outs)))
    )  # upcast blocks are contiguous; else the pairs must be complex-viewable as they are
    table = _pair_table(pairs, layout, inverse, work) if fast_ok else None
    if layout == "adjacent" and table is not None and work == x.dtype:
        _rotate_complex_into(outs, xs, table)  # one pass (read x, write out): blocks would only add overhead
        return out
    row_bytes = r * max(x.element_size(), 4)
    chunk = _CHUNK_BYTES  # more threads or a GPU: one parallel region per pass, not one per block
    if torch.get_num_threads() > 1 or x.device.type != "cpu":
        chunk = max(_CHUNK_BYTES, xs.numel() * max(x.element_size(), 4))
    seq_step = max(1, min(xs.shape[-2], chunk // row_bytes))
    lead_step = max(1, chunk // (row_bytes * seq_step))
    x_blocks, out_blocks = _blocks(xs, lead_step, seq_step), _blocks(outs, lead_step, seq_step)
    n_seq = -(-xs.shape[-2] // seq_step)  # blocks are lead-major: block i is at positions block i % n_seq
    if table is None:
        tables = list(zip(cos.split(seq_step), sin.split(seq_step)))
        for i, (x_blk, out_blk) in enumerate(zip(x_blocks, out_blocks)):
            _rotate_into(out_blk, x_blk, *tables[i % n_seq], layout, inverse)
    elif layout == "half_split":
        _rotate_half_split_blocks(xs, outs, cos, table, inverse, lead_step, seq_step)
    else:
        _rotate_upcast_blocks(x_blocks, out_blocks, table.split(seq_step), work)
    return out


def _rotate_half_split_blocks(
    xs: torch.Tensor,
    outs: torch.Tensor,
    cos: torch.Tensor,
    sin_half: torch.Tensor,
    inverse: bool,
    lead_step: int,
    seq_step: int,
) -> None:
    """``outs = R xs`` for ``half_split`` rotation tables, block by block: ``out = x·cos``, then
    ``∓ x_b·s`` and ``± x_a·s`` added to the halves (three passes over a block while it is in the cache;
    ``sin_half`` is ``[s, r/2]``). Every view is made before the loop, which then only launches kernels."""
    half = xs.shape[-1] // 2
    x_all, out_all = _blocks(xs, lead_step, seq_step), _blocks(outs, lead_step, seq_step)
    x_a, x_b = _blocks(xs[..., :half], lead_step, seq_step), _blocks(xs[..., half:], lead_step, seq_step)
    o_a, o_b = _blocks(outs[..., :half], lead_step, seq_step), _blocks(outs[..., half:], lead_step, seq_step)
    cos_blocks, sin_blocks = cos.split(seq_step), sin_half.split(seq_step)
    n_seq, sign = len(cos_blocks), 1.0 if inverse else -1.0
    for i in range(len(x_all)):
        c, s = cos_blocks[i % n_seq], sin_blocks[i % n_seq]
        torch.mul(x_all[i], c, out=out_all[i])
        o_a[i].addcmul_(x_b[i], s, value=sign)
        o_b[i].addcmul_(x_a[i], s, value=-sign)


def _rotate_upcast_blocks(
    x_blocks: list[torch.Tensor],
    out_blocks: list[torch.Tensor],
    rotors: tuple[torch.Tensor, ...],
    work: torch.dtype,
) -> None:
    """``out = R x`` for half-precision ``adjacent`` blocks: each copied into a ``work`` (float32) scratch,
    multiplied there as complex numbers by its ``rotors`` block, and rounded back once."""
    scratch: dict[torch.Size, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
    n_seq = len(rotors)
    for i, (x_blk, out_blk) in enumerate(zip(x_blocks, out_blocks)):
        views = scratch.get(x_blk.shape)
        if views is None:
            x_w = torch.empty(x_blk.shape, dtype=work, device=x_blk.device)
            o_w = torch.empty_like(x_w)
            views = scratch[x_blk.shape] = (
                x_w,
                o_w,
                torch.view_as_complex(x_w.unflatten(-1, (-1, 2))),
                torch.view_as_complex(o_w.unflatten(-1, (-1, 2))),
            )
        x_w, o_w, x_c, o_c = views
        x_w.copy_(x_blk)
        torch.mul(x_c, rotors[i % n_seq], out=o_c)
        out_blk.copy_(o_w)


_LIBRARY = torch.library.Library("posenc", "DEF")
_LIBRARY.define(
    "rotate(Tensor x, Tensor cos, Tensor sin, Tensor? pair_cos, Tensor? pair_sin, str layout, bool inverse) -> Tensor"
)


def _rotate_op(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pair_cos: torch.Tensor | None,
    pair_sin: torch.Tensor | None,
    layout: str,
    inverse: bool,
) -> torch.Tensor:
    """``posenc::rotate``, :func:`_rotate` as one opaque operator for ``torch.compile``: the tables' per-pair
    values given as two tensors, or ``None`` when they are not known (tables a caller passed to
    :func:`apply_rotary`), then found here (:func:`_given_pairs`; a host read, outside the traced graph)."""
    pairs = _known(pair_cos, pair_sin)
    return _rotate(x, cos, sin, layout, inverse, pairs or _given_pairs(cos, sin, layout))


# A plain kernel registration, not ``torch.library.custom_op``: that wrapper's per-call machinery
# measured an order of magnitude more costly per call (benchmarks/README.md).
_LIBRARY.impl("rotate", _rotate_op, "CompositeExplicitAutograd")


@torch.library.register_fake("posenc::rotate")
def _(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    pair_cos: torch.Tensor | None,
    pair_sin: torch.Tensor | None,
    layout: str,
    inverse: bool,
) -> torch.Tensor:
    return torch.empty_like(x)


_LIBRARY.define(
    "rotate_qk(Tensor q, Tensor k, Tensor? q_pos, Tensor? k_pos, Tensor cos, Tensor sin, Tensor theta, "
    "int q_offset, int k_offset, str layout, bool inverse) -> (Tensor, Tensor)"
)


def _rotate_qk(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor | None,
    k_pos: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    theta: torch.Tensor,
    q_offset: int,
    k_offset: int,
    layout: str,
    inverse: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R q, R k)`` (``Rᵀ`` when ``inverse``) by one launch of :func:`posenc._gpu_kernels.rotate_qk`:
    ``q [b, h, s_q, d]``, ``k [b, h_k, s_k, d]``, positions ``[b or 1, s]`` (both given or both ``None``, then
    ``offset + 0 …``), ``cos``/``sin`` the cached ``[n, r/2]`` pair values, ``theta`` float64 ``[r/2 + 1]``
    (the frequencies and the attention factor, for positions beyond the cache)."""
    gpu = _gpu.kernels(q.device.type, q.dtype)
    assert gpu is not None, "posenc::rotate_qk runs on CUDA tensors with Triton"
    q = q if q.stride(-1) == 1 else q.contiguous()
    k = k if k.stride(-1) == 1 else k.contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    if q.numel() or k.numel():
        positions = None if q_pos is None or k_pos is None else (q_pos, k_pos)
        gpu.rotate_qk(
            q,
            k,
            q_out,
            k_out,
            positions,
            (q_offset, k_offset),
            (cos, sin),
            theta,
            layout,
            2 * cos.shape[-1],
            inverse,
        )
    return q_out, k_out


_LIBRARY.impl("rotate_qk", _rotate_qk, "CUDA")


@torch.library.register_fake("posenc::rotate_qk")
def _(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor | None,
    k_pos: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    theta: torch.Tensor,
    q_offset: int,
    k_offset: int,
    layout: str,
    inverse: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), torch.empty_like(k)


def _rotate_qk_setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    q, k, q_pos, k_pos, cos, sin, theta, q_offset, k_offset, layout, inverse = inputs
    ctx.save_for_backward(q_pos, k_pos, cos, sin, theta)
    ctx.args = (q_offset, k_offset, layout, not inverse)
    ctx.like = tuple((t.shape, t.dtype, t.device) for t in (q, k))


def _rotate_qk_backward(
    ctx: Any, grad_q: torch.Tensor | None, grad_k: torch.Tensor | None
) -> tuple[Any, ...]:
    """The adjoint of a rotation is the rotation by the opposite angle: one launch for both gradients."""
    q_pos, k_pos, cos, sin, theta = ctx.saved_tensors
    (q_shape, dtype, device), (k_shape, _, _) = ctx.like
    grad_q = torch.zeros(q_shape, dtype=dtype, device=device) if grad_q is None else grad_q
    grad_k = torch.zeros(k_shape, dtype=dtype, device=device) if grad_k is None else grad_k
    dq, dk = torch.ops.posenc.rotate_qk(grad_q, grad_k, q_pos, k_pos, cos, sin, theta, *ctx.args)
    return dq, dk, None, None, None, None, None, None, None, None, None


torch.library.register_autograd("posenc::rotate_qk", _rotate_qk_backward, setup_context=_rotate_qk_setup)


class _Rotate(torch.autograd.Function):
    """Autograd for :func:`apply_rotary`: the adjoint of a rotation is the rotation by the opposite angle."""

    @staticmethod
    def forward(
        ctx: Any,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        layout: str,
        pair_cos: torch.Tensor | None,
        pair_sin: torch.Tensor | None,
    ) -> torch.Tensor:
        ctx.save_for_backward(cos, sin, pair_cos, pair_sin)
        ctx.layout = layout
        return _rotate(x, cos, sin, layout, False, _known(pair_cos, pair_sin))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None, None]:
        cos, sin, pair_cos, pair_sin = ctx.saved_tensors
        return (
            _rotate(grad, cos, sin, ctx.layout, True, _known(pair_cos, pair_sin)),
            None,
            None,
            None,
            None,
            None,
        )


def _known(pair_cos: torch.Tensor | None, pair_sin: torch.Tensor | None) -> _Pairs | None:
    return None if pair_cos is None or pair_sin is None else (pair_cos, pair_sin)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str, inplace: bool = False
) -> torch.Tensor:
    """Rotate the first ``r`` dims of ``x`` pairwise (Su et al. 2021, RoFormer, eq. 34 for ``adjacent``).

    Args:
        x: ``[..., s, d]`` queries or keys, e.g. ``[b, h, s, d_h]``; ``d ≥ r``.
        cos: ``[s, r]`` ``cos(t_s·θ_i)`` placed in ``layout`` (both columns of pair ``i``), ``r`` even.
        sin: ``[s, r]`` the matching sines.
        layout: ``"adjacent"`` or ``"half_split"`` (module docstring).
        inplace: write the result into ``x`` and return ``x`` itself (refused as in
            :meth:`RotaryEmbedding.forward`: ``x`` requiring grad while grad is enabled, or with an element
            reachable by two indices).

    Returns ``[..., s, d]``, the same dtype and strides as ``x``. ``cos``/``sin`` are constants
    for autograd (gradients flow to ``x`` only). Whether both columns of every pair of the tables are
    equal (then the fast paths read one value per pair) is found by reading them on the host, once per
    table while it stays unchanged; :class:`RotaryEmbedding` knows it of its own tables and reads nothing.
    """
    _check_tables(x, cos, sin, layout)
    if inplace:
        _check_inplace(x)
        _write_back((x,), (_apply_rotary(x, cos, sin, layout, rotation=False),))
        return x
    return _apply_rotary(x, cos, sin, layout, rotation=False)


def _check_inplace(*tensors: torch.Tensor) -> None:
    """Refuse ``inplace=True`` where writing the rotation into the inputs would be wrong: an input autograd
    needs (it requires grad while grad is enabled), one whose elements are not all distinct in memory, or
    two inputs that are the same memory (the second write would overwrite the first)."""
    names = ("q", "k") if len(tensors) == 2 else ("x",)
    for name, t in zip(names, tensors):
        if t.requires_grad and torch.is_grad_enabled():
            raise ValueError(
                f"inplace=True cannot rotate {name}: it requires grad, and autograd needs its values; use "
                "inplace=False, or call under torch.no_grad()"
            )
        if not _distinct_elements(t):
            raise ValueError(
                f"inplace=True cannot rotate {name} of shape {list(t.shape)} and strides {list(t.stride())}: "
                "some of its elements share memory (an expanded tensor); use inplace=False"
            )
    if len(tensors) == 2 and tensors[0].numel() and tensors[0].data_ptr() == tensors[1].data_ptr():
        raise ValueError("inplace=True cannot rotate q and k that are the same memory; use inplace=False")


def _distinct_elements(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` has its own memory: with its dims of size > 1 ordered by stride, each
    stride steps over all the elements the dims before it span."""
    span = 0
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if stride <= span:
            return False
        span += stride * (size - 1)
    return True


def _write_back(inputs: tuple[torch.Tensor, ...], outputs: tuple[torch.Tensor, ...]) -> None:
    """Overwrite each input by its output (``inplace=True``; the caller made every output before this)."""
    for t, out in zip(inputs, outputs, strict=True):
        t.copy_(out)


def _check_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> None:
    """The checks of :func:`apply_rotary` (metadata only)."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {', '.join(map(repr, LAYOUTS))}; got {layout!r}")
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(f"cos and sin must both be [s, r], got {list(cos.shape)} and {list(sin.shape)}")
    s, r = cos.shape
    if x.dim() < 2 or x.shape[-2] != s or x.shape[-1] < r or r % 2:
        raise ValueError(
            f"x must be [..., s={s}, d] with d >= r={r} and r even (cos/sin are [s, r]), got {list(x.shape)}"
        )
    if cos.requires_grad or sin.requires_grad:
        raise ValueError(
            "cos and sin must not require grad: apply_rotary differentiates with respect to x only"
        )
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(f"cos and sin must be on x's device {x.device}, got {cos.device} and {sin.device}")


def _apply_rotary(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    rotation: bool,
    pairs: _Pairs | None = None,
) -> torch.Tensor:
    """:func:`apply_rotary` after its checks; ``rotation``: both columns of every pair of the tables are
    known to be equal; ``pairs``: their per-pair values as the caller keeps them. Else they are found
    once here for every path: views of rotation tables (:func:`_pair_values`), or for other tables by
    :func:`_given_pairs` (while ``torch.compile`` traces, inside the operator ``posenc::rotate`` instead:
    it reads the tables)."""
    compiling = torch.compiler.is_compiling()
    if pairs is None and rotation:
        pairs = _pair_values(cos, sin, layout, True)
    elif pairs is None and not compiling:
        pairs = _given_pairs(cos, sin, layout)
    if not compiling:
        if not (x.requires_grad and torch.is_grad_enabled()):  # nothing to differentiate: no autograd node
            return _rotate(x, cos, sin, layout, False, pairs)
        rotor = _whole_rotor(x, cos, sin, layout, False, pairs)
        if (
            rotor is not None
        ):  # autograd's adjoint of the complex multiply (by conj(rotor)) runs without Python
            x_pairs = torch.view_as_complex(x.view(*x.shape[:-1], -1, 2))
            return torch.view_as_real(x_pairs * rotor).view(x.shape)
    pair_cos, pair_sin = (None, None) if pairs is None else pairs
    rotated: torch.Tensor = _Rotate.apply(x, cos, sin, layout, pair_cos, pair_sin)
    return rotated


def _layout_table(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``[s, r/2]`` per-pair values → ``[s, r]`` with each value in both columns of its pair."""
    return torch.cat([t, t], dim=-1) if layout == "half_split" else t.repeat_interleave(2, dim=-1)


_SINUSOIDAL_LAYOUT = {"adjacent": "interleaved", "half_split": "split"}
"""Rotary pair layouts are the sinusoidal column layouts with ``(a_i, b_i)`` in place of ``(sin_i, cos_i)``."""


def permute_rotary_weights(
    weight: torch.Tensor, *, n_heads: int, src: str, dst: str, rotary_dim: int | None = None
) -> torch.Tensor:
    """Reorder the output rows of a query or key projection from pair layout ``src`` to ``dst``.

    ``weight`` is ``[n_heads·d_h, d_in]`` (an ``nn.Linear`` weight) or ``[n_heads·d_h]`` (its bias).
    Within each head, row ``2i`` / ``2i+1`` of an ``adjacent`` checkpoint (Meta LLaMA, GPT-J, RoFormer)
    holds the coordinates ``a_i`` / ``b_i`` that ``half_split`` (Hugging Face, GPT-NeoX) keeps in rows
    ``i`` / ``i + r/2``; rows ``r … d_h − 1`` (partial rotary) stay. Rotating the permuted projection
    in ``dst`` gives the same attention scores as rotating the original in ``src`` (the score sums
    over pairs, which are only renamed). ``adjacent → half_split`` is the permutation of Hugging
    Face's LLaMA conversion script (``permute``: ``view(h, d_h/2, 2, d_in).transpose(1, 2)``).
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        got = list(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"weight must be a [n_heads·head_dim, d_in] or [n_heads·head_dim] tensor, got {got}")
    n_heads = validate.positive_int("n_heads", n_heads)
    validate.choice("src", src, LAYOUTS)
    validate.choice("dst", dst, LAYOUTS)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight has {rows} rows, not a multiple of n_heads={n_heads}")
    head_dim = rows // n_heads
    r = spectrum.rotary_dim(head_dim, rotary_dim)
    in_head = np.arange(head_dim)
    in_head[:r] = spectrum.layout_permutation(r, _SINUSOIDAL_LAYOUT[src], _SINUSOIDAL_LAYOUT[dst])
    order = torch.from_numpy((np.arange(n_heads)[:, None] * head_dim + in_head[None]).reshape(-1))
    return weight.index_select(0, order.to(weight.device))


def _kernels_loaded(dtype: torch.dtype) -> bool:
    """Whether :mod:`posenc._gpu` has Triton kernels for CUDA tensors of ``dtype``: asked eagerly at every
    call, and while ``torch.compile`` traces, once, as a constant (its import machinery is not traceable)."""
    if torch.compiler.is_compiling():
        return bool(_kernels_loaded_constant(str(dtype)))
    return _gpu.kernels("cuda", dtype) is not None


@torch.compiler.assume_constant_result
def _kernels_loaded_constant(dtype: str) -> bool:
    return _gpu.kernels("cuda", dtype) is not None


class RotaryEmbedding(RotaryContract):
    """Rotary position embedding for queries and keys ``[b, h, s, d_h]`` (Su et al. 2021, eq. 34; module docstring).

    Args:
        head_dim: ``d_h``, the per-head dimension of the queries and keys.
        base: ``ρ`` of ``θ_i = ρ^(−2i/r)`` (10000 in RoFormer, GPT-NeoX, LLaMA 1–2).
        rotary_dim: dimensions rotated: an even int, a float fraction of ``head_dim``
            (``int(head_dim·fraction)``, must come out even), or ``None`` for all.
        layout: ``"adjacent"`` (RoFormer/GPT-J) or ``"half_split"`` (GPT-NeoX/Hugging Face).
        scaling: ``None`` or a context-extension type of :data:`posenc.nn.rope_types.ROPE_TYPES`
            (``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``, ``"longrope"``, ``"llama3"``).
        scaling_factor: its ``factor ≥ 1``; only with ``scaling``.
        scaling_options: its other parameters by their Hugging Face names
            (e.g. ``{"original_max_position_embeddings": 4096, "beta_fast": 32}``); only with ``scaling``.
        xpos_scale_base: ``γ`` of xPos (Sun et al. 2022, "A Length-Extrapolatable Transformer"):
            queries at position ``t`` are scaled per pair by ``ζ_i^((t−c)/γ)``, keys by ``ζ_i^(−(t−c)/γ)``,
            ``ζ_i = (2i + 0.4r)/(1.4r)``, so the score of ``(m, n)`` decays as ``ζ_i^((m−n)/γ)``.
            ``c`` is the key position at index ``⌊s_k/2⌋`` (per row), which keeps the scales near 1
            and equals ``rotary-embedding-torch``'s centre; it cancels in every score.
        max_len: positions whose cos/sin are tabulated up front; longer inputs grow the table.

    Positions (``q_positions``/``k_positions`` of :meth:`forward`) are ``[s]`` or, per sequence of a
    left-padded or packed batch, ``[b, s]``; any real, finite numbers below ``2^53`` (beyond, float64
    cannot tell neighbours apart) in an integer dtype, float32 or float64. float16/bfloat16 positions
    are refused: they cannot hold integers above 2048/256 exactly, so they were rounded already.

    The tables are non-persistent buffers (``state_dict()`` is empty), rebuilt from float64
    angles (:func:`posenc.nn.functional.sincos`) for each device and dtype they are used in. Beside
    them the module keeps their per-pair values as its fast paths read them (``adjacent``: contiguous
    copies of every other column), made again whenever the tables are rebuilt, moved, cast or changed
    in place.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        rotary_dim: float | None = None,
        layout: str = "half_split",
        scaling: str | None = None,
        scaling_factor: float | None = None,
        scaling_options: Mapping[str, Any] | None = None,
        xpos_scale_base: float | None = None,
        max_len: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.base = validate.positive_float("base", base)
        self.rotary_dim = spectrum.rotary_dim(self.head_dim, rotary_dim)
        self.layout = validate.choice("layout", layout, LAYOUTS)
        if scaling is None and (scaling_factor is not None or scaling_options):
            given = "scaling_factor" if scaling_factor is not None else "scaling_options"
            raise ValueError(
                f"{given} was given without scaling, so it would do nothing; pass scaling= one of "
                f"{', '.join(map(repr, rope_types.ROPE_TYPES))}"
            )
        if scaling is not None:
            validate.choice("scaling", scaling, tuple(rope_types.ROPE_TYPES))
            options = dict(scaling_options or {})
            if "factor" in options:
                raise ValueError("give the factor as scaling_factor=, not inside scaling_options")
            if scaling_factor is not None:
                options["factor"] = validate.positive_float("scaling_factor", scaling_factor)
                if options["factor"] < 1.0:
                    raise ValueError(
                        f"scaling_factor must be >= 1 (it extends the context), got {scaling_factor!r}"
                    )
            self.scaling_parameters = rope_types.resolve_parameters(
                scaling, options, rotary_dim=self.rotary_dim
            )
        else:
            self.scaling_parameters = {}
        self.scaling = scaling
        self.scaling_factor = self.scaling_parameters.get("factor")
        self.xpos_scale_base = (
            None if xpos_scale_base is None else validate.positive_float("xpos_scale_base", xpos_scale_base)
        )
        self._length_rule = "static" if scaling is None else rope_types.ROPE_TYPES[scaling].length_rule
        self._original_length = float(
            self.scaling_parameters.get("original_max_position_embeddings")
            or self.scaling_parameters.get("max_position_embeddings")
            or 0
        )
        self._longest = self._original_length  # dynamic NTK: the longest context seen (Hugging Face's rule)
        self._frequencies, self._attention_factor = self._compute_frequencies(self._original_length)
        self._table_dtype: torch.dtype | None = None
        self._pair_copies: tuple[torch.Tensor, torch.Tensor, int, int, _Pairs] | None = None
        self._kernel_theta: torch.Tensor | None = None  # rotate_qk's float64 [θ_i…, attention factor]
        self.register_buffer("_cos", torch.empty(0), persistent=False)
        self.register_buffer("_sin", torch.empty(0), persistent=False)
        self._build(validate.positive_int("max_len", max_len), torch.get_default_dtype(), torch.device("cpu"))

    @classmethod
    def from_hf(
        cls,
        config: Any,
        *,
        layer_type: str | None = None,
        layout: str = "half_split",
        max_len: int | None = None,
    ) -> RotaryEmbedding:
        """The rotary embedding a Hugging Face ``transformers`` config describes.

        ``config`` is a ``PretrainedConfig`` or a plain dict with the same keys: ``rope_parameters``
        (or the legacy ``rope_scaling``) holding ``rope_type`` and its parameters, ``rope_theta``,
        ``partial_rotary_factor``, ``head_dim`` (else ``hidden_size // num_attention_heads``) and
        ``max_position_embeddings``. Rope types ``default`` and every name of
        :data:`posenc.nn.rope_types.ROPE_TYPES` that transformers defines (``linear``, ``dynamic``,
        ``yarn``, ``longrope``, ``llama3``, ``proportional``) are read exactly as transformers reads
        them; the result rotates like transformers' own rotary embedding, but forms its angles in float64.
        ``layout`` is ``"half_split"`` for Hugging Face weights (``rotate_half``); ``layer_type`` picks
        one rope of a config with one per layer type (Gemma 3's ``"sliding_attention"`` …). Values it
        would have to guess at are refused: a ``head_dim`` that is not a positive integer, an
        ``original_max_position_embeddings`` that is not positive, an unknown rope type, and M-RoPE
        configs (``mrope_section``: read them with :meth:`posenc.nn.MultiAxisRotary.from_hf`). Where some
        layers use no rope (Llama 4's ``no_rope_layers``), this is the rope of the others:
        :func:`posenc.nn.rope_types.hf_rope_layers` says which layers rotate.
        """
        settings = rope_types.hf_settings(config, layer_type=layer_type)
        if max_len is None:
            max_len = min(int(settings.pop("max_position_embeddings", None) or 2048), 8192)
        else:
            settings.pop("max_position_embeddings", None)
        return cls(**settings, layout=layout, max_len=max_len)

    def _compute_frequencies(self, length: float) -> tuple[torch.Tensor, float]:
        """Float64 ``θ`` ``[r/2]`` and the attention factor for a context of ``length`` positions."""
        with torch.inference_mode(False):
            if self.scaling is None:
                return torch.from_numpy(spectrum.geometric(self.rotary_dim, self.base)), 1.0
            compute = rope_types.ROPE_TYPES[self.scaling].compute
            theta, factor = compute(self.rotary_dim, self.base, self.scaling_parameters, length)
            return torch.from_numpy(np.ascontiguousarray(theta, dtype=np.float64)), float(factor)

    def _follow_length(self, length: float) -> None:
        """Switch frequencies for a call reaching ``length`` positions (``dynamic``/``longrope`` only).

        ``dynamic`` uses the longest length seen so far and returns to the original frequencies
        when a call fits in ``max_position_embeddings`` again; ``longrope`` uses the call's length.
        """
        if self._length_rule == "static":
            return
        if self._length_rule == "longest":
            if length > self._longest:
                self._longest = length
            elif length < self._original_length < self._longest:
                self._longest = self._original_length
            length = self._longest
        theta, factor = self._compute_frequencies(length)
        if factor != self._attention_factor or not torch.equal(theta, self._frequencies):
            self._frequencies, self._attention_factor = theta, factor  # Phi-3.5-MoE's mscales switch too
            self._table_dtype = None  # the cached tables belong to the old frequencies

    @property
    def frequencies(self) -> torch.Tensor:
        """``[r/2]`` float64 rotation frequencies ``θ_i`` after scaling (angles are ``t·θ_i``)."""
        return self._frequencies.clone()

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The contract's rotated probe rows, with the rotation frequencies ``θ_i``."""
        view = super().analysis_view(name=name, dim=dim, seed=seed)
        return dataclasses.replace(view, frequencies=self._frequencies.to(torch.float64).numpy())

    @property
    def attention_factor(self) -> float:
        """Factor on the cos/sin tables (1 except for ``yarn``/``longrope``; Peng et al. 2023, YaRN)."""
        return self._attention_factor

    def tables(self, positions: torch.Tensor, *, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)``, each ``[s, r]`` in ``self.layout``, for arbitrary real ``positions [s]``.

        Both include :attr:`attention_factor`, applied in float64 before the cast to ``dtype``.
        """
        return self._scaled_tables(positions, dtype=dtype, amplitude=None)[:2]

    def _scaled_tables(
        self,
        positions: torch.Tensor | int,
        *,
        dtype: torch.dtype,
        amplitude: torch.Tensor | None,
        offset: int = 0,
        device: torch.device | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, _Pairs]:
        """:meth:`tables` times a float64 ``amplitude [s, r/2]`` (xPos), all in float64 before the cast, and
        their per-pair values ``[s, r/2]`` (contiguous: what the fast paths read).

        ``positions`` an int ``n``: the range ``offset … offset + n − 1`` on ``device`` (the fast exact
        path of :func:`posenc.nn.functional.waves`)."""
        if isinstance(positions, torch.Tensor):
            device = positions.device
        frequencies = self._frequencies.to(device)
        if amplitude is None and self._attention_factor == 1.0:
            c_sin, c_cos = sincos(positions, frequencies, dtype=dtype, offset=offset)
        else:
            c_sin, c_cos = sincos(positions, frequencies, dtype=torch.float64, offset=offset)
            scale = self._attention_factor if amplitude is None else amplitude * self._attention_factor
            c_sin, c_cos = (c_sin * scale).to(dtype), (c_cos * scale).to(dtype)
        return _layout_table(c_cos, self.layout), _layout_table(c_sin, self.layout), (c_cos, c_sin)

    def _build(self, length: int, dtype: torch.dtype, device: torch.device) -> None:
        # Outside inference mode: a cache grown under torch.inference_mode() must still serve training.
        with torch.inference_mode(False):
            self._cos, self._sin, _ = self._scaled_tables(length, dtype=dtype, amplitude=None, device=device)
        self._table_dtype = dtype

    def _pair_tables(self, cos: torch.Tensor, sin: torch.Tensor) -> _Pairs:
        """The per-pair values ``[n, r/2]`` of the cached tables ``cos``, ``sin`` (``_cos``, ``_sin``) as the
        fast paths read them: contiguous copies of one column of every pair, made once and kept while the
        tables are the same tensors, unchanged. A rebuild (new length, dtype or frequencies), ``.to()``
        (new tensors) or an in-place change of ``_cos``/``_sin`` (their version counters) makes them
        again. Inference tensors keep no version counter, and a traced graph keeps no module state:
        there views are handed on, and the rows a call reads are copied at every call (:func:`_loop_tables`)."""
        if torch.compiler.is_compiling() or cos.is_inference() or sin.is_inference():
            return _pairs(cos, self.layout)[0], _pairs(sin, self.layout)[0]
        kept = self._pair_copies
        if (
            kept is None
            or kept[0] is not cos
            or kept[1] is not sin
            or kept[2] != cos._version
            or kept[3] != sin._version
        ):
            copies = _pairs(cos, self.layout)[0].contiguous(), _pairs(sin, self.layout)[0].contiguous()
            kept = self._pair_copies = (cos, sin, cos._version, sin._version, copies)
        return kept[4]

    def _cached(
        self, start: int, length: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor, _Pairs]:
        """Rows ``start … start+length−1`` of the tables in ``dtype`` on ``device``, and of their per-pair
        values (:meth:`_pair_tables`).

        The cache is rebuilt for a new dtype or device (from float64 angles, never by casting) and
        doubles when a sequence runs past its end; a window far beyond it (``end > 2·cached``,
        e.g. one step of decoding at position 10^6) is computed directly instead of cached.
        """
        end = start + length
        cos = self._cos
        cached = cos.shape[0]
        if self._table_dtype != cos.dtype or cos.dtype != dtype or cos.device != device:
            self._build(cached, dtype, device)
        if end > 2 * cached:
            return self._scaled_tables(length, dtype=dtype, amplitude=None, offset=start, device=device)
        if end > cached:
            self._build(2 * cached, dtype, device)
        cos, sin = self._cos, self._sin
        pair_cos, pair_sin = self._pair_tables(cos, sin)
        return cos[start:end], sin[start:end], (pair_cos[start:end], pair_sin[start:end])

    def _check_inputs(self, q: object, k: object) -> None:
        for name, t in (("q", q), ("k", k)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor [..., s, head_dim], got {type(t).__name__}")
            if not t.is_floating_point():
                raise TypeError(
                    f"{name} must be a floating tensor (rotations of integers are not integers), got {t.dtype}"
                )
            if t.dim() < 2 or t.shape[-1] != self.head_dim:
                raise ValueError(f"{name} must be [..., s, head_dim={self.head_dim}], got {list(t.shape)}")

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
        cu_seqlens: torch.Tensor | None = None,
        inplace: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries ``[b, h, s_q, d_h]`` and keys ``[b, h, s_k, d_h]``.

        Positions default to ``offset + 0 … s_k − 1`` for keys and the last ``s_q`` of those for
        queries (cached decoding; :mod:`posenc.nn._positions`). Explicit positions are ``[s]``, or
        ``[b, s]`` with one row per sequence of the batch (then ``q``/``k`` must be 4-D). Returns
        ``(q_rot, k_rot)`` in the inputs' dtype; an empty batch or sequence gives empty results.

        ``cu_seqlens`` ``[n + 1]`` (int32/int64; flash-attn's variable-length layout): ``q`` and ``k``
        ``[…, total, d_h]`` hold ``n`` sequences packed one after another along the sequence dim, sequence
        ``i`` at ``cu_seqlens[i] … cu_seqlens[i+1] − 1``; each token is at ``offset +`` its index within
        its sequence. The cumulative lengths must start at 0, not decrease and end at ``total``; they are
        checked and the positions found on the device, with no host read (:func:`posenc.nn._positions.packed`).

        ``inplace``: write the rotated values into ``q`` and ``k`` and return those tensors. Refused where
        autograd would need them (they require grad while grad is enabled), where one element is
        reachable by two indices (an expanded tensor), and where ``q`` and ``k`` are the same memory. Both
        rotations are made into fresh outputs and then copied back (the compiled loop and the GPU kernel
        write outputs apart from their inputs), so ``inplace`` saves returning new tensors, not the work.
        """
        self._check_inputs(q, k)
        if inplace:
            _check_inplace(q, k)
        if cu_seqlens is not None:
            q_positions, k_positions, offset = self._packed_positions(
                q, k, q_positions, k_positions, cu_seqlens, offset
            )
        q_rot, k_rot = self._rotate_pair(q, k, q_positions, k_positions, offset)
        if not inplace:
            return q_rot, k_rot
        _write_back((q, k), (q_rot, k_rot))
        return q, k

    def _packed_positions(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: object,
        k_positions: object,
        cu_seqlens: torch.Tensor,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """``(positions, positions, 0)``: :meth:`forward`'s explicit positions of the packed sequences of ``cu_seqlens``."""
        if q_positions is not None or k_positions is not None:
            raise ValueError(
                "give cu_seqlens or q_positions/k_positions, not both: cu_seqlens sets the positions"
            )
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"with cu_seqlens, q and k must hold the same packed tokens, got s_q={q.shape[-2]} != s_k={k.shape[-2]}"
            )
        offset = _positions.check_offset(offset)
        _positions.check_end(offset + k.shape[-2])
        positions = _positions.packed(cu_seqlens, k.shape[-2]).to(q.device)
        positions = positions + offset if offset else positions
        return positions, positions, 0

    def _rotate_pair(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        q_positions: torch.Tensor | None,
        k_positions: torch.Tensor | None,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` out of place, after its checks."""
        s_q, s_k = q.shape[-2], k.shape[-2]
        if self._one_launch(q, k, q_positions, k_positions):
            return self._rotate_qk(q, k, q_positions=q_positions, k_positions=k_positions, offset=offset)
        if q_positions is None and k_positions is None:
            offset = _positions.check_offset(offset)
            start = _positions.query_start(s_q, s_k, offset)
            _positions.check_end(offset + s_k)
            self._follow_length(offset + s_k)
            if self.xpos_scale_base is None:
                k_tables = self._cached(offset, s_k, k.dtype, k.device)
                q_tables = k_tables if start == offset else self._cached(start, s_q, q.dtype, q.device)
                return self._rotate_tables(q, *q_tables), self._rotate_tables(k, *k_tables)
            qp = torch.arange(start, start + s_q, device=q.device)
            kp = torch.arange(offset, offset + s_k, device=q.device)
        else:
            qp, kp = _positions.resolve(
                s_q, s_k, q_positions=q_positions, k_positions=k_positions, offset=offset, device=q.device
            )
            if self._length_rule != "static" and kp.numel() and qp.numel():
                self._follow_length(float(torch.maximum(qp.max(), kp.max().to(qp.device))) + 1.0)
        qp, kp = (
            p[0] if p.dim() == 2 and p.shape[0] == 1 else p for p in (qp, kp)
        )  # one row serves the batch
        batch = _positions.batch_size(qp, kp)
        if batch is not None:
            qp, kp = qp.expand(batch, s_q), kp.expand(batch, s_k)
            for name, t in (("q", q), ("k", k)):
                if t.dim() != 4 or t.shape[0] != batch:
                    raise ValueError(
                        f"{name} must be [b={batch}, h, s, d_h] to match positions of shape [{batch}, s], "
                        f"got {list(t.shape)}"
                    )
        k_tables = self._tables_at(kp, kp, sign=-1.0, dtype=k.dtype)
        if qp is kp and self.xpos_scale_base is None and q.dtype == k.dtype:
            q_tables = k_tables
        else:
            q_tables = self._tables_at(qp, kp, sign=1.0, dtype=q.dtype)
        return self._rotate_tables(q, *q_tables), self._rotate_tables(k, *k_tables)

    def _one_launch(self, q: torch.Tensor, k: torch.Tensor, q_positions: object, k_positions: object) -> bool:
        """Whether :func:`rotate_qk` (the Triton kernel on CUDA, one launch for ``q`` and ``k``) rotates this
        call: CUDA tensors it takes, no xPos, fixed frequencies, integer or default positions."""
        return (
            q.device.type == "cuda"
            and _kernels_loaded(q.dtype)
            and k.device == q.device
            and k.dtype == q.dtype
            and q.dim() == k.dim() == 4
            and q.stride(-1) == k.stride(-1) == 1
            and self.xpos_scale_base is None
            and self._length_rule == "static"
            and all(
                p is None
                or (isinstance(p, torch.Tensor) and not p.is_floating_point() and p.dtype != torch.bool)
                for p in (q_positions, k_positions)
            )
            and not torch.compiler.is_exporting()
        )

    def _rotate_qk(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        q_positions: torch.Tensor | None,
        k_positions: torch.Tensor | None,
        offset: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` by the one-launch kernel: the cached tables gathered by position in the kernel."""
        s_q, s_k = q.shape[-2], k.shape[-2]
        work = torch.float64 if q.dtype == torch.float64 else torch.float32
        q_pos = k_pos = None
        if q_positions is None and k_positions is None:
            offset = _positions.check_offset(offset)
            start = _positions.query_start(s_q, s_k, offset)
            _positions.check_end(offset + s_k)
            self._cached(offset, s_k, work, q.device)  # grows the cache to cover the call where it doubles
            offsets = (start, offset)
        else:
            self._cached(0, 0, work, q.device)  # the tables in the work dtype on q's device
            qp, kp = _positions.resolve(
                s_q, s_k, q_positions=q_positions, k_positions=k_positions, offset=offset, device=q.device
            )
            batch = _positions.batch_size(qp, kp)
            if batch not in (None, 1) and (q.shape[0] != batch or k.shape[0] != batch):
                raise ValueError(
                    f"q and k must be [b={batch}, h, s, d_h] to match positions of batch {batch}, got "
                    f"{list(q.shape)} and {list(k.shape)}"
                )
            q_pos, k_pos = (p.to(q.device).view(-1, p.shape[-1]) for p in (qp, kp))
            if q_pos.dtype != k_pos.dtype:
                q_pos, k_pos = q_pos.long(), k_pos.long()
            offsets = (0, 0)
        if self._kernel_theta is None or self._kernel_theta.device != q.device:
            factor = torch.tensor([self._attention_factor], dtype=torch.float64)
            self._kernel_theta = torch.cat([self._frequencies, factor]).to(q.device)
        cos, sin = _pairs(self._cos, self.layout)[0], _pairs(self._sin, self.layout)[0]
        out: tuple[torch.Tensor, torch.Tensor] = torch.ops.posenc.rotate_qk(
            q, k, q_pos, k_pos, cos, sin, self._kernel_theta, offsets[0], offsets[1], self.layout, False
        )
        return out

    def _tables_at(
        self, positions: torch.Tensor, keys: torch.Tensor, *, sign: float, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor, _Pairs]:
        """``(cos, sin)`` ``[s, r]`` or ``[b, s, r]`` for ``positions`` ``[s]`` or ``[b, s]``, and their
        per-pair values (``[…, r/2]``).

        With xPos the tables carry ``ζ^(sign·(t − c)/γ)``, ``c`` the centre taken from ``keys``.
        """
        amplitude = None
        if self.xpos_scale_base is not None and keys.shape[-1]:
            centre = keys[..., keys.shape[-1] // 2, None].to(positions.device, torch.float64)
            power = (positions.to(torch.float64) - centre) / self.xpos_scale_base
            r = self.rotary_dim
            zeta = (torch.arange(0, r, 2, dtype=torch.float64, device=positions.device) + 0.4 * r) / (1.4 * r)
            self._check_xpos_range(power, dtype)
            amplitude = zeta ** (sign * power.reshape(-1, 1))
        cos, sin, (pair_cos, pair_sin) = self._scaled_tables(
            positions.reshape(-1), dtype=dtype, amplitude=amplitude
        )
        shape, half = positions.shape, self.rotary_dim // 2
        return (
            cos.view(*shape, self.rotary_dim),
            sin.view(*shape, self.rotary_dim),
            (pair_cos.view(*shape, half), pair_sin.view(*shape, half)),
        )

    def _check_xpos_range(self, power: torch.Tensor, dtype: torch.dtype) -> None:
        """Refuse xPos scales ``ζ_i^(±(t − c)/γ)`` that ``dtype`` cannot hold (asserted on the device).

        The smallest ``ζ_0 = 0.4/1.4`` sets the range: ``|t − c|/γ · |ln ζ_0|`` must stay within half
        of ``ln`` of ``dtype``'s largest value, so that both a scale and its inverse (queries and keys)
        and the products of scaled queries and keys stay finite."""
        limit = math.log(torch.finfo(dtype).max) / 2 / -math.log(0.4 / 1.4)
        span = limit * self.xpos_scale_base  # type: ignore[operator]
        message = (
            f"xPos scales overflow {dtype} beyond |t − c| = {span:.0f} positions from the centre key c "
            f"(the key at index s_k // 2; xpos_scale_base={self.xpos_scale_base}): keep every query and key "
            f"within {span:.0f} positions of it, raise xpos_scale_base, or use float64"
        )
        _positions.assert_on_device(
            (power.abs() <= limit).all(),
            message,
            lambda: f"|t − c| up to {float(power.abs().max()) * self.xpos_scale_base:.0f}",  # type: ignore[operator]
        )

    def cos_sin(
        self,
        length: int,
        *,
        positions: torch.Tensor | None = None,
        offset: int = 0,
        dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[length, r]`` (``[b, length, r]`` for ``[b, length]`` positions) for :meth:`rotate`.

        Positions default to ``offset … offset+length−1`` (cached). :class:`posenc.nn.TransformerEncoder`
        computes the tables once per forward and every layer rotates with them. Not for xPos, whose
        queries and keys need inverse scales: use :meth:`forward`.
        """
        if self.xpos_scale_base is not None:
            raise ValueError(
                "xPos scales queries and keys by inverse factors, so one (cos, sin) pair cannot serve both; "
                "call the module on (q, k) instead"
            )
        device = torch.device("cpu") if device is None else torch.device(device)
        if positions is None:
            offset = _positions.check_offset(offset)
            _positions.check_end(offset + length)
            self._follow_length(offset + length)
            return self._cached(offset, length, dtype, device)[:2]
        positions = _positions.check_positions("positions", positions, length, batched=True).to(device)
        if self._length_rule != "static" and positions.numel():
            self._follow_length(float(positions.max()) + 1.0)
        return self._tables_at(positions, positions, sign=1.0, dtype=dtype)[:2]

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The tables of one forward; with xPos, queries' and keys' (inverse scales) separately. Without
        xPos ``state`` keeps the positions (``None``: default) for :meth:`transform_qk`'s one launch."""
        if self.xpos_scale_base is None:
            tables = self.cos_sin(length, positions=positions, dtype=dtype, device=device)
            return PositionContext(cos_sin=tables, state=_Positions(positions))
        if positions is None:
            _positions.check_end(length)
            positions = torch.arange(length, device=device)
        positions = _positions.check_positions("positions", positions, length, batched=True).to(device)
        if self._length_rule != "static" and positions.numel():
            self._follow_length(float(positions.max()) + 1.0)
        return PositionContext(
            cos_sin=self._tables_at(positions, positions, sign=1.0, dtype=dtype)[:2],
            key_cos_sin=self._tables_at(positions, positions, sign=-1.0, dtype=dtype)[:2],
        )

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` and ``k`` rotated at the context's positions: under ``torch.compile`` by one launch of
        :func:`rotate_qk` where it serves (CUDA, :meth:`forward`'s rule), otherwise by the context's tables
        (in eager mode the one launch costs more host time per call than the two table rotations)."""
        if isinstance(context.state, _Positions) and torch.compiler.is_compiling():
            positions = context.state.positions
            if self._one_launch(q, k, positions, positions):
                return self._rotate_qk(q, k, q_positions=positions, k_positions=positions, offset=0)
        return super().transform_qk(q, k, context)

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [..., s, head_dim]`` rotated by tables from :meth:`cos_sin` (:func:`apply_rotary` in this layout).

        Tables ``[b, s, r]`` (or ``[b, 1, s, r]``) rotate each sequence of ``x [b, h, s, d]`` by its own
        positions: ``x`` is seen as ``[h, b·s, d]`` (a view when ``b`` and ``s`` are adjacent in memory,
        as after a qkv projection) and the tables as ``[b·s, r]``. Empty inputs give empty results.
        """
        return self._rotate_tables(x, cos, sin, None)

    def _rotate_tables(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, pairs: _Pairs | None
    ) -> torch.Tensor:
        """:meth:`rotate`, with the tables' per-pair values where the caller has them (else views of the
        tables: this module's tables hold equal columns in every pair by construction)."""
        if x.numel() == 0:
            return x.clone()
        if cos.dim() == 2:
            _check_tables(x, cos, sin, self.layout)
            return _apply_rotary(x, cos, sin, self.layout, rotation=True, pairs=pairs)
        cos, sin = cos.reshape(-1, *cos.shape[-2:]), sin.reshape(-1, *sin.shape[-2:])
        if x.dim() != 4 or cos.shape[0] != x.shape[0]:
            raise ValueError(
                f"x must be [b={cos.shape[0]}, h, s, d_h] to match tables of shape {list(cos.shape)}, got {list(x.shape)}"
            )
        b, h, s, d = x.shape
        flat = x.transpose(0, 1).reshape(h, b * s, d)
        flat_pairs = None if pairs is None else (pairs[0].reshape(b * s, -1), pairs[1].reshape(b * s, -1))
        out = self._rotate_tables(flat, cos.reshape(b * s, -1), sin.reshape(b * s, -1), flat_pairs)
        return out.view(h, b, s, d).transpose(0, 1)

    def extra_repr(self) -> str:
        scaling = (
            ""
            if self.scaling is None
            else f", scaling={self.scaling!r}, scaling_factor={self.scaling_factor}"
        )
        xpos = "" if self.xpos_scale_base is None else f", xpos_scale_base={self.xpos_scale_base}"
        return (
            f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, layout={self.layout!r}"
            f"{scaling}{xpos}"
        )
