"""The rotation of rotary embeddings (Su et al. 2021, RoFormer, eq. 34): its reference and its backends.

Pair ``i`` of ``x[..., s, d]`` at row ``t`` is rotated by the tables' ``(c, s)`` of that row::

    out_a = x_a·c − x_b·s        out_b = x_b·c + x_a·s        (Rᵀ: the sines negated)

over the first ``r`` dims; dims ``r … d − 1`` pass through. The tables come in one of two forms: ``[s, r]``
in the pair ``layout`` (``c`` in both columns of a pair; tables a caller gives may hold any values, the
rotation then being ``[[c_a, −s_a], [s_b, c_b]]`` per pair), or, when both columns of every pair are known to
be equal, the per-pair values ``[s, r/2]`` alone (half the table traffic). Which coordinates form a pair::

    adjacent     a0 b0 a1 b1 a2 b2 a3 b3        half_split   a0 a1 a2 a3 b0 b1 b2 b3

Backends, in order (:data:`BACKENDS`; :func:`posenc.backends.select` picks the first that serves):

============  ======================================================================================
loop          the compiled CPU loop of :mod:`posenc._native` (float32/float64/bfloat16): one pass
triton        the Triton kernel of :mod:`posenc._gpu` on CUDA: one pass
operator      while ``torch.compile`` traces on the CPU (the loop built, or ``adjacent`` pairs): the eager
              backends as the opaque operator ``posenc::rotate`` (the loop measured faster than the
              compiler's code, and for ``adjacent`` pairs without it torch's complex multiply did)
complex       ``adjacent`` per-pair tables over all of a contiguous float32/float64 ``x``: one complex
              multiply (its autograd runs without Python)
pairs         the pair arithmetic, block by block in the cache on the CPU: serves every eager call
reference     :func:`rotation_reference`: one real expression the compiler fuses, and what ``torch.export``
              graphs hold
============  ======================================================================================

:func:`rotate` is the entry point; it differentiates with respect to ``x`` (the adjoint of a rotation
is the rotation by the opposite angle).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import torch

from posenc import _gpu, _native
from posenc.backends import Backend, Environment, select

LAYOUTS: tuple[str, ...] = ("adjacent", "half_split")

CHUNK_BYTES = 1 << 20
"""The ``pairs`` backend works through ``x`` in blocks of about this many bytes (of rows of the merged
batch·head dims and of the sequence), so that its passes run in the cache, not in main memory."""


def pairs(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the first (``a``) and second (``b``) coordinates of every pair of ``t[..., r]``."""
    half = t.shape[-1] // 2
    if layout == "half_split":
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def layout_table(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``[…, r/2]`` per-pair values → ``[…, r]`` with each value in both columns of its pair."""
    return torch.cat([t, t], dim=-1) if layout == "half_split" else t.repeat_interleave(2, dim=-1)


def rotation_reference(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool = False
) -> torch.Tensor:
    """The definition every backend is tested against, and the form compilers fuse.

    ``R x`` (``Rᵀ x`` when ``inverse``) over the first ``r`` dims of ``x[..., s, d]``, dims ``r …`` passed
    through; ``cos``, ``sin`` ``[s, r]`` in ``layout``, pair ``i`` rotated by ``[[c_a, −s_a], [s_b, c_b]]``
    (Su et al. 2021, eq. 34, where ``c_a = c_b``, ``s_a = s_b``). One out-of-place real expression: no
    complex dtype, no in-place writes, so ``torch.compile`` makes one loop of it and ``torch.export``
    graphs stay real.
    """
    r = cos.shape[-1]
    (x_a, x_b), (c_a, c_b), (s_a, s_b) = pairs(x[..., :r], layout), pairs(cos, layout), pairs(sin, layout)
    if inverse:
        o_a, o_b = x_a * c_a + x_b * s_b, x_b * c_b - x_a * s_a
    else:
        o_a, o_b = x_a * c_a - x_b * s_a, x_b * c_b + x_a * s_b
    rotated = torch.cat([o_a, o_b], -1) if layout == "half_split" else torch.stack([o_a, o_b], -1).flatten(-2)
    return rotated if r == x.shape[-1] else torch.cat([rotated, x[..., r:]], dim=-1)


Pairs = tuple[torch.Tensor, torch.Tensor]
"""``(c, s)``: the ``[s, r/2]`` per-pair values of rotation tables, any strides."""


class Rotation(NamedTuple):
    """One call: ``x [..., s, d]``; ``cos``/``sin`` ``[s, r]`` in ``layout`` or ``None``; ``paired`` their
    per-pair values ``[s, r/2]`` where both columns of every pair are known to be equal (else ``None``);
    at least one form is given. ``find``: tables a caller gave, whose per-pair values the eager backends
    find by reading them (:func:`given_pairs`)."""

    x: torch.Tensor
    cos: torch.Tensor | None
    sin: torch.Tensor | None
    layout: str
    inverse: bool
    paired: Pairs | None
    find: bool = False

    def pairs(self) -> Pairs | None:
        """The per-pair values, found by reading the tables where ``find`` asks for it (eager backends)."""
        if self.paired is None and self.find and self.cos is not None and self.sin is not None:
            return given_pairs(self.cos, self.sin, self.layout)
        return self.paired

    def tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``[s, r]`` tables, made from the per-pair values where only those were given."""
        if self.cos is not None and self.sin is not None:
            return self.cos, self.sin
        assert self.paired is not None
        return layout_table(self.paired[0], self.layout), layout_table(self.paired[1], self.layout)

    @property
    def r(self) -> int:
        return self.cos.shape[-1] if self.cos is not None else 2 * self.paired[0].shape[-1]  # type: ignore[index]


def pair_values(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> Pairs | None:
    """``(c, s)``, contiguous copies of the per-pair values of ``[s, r]`` tables, when both columns of every
    pair are equal (read on the host), else ``None``."""
    (c_a, c_b), (s_a, s_b) = pairs(cos, layout), pairs(sin, layout)
    if torch.equal(c_a, c_b) and torch.equal(s_a, s_b):
        return c_a.contiguous(), s_a.contiguous()
    return None


def given_pairs(cos: torch.Tensor, sin: torch.Tensor, layout: str) -> Pairs | None:
    """:func:`pair_values` of tables a caller gave :func:`posenc.nn.apply_rotary`, kept for the
    :data:`GIVEN_SIZE` tables used last while they are alive and unchanged.

    Finding them afresh measured 36–54 % of a decode call (``benchmarks/README.md``, rotary tables per
    call), so they are kept. A table is known by the memory it reads (its storage, held by weak
    reference, and its offset, shape, strides and dtype) and by its version counter, which views and
    detached aliases share with their base: the fresh slice ``cos[:s]`` handed out at every call finds the
    entry of the last call, and an in-place change through any alias misses it. Inference tensors keep no
    version counter: theirs are found at every call."""
    if cos.is_inference() or sin.is_inference():
        return pair_values(cos, sin, layout)
    (cos_mem, cos_view), (sin_mem, sin_view) = _memory_key(cos), _memory_key(sin)
    ident = (cos_view, sin_view, int(cos._version), int(sin._version), layout)
    for i, (ref_cos, ref_sin, entry_ident, found) in enumerate(_GIVEN):
        if entry_ident == ident and ref_cos() is cos_mem and ref_sin() is sin_mem:
            _GIVEN.insert(0, _GIVEN.pop(i))  # most recently used first
            return found
    found = pair_values(cos, sin, layout)
    _GIVEN[:] = [e for e in _GIVEN if e[0]() is not None and e[1]() is not None]  # drop dead tables
    _GIVEN.insert(0, (weakref.ref(cos_mem), weakref.ref(sin_mem), ident, found))
    del _GIVEN[GIVEN_SIZE:]
    return found


def _memory_key(t: torch.Tensor) -> tuple[torch.UntypedStorage, tuple[Any, ...]]:
    return t.untyped_storage(), (t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)


GIVEN_SIZE = 8
"""How many given tables :func:`given_pairs` keeps (least recently used dropped first)."""

_GIVEN: list[
    tuple[weakref.ref[torch.UntypedStorage], weakref.ref[torch.UntypedStorage], tuple[Any, ...], Pairs | None]
] = []


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
            :meth:`posenc.nn.RotaryEmbedding.forward`: ``x`` requiring grad while grad is enabled, or with an element
            reachable by two indices).

    Returns ``[..., s, d]``, the same dtype and strides as ``x``. ``cos``/``sin`` are constants
    for autograd (gradients flow to ``x`` only). Whether both columns of every pair of the tables are
    equal (then the fast paths read one value per pair) is found by reading them on the host, once per
    table while it stays unchanged (:func:`posenc.backends.rotate.given_pairs`); :class:`posenc.nn.RotaryEmbedding`
    knows it of its own tables and reads nothing.
    """
    check_tables(x, cos, sin, layout)
    if inplace:
        check_inplace(x)
    out = rotate(x, cos, sin, layout, find=True)
    if not inplace:
        return out
    x.copy_(out)
    return x


def check_floating(name: str, t: object) -> None:
    """Refuse ``t`` unless it is a floating tensor (a rotation of integers is not an integer)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor [..., s, head_dim], got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(
            f"{name} must be a floating tensor (rotations of integers are not integers), got {t.dtype}"
        )


def check_tables(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> None:
    """The checks of :func:`posenc.nn.apply_rotary`: tables ``[s, r]`` beside ``x [..., s, d]`` (metadata only)."""
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


def check_inplace(*tensors: torch.Tensor) -> None:
    """Refuse ``inplace=True`` where writing the rotation into the inputs would be wrong: an input autograd
    needs (it requires grad while grad is enabled), one whose elements are not all distinct in memory, or
    two inputs that share an element (writing one back would overwrite the other's input)."""
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
    if len(tensors) == 2 and _overlap(*tensors):
        raise ValueError("inplace=True cannot rotate q and k that overlap in memory; use inplace=False")


def _distinct_elements(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` has its own memory: with its dims of size > 1 ordered by stride, each
    stride steps over all the elements the dims before it span."""
    span = 0
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if stride <= span:
            return False
        span += stride * (size - 1)
    return True


def _overlap(q: torch.Tensor, k: torch.Tensor) -> bool:
    """Whether ``q`` and ``k`` (each with distinct elements) may share an element, from metadata only.

    Apart when their storages or byte ranges differ. Views with the same dtype, shape and strides (slices
    of one fused projection) share one exactly when their offsets differ by ``Σ i_j·stride_j`` with
    ``|i_j| < size_j``: the dims ordered by stride each step over the smaller ones, so the indices are
    found greedily, largest stride first. Any other overlap of byte ranges counts as sharing."""
    if not q.numel() or not k.numel() or q.untyped_storage().data_ptr() != k.untyped_storage().data_ptr():
        return False
    size = q.element_size()
    q_lo, k_lo = q.storage_offset() * size, k.storage_offset() * k.element_size()
    q_hi = q_lo + size * (1 + sum(st * (n - 1) for n, st in zip(q.shape, q.stride())))
    k_hi = k_lo + k.element_size() * (1 + sum(st * (n - 1) for n, st in zip(k.shape, k.stride())))
    if q_hi <= k_lo or k_hi <= q_lo:
        return False
    if q.dtype != k.dtype or q.shape != k.shape or q.stride() != k.stride():
        return True
    rest = abs(int(q.storage_offset()) - int(k.storage_offset()))
    for stride, n in sorted(((st, n) for n, st in zip(q.shape, q.stride()) if n > 1), reverse=True):
        rest -= stride * min(rest // stride, n - 1)
    return rest == 0


# --- the one-pass kernels: the CPU loop and the Triton kernel ---------------------------------------------


def _kernel_ok(call: Rotation) -> bool:
    """Unit stride along the last dim, and at most four dims once the leading ones are merged."""
    x = call.x
    return x.dim() >= 2 and x.stride(-1) == 1 and (x.dim() <= 4 or _leading_mergeable(x, x.dim() - 3))


def _leading_mergeable(t: torch.Tensor, dims: int) -> bool:
    """Whether the first ``dims`` dims of ``t`` merge into one without a copy."""
    return all(t.stride(i) == t.stride(i + 1) * t.shape[i + 1] for i in range(dims - 1))


def _as_4d(t: torch.Tensor) -> torch.Tensor:
    if t.dim() > 4:
        return t.view(-1, *t.shape[-3:])
    while t.dim() < 4:
        t = t.unsqueeze(0)
    return t


def _kernel_tables(call: Rotation, work: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """``(c, s, paired)`` as the kernels read them, in ``work``: the per-pair values (``Rᵀ``: sines
    negated), rows apart by at least ``r/2`` and alike, else copied; or, for tables that are not known to
    be rotations, ``[s, r]`` with signed sines ``(σ_a, σ_b)``: ``R`` has ``(−s_a, s_b)``, ``Rᵀ`` ``(s_b, −s_a)``,
    and the kernels compute ``out_a = x_a·c_a + x_b·σ_a``, ``out_b = x_b·c_b + x_a·σ_b``."""
    paired = call.paired if call.paired is not None or not call.find else call.pairs()
    if paired is not None:
        c, s = paired
        if c.dtype != work or s.dtype != work:
            c, s = c.to(work), s.to(work)
        if call.inverse:
            s = -s
        if not (
            c.stride(-1) == 1 and c.stride() == s.stride() and (c.shape[0] <= 1 or c.stride(0) >= c.shape[1])
        ):
            c, s = c.contiguous(), s.contiguous()
        return c, s, True
    cos, sin = call.tables()
    sin_w = sin.to(work)
    s_a, s_b = pairs(sin_w, call.layout)
    signed = torch.empty_like(sin_w, memory_format=torch.contiguous_format)
    o_a, o_b = pairs(signed, call.layout)
    if call.inverse:
        o_a.copy_(s_b)
        torch.neg(s_a, out=o_b)
    else:
        torch.neg(s_a, out=o_a)
        o_b.copy_(s_b)
    return cos.to(work).contiguous(), signed, False


def _work(call: Rotation, bf16_tables: bool) -> torch.dtype:
    x = call.x
    if x.dtype == torch.float64:
        return torch.float64
    table = call.cos if call.cos is not None else call.paired[0]  # type: ignore[index]
    if bf16_tables and x.dtype == torch.bfloat16 and table is not None and table.dtype == torch.bfloat16:
        return torch.bfloat16  # widened exactly in the loop: half the table traffic of float32
    return torch.float32


def _loop(call: Rotation) -> torch.Tensor:
    """The CPU loop: :func:`posenc._native.rotate`, whose checks run once per signature of the arguments
    (shapes, strides, dtypes, storage offsets and sizes: everything they read but the addresses; ``out``
    is made here, apart from the inputs); later calls of a checked signature go straight to the loop."""
    x = call.x
    out = torch.empty_like(x)  # x's strides if dense, else contiguous: unit last stride either way
    if not x.numel():
        return out
    c, s, paired = _kernel_tables(call, _work(call, bf16_tables=True))
    x4, out4 = (x, out) if x.dim() == 4 else (_as_4d(x), _as_4d(out))
    key = (
        call.layout, paired, x4.shape, x4.stride(), x4.dtype, x4.storage_offset(), x4.untyped_storage().nbytes(),
        out4.shape, out4.stride(), c.shape, c.stride(), c.dtype, c.storage_offset(), c.untyped_storage().nbytes(),
        s.stride(), s.dtype, s.storage_offset(), s.untyped_storage().nbytes(),
    )  # fmt: skip
    if key in _CHECKED:
        _native.rotate_trusted(x4, out4, c, s, call.layout, paired)
        return out
    _native.rotate(x4, out4, c, s, call.layout, paired)
    if len(_CHECKED) >= _CHECKED_SIZE:
        _CHECKED.clear()
    _CHECKED.add(key)
    return out


_CHECKED: set[tuple[Any, ...]] = set()
"""Signatures of :func:`_loop`'s calls of :func:`posenc._native.rotate` that passed its checks."""

_CHECKED_SIZE = 4096
"""At most this many signatures are kept (then the set starts afresh)."""


def _triton(call: Rotation) -> torch.Tensor:
    """The Triton kernel (:mod:`posenc._gpu`)."""
    x = call.x
    out = torch.empty_like(x)
    if x.numel():
        c, s, paired = _kernel_tables(call, _work(call, bf16_tables=False))
        gpu = _gpu.kernels(x.device.type, x.dtype)
        assert gpu is not None
        gpu.rotate(
            _as_4d(x),
            _as_4d(out),
            c.contiguous(),
            s.contiguous(),
            call.layout,
            call.r,
            paired,
            checks="signature",
        )  # a fresh output: the signature's checks suffice
    return out


# --- torch's own operations -------------------------------------------------------------------------------


def _complex_ok(call: Rotation) -> bool:
    x = call.x
    return (
        call.paired is not None and call.layout == "adjacent" and call.r == x.shape[-1] and x.is_contiguous()
    )


def _complex(call: Rotation) -> torch.Tensor:
    """One complex multiply by the rotor ``c ± i·s`` over all of ``x``; autograd's adjoint (by the
    conjugate rotor) runs without Python."""
    assert call.paired is not None
    x, (c, s) = call.x, call.paired
    s = s.to(x.dtype)
    rotor = torch.complex(c.to(x.dtype), -s if call.inverse else s)
    return torch.view_as_real(torch.view_as_complex(x.unflatten(-1, (-1, 2))) * rotor).flatten(-2)


def _pairs_backend(call: Rotation) -> torch.Tensor:
    """The pair arithmetic (one multiply, two multiply-adds; ``half_split`` halves are contiguous) or, for
    half precision ``adjacent``, an upcast complex multiply rounded back: on the CPU in blocks of rows and
    of positions of about :data:`CHUNK_BYTES`, each worked on while it is in the cache; elsewhere over all
    of ``x`` at once (every block would be a kernel launch)."""
    x, layout, inverse = call.x, call.layout, call.inverse
    cos, sin = call.tables()
    r = cos.shape[-1]
    out = torch.empty_like(x)
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])
    xs, outs = x[..., :r], out[..., :r]
    if xs.dim() == 2:
        xs, outs = xs.unsqueeze(0), outs.unsqueeze(0)
    if _leading_mergeable(xs, xs.dim() - 2) and _leading_mergeable(outs, outs.dim() - 2):
        xs, outs = xs.view(-1, *xs.shape[-2:]), outs.view(-1, *outs.shape[-2:])  # [b·h, s, r]: finer blocks
    work = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    table = None
    paired = call.pairs()
    if paired is not None:
        c_a, s_a = paired
        if layout == "half_split":
            table = s_a.contiguous()
        elif work in (torch.float32, torch.float64) and (
            work != x.dtype or (_complex_viewable(xs) and _complex_viewable(outs))
        ):
            s_w = s_a.to(work)
            table = torch.complex(c_a.to(work), -s_w if inverse else s_w)
    if layout == "adjacent" and table is not None and work == x.dtype:
        _complex_into(outs, xs, table)  # one pass (read x, write out): blocks would only add overhead
        return out
    row_bytes = r * max(x.element_size(), 4)
    chunk = CHUNK_BYTES  # more threads or a GPU: one parallel region per pass, not one per block
    if torch.get_num_threads() > 1 or x.device.type != "cpu":
        chunk = max(CHUNK_BYTES, xs.numel() * max(x.element_size(), 4))
    seq_step = max(1, min(xs.shape[-2], chunk // row_bytes))
    lead_step = max(1, chunk // (row_bytes * seq_step))
    x_blocks, out_blocks = _blocks(xs, lead_step, seq_step), _blocks(outs, lead_step, seq_step)
    n_seq = -(-xs.shape[-2] // seq_step)  # blocks are lead-major: block i is at positions block i % n_seq
    if table is None:
        tables = list(zip(cos.split(seq_step), sin.split(seq_step)))
        for i, (x_blk, out_blk) in enumerate(zip(x_blocks, out_blocks)):
            _rotate_into(out_blk, x_blk, *tables[i % n_seq], layout, inverse)
    elif layout == "half_split":
        _half_split_blocks(xs, outs, cos, table, inverse, lead_step, seq_step)
    else:
        _upcast_blocks(x_blocks, out_blocks, table.split(seq_step), work)
    return out


def _complex_viewable(t: torch.Tensor) -> bool:
    """Whether ``view_as_complex`` can read the pairs of ``t[..., r]`` in place."""
    return t.stride(-1) == 1 and all(st % 2 == 0 for st in t.stride()[:-1]) and t.storage_offset() % 2 == 0


def _complex_into(out: torch.Tensor, x: torch.Tensor, rotor: torch.Tensor) -> None:
    """``out = R x`` for ``adjacent`` pairs read as complex numbers: one complex multiply by ``rotor``."""
    torch.mul(
        torch.view_as_complex(x.unflatten(-1, (-1, 2))),
        rotor,
        out=torch.view_as_complex(out.unflatten(-1, (-1, 2))),
    )


def _blocks(t: torch.Tensor, lead_step: int, seq_step: int) -> list[torch.Tensor]:
    """Views of ``t[l, s, …]`` in blocks of ``lead_step`` × ``seq_step``, lead-major."""
    if seq_step >= t.shape[-2]:
        return list(t.split(lead_step, 0))
    return [blk for rows in t.split(lead_step, 0) for blk in rows.split(seq_step, -2)]


def _rotate_into(
    out: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool
) -> None:
    """Write ``R x`` (``Rᵀ x``) into ``out`` by real arithmetic on the pair views, any table values."""
    torch.mul(x, cos, out=out)
    (x_a, x_b), (o_a, o_b), (s_a, s_b) = pairs(x, layout), pairs(out, layout), pairs(sin, layout)
    if inverse:  # the transpose: [[c_a, −s_a], [s_b, c_b]]ᵀ = [[c_a, s_b], [−s_a, c_b]]
        o_a.addcmul_(x_b, s_b)
        o_b.addcmul_(x_a, s_a, value=-1.0)
    else:
        o_a.addcmul_(x_b, s_a, value=-1.0)
        o_b.addcmul_(x_a, s_b)


def _half_split_blocks(
    xs: torch.Tensor,
    outs: torch.Tensor,
    cos: torch.Tensor,
    sin_half: torch.Tensor,
    inverse: bool,
    lead_step: int,
    seq_step: int,
) -> None:
    """``outs = R xs`` for ``half_split`` rotation tables, block by block: ``out = x·cos``, then ``∓ x_b·s``
    and ``± x_a·s`` added to the halves (three passes over a block while it is in the cache)."""
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


def _upcast_blocks(
    x_blocks: list[torch.Tensor],
    out_blocks: list[torch.Tensor],
    rotors: tuple[torch.Tensor, ...],
    work: torch.dtype,
) -> None:
    """Half-precision ``adjacent`` blocks: each copied into a ``work`` scratch, multiplied there as complex
    numbers by its rotor block, and rounded back once."""
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


def _reference(call: Rotation) -> torch.Tensor:
    """:func:`rotation_reference`, rounded to ``x``'s dtype (tables of a wider dtype promote the result)."""
    return rotation_reference(call.x, *call.tables(), call.layout, call.inverse).to(call.x.dtype)


def _operator(call: Rotation) -> torch.Tensor:
    pair_cos, pair_sin = (None, None) if call.paired is None else call.paired
    out: torch.Tensor = torch.ops.posenc.rotate(
        call.x, call.cos, call.sin, pair_cos, pair_sin, call.layout, call.inverse
    )
    return out


LOOP_DTYPES = frozenset({torch.float32, torch.float64, torch.bfloat16})
CPU, CUDA = frozenset({"cpu"}), frozenset({"cuda"})

BACKENDS: tuple[Backend[Rotation], ...] = (
    Backend("loop", _loop, devices=CPU, dtypes=LOOP_DTYPES, needs="native", supports=_kernel_ok),
    Backend("triton", _triton, devices=CUDA, needs="triton", supports=_kernel_ok),
    Backend("operator (loop)", _operator, devices=CPU, dtypes=LOOP_DTYPES, needs="native", eager=False,
            compiled=True),
    Backend("operator (complex)", _operator, devices=CPU, eager=False, compiled=True,
            supports=lambda call: call.layout == "adjacent"),
    Backend("complex", _complex, dtypes=frozenset({torch.float32, torch.float64}), supports=_complex_ok,
            differentiable=True),
    Backend("pairs", _pairs_backend),
    Backend("reference", _reference, compiled=True, exported=True, differentiable=True),
)  # fmt: skip
"""The backends of :func:`rotate`, in order of preference (module docstring)."""


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor | None,
    sin: torch.Tensor | None,
    layout: str,
    inverse: bool = False,
    paired: Pairs | None = None,
    *,
    find: bool = False,
) -> torch.Tensor:
    """``R x`` (``Rᵀ x`` when ``inverse``) by the first of :data:`BACKENDS` that serves (:class:`Rotation`
    describes the arguments); differentiable with respect to ``x``."""
    call = Rotation(x, cos, sin, layout, inverse, paired, find)
    backend = select(BACKENDS, call, Environment.of(x))
    if backend.differentiable or not (x.requires_grad and torch.is_grad_enabled()):
        return backend.apply(call)  # type: ignore[return-value]
    pair_cos, pair_sin = (None, None) if paired is None else paired
    rotated: torch.Tensor = _Rotate.apply(x, cos, sin, layout, inverse, pair_cos, pair_sin, find)
    return rotated


class _Rotate(torch.autograd.Function):
    """Autograd for the backends that record none: the adjoint of ``R`` is ``Rᵀ``."""

    @staticmethod
    def forward(ctx: Any, x, cos, sin, layout, inverse, pair_cos, pair_sin, find):  # type: ignore[no-untyped-def]
        ctx.save_for_backward(cos, sin, pair_cos, pair_sin)
        ctx.options = (layout, not inverse, find)
        call = Rotation(
            x, cos, sin, layout, inverse, None if pair_cos is None else (pair_cos, pair_sin), find
        )
        return select(BACKENDS, call, Environment.of(x)).apply(call)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        cos, sin, pair_cos, pair_sin = ctx.saved_tensors
        layout, inverse, find = ctx.options
        paired = None if pair_cos is None else (pair_cos, pair_sin)
        return (rotate(grad, cos, sin, layout, inverse, paired, find=find), *[None] * 7)


_LIBRARY = torch.library.Library("posenc", "DEF")
_LIBRARY.define(
    "rotate(Tensor x, Tensor? cos, Tensor? sin, Tensor? pair_cos, Tensor? pair_sin, str layout, bool inverse) "
    "-> Tensor"
)


def _rotate_op(
    x: torch.Tensor,
    cos: torch.Tensor | None,
    sin: torch.Tensor | None,
    pair_cos: torch.Tensor | None,
    pair_sin: torch.Tensor | None,
    layout: str,
    inverse: bool,
) -> torch.Tensor:
    """``posenc::rotate``, :func:`rotate` as one opaque operator for ``torch.compile``; per-pair values not
    given are found here (:func:`given_pairs`; a host read, outside the traced graph)."""
    paired = None if pair_cos is None or pair_sin is None else (pair_cos, pair_sin)
    if paired is None and cos is not None and sin is not None:
        paired = given_pairs(cos, sin, layout)
    call = Rotation(x, cos, sin, layout, inverse, paired)
    return select(BACKENDS, call, Environment.of(x)).apply(call)  # type: ignore[return-value]


# A plain kernel registration, not ``torch.library.custom_op``: that wrapper's per-call machinery
# measured an order of magnitude more costly per call (benchmarks/README.md).
_LIBRARY.impl("rotate", _rotate_op, "CompositeExplicitAutograd")


@torch.library.register_fake("posenc::rotate")
def _(x, cos, sin, pair_cos, pair_sin, layout, inverse):  # type: ignore[no-untyped-def]
    return torch.empty_like(x)
