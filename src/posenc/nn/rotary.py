"""Rotary position embedding (RoPE; Su et al. 2021, RoFormer): rotate query/key pairs by ``t·θ_i``.

Pair ``i`` of a query or key at position ``t`` is rotated by the angle ``t·θ_i`` (SPEC §7)::

    out_a = x_a·cos(tθ_i) − x_b·sin(tθ_i)
    out_b = x_b·cos(tθ_i) + x_a·sin(tθ_i)

so ``⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩`` depends on ``n − m`` only: the shift operator of
SPEC §2 applied directly. ``θ_i = base^(−2i/r)``, ``i < r/2``, over the ``r = rotary_dim``
rotated dimensions (:func:`posenc.spectrum.geometric`); dimensions ``r … d_h − 1`` pass
through unchanged (partial rotary, GPT-NeoX ``rotary_pct`` / GPT-J ``rotary_dim``).

Which coordinates form pair ``i`` is the *layout*; both are in use and must not be mixed up
when loading weights. For ``r = 8`` (pairs 0…3)::

    adjacent     a0 b0 a1 b1 a2 b2 a3 b3    RoFormer, GPT-J ``rotate_every_two``, Meta LLaMA (complex)
    half_split   a0 a1 a2 a3 b0 b1 b2 b3    GPT-NeoX, Hugging Face ``rotate_half`` (LLaMA, Mistral …)

The cos/sin tables handed to :func:`apply_rotary` are ``[s, r]`` in the same layout
(``cos(tθ_i)`` stands in both columns of pair ``i``): for ``half_split`` they equal Hugging
Face's ``cos``/``sin`` (``cat(freqs, freqs)``), for ``adjacent`` GPT-J's ``repeat_interleave``.

Context extension (``scaling``), folded into the frequencies so angles stay ``t·θ_i``:

* ``"linear"`` — position interpolation (Chen et al. 2023): ``θ_i / factor``.
* ``"ntk"`` — NTK-aware base scaling (bloc97 2023, "NTK-Aware Scaled RoPE"; Hugging Face's
  ``dynamic`` variant recomputes the same formula per length): ``base' = base · factor^(r/(r−2))``.
"""

from __future__ import annotations

import numpy as np
import torch

from posenc import _validate, spectrum
from posenc.nn import _positions
from posenc.nn.contracts import RotaryContract
from posenc.nn.functional import sincos

LAYOUTS: tuple[str, ...] = ("adjacent", "half_split")
SCALINGS: tuple[str, ...] = ("linear", "ntk")

_CHUNK_BYTES = 1 << 20
"""Eager :func:`apply_rotary` works through ``x`` in blocks of about this many bytes (of rows of the
merged batch·head dims and of the sequence), so that its passes run in the cache, not in main memory."""


def _pairs(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the first (``a``) and second (``b``) coordinates of every pair of ``t[..., r]``."""
    half = t.shape[-1] // 2
    if layout == "half_split":
        return t[..., :half], t[..., half:]
    return t[..., 0::2], t[..., 1::2]


def _rotate_into(out: torch.Tensor, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str,
                 inverse: bool) -> None:
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


def _rotation_expr(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool) -> torch.Tensor:
    """``R x`` (``Rᵀ x`` when ``inverse``) as one out-of-place real expression, for compilers to fuse.

    No complex dtype and no in-place writes, so ``torch.compile`` makes one loop of it and
    ``torch.export`` graphs stay real.
    """
    (x_a, x_b), (c_a, c_b), (s_a, s_b) = _pairs(x, layout), _pairs(cos, layout), _pairs(sin, layout)
    if inverse:
        o_a, o_b = x_a * c_a + x_b * s_b, x_b * c_b - x_a * s_a
    else:
        o_a, o_b = x_a * c_a - x_b * s_a, x_b * c_b + x_a * s_b
    if layout == "half_split":
        return torch.cat([o_a, o_b], dim=-1)
    return torch.stack([o_a, o_b], dim=-1).flatten(-2)


def _rotor(cos: torch.Tensor, sin: torch.Tensor, inverse: bool, work: torch.dtype) -> torch.Tensor | None:
    """``[s, r/2]`` complex ``c ± i·s`` of an ``adjacent`` rotation table (both columns of every pair
    equal), in the complex dtype of ``work``; ``None`` for other tables."""
    (c_a, c_b), (s_a, s_b) = _pairs(cos, "adjacent"), _pairs(sin, "adjacent")
    if not (torch.equal(c_a, c_b) and torch.equal(s_a, s_b)):
        return None
    s_a = s_a.to(work)
    return torch.complex(c_a.to(work), -s_a if inverse else s_a)


def _rotate_complex_into(out: torch.Tensor, x: torch.Tensor, rotor: torch.Tensor) -> None:
    """``out = R x`` for ``adjacent`` pairs read as complex numbers: one complex multiply by ``rotor``.

    Half-precision blocks are multiplied in float32 and rounded once.
    """
    work = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    xw = x if x.dtype == work else x.to(work)
    ow = out if out.dtype == work else torch.empty_like(xw)
    torch.mul(torch.view_as_complex(xw.unflatten(-1, (-1, 2))), rotor,
              out=torch.view_as_complex(ow.unflatten(-1, (-1, 2))))
    if ow is not out:
        out.copy_(ow)


def _leading_mergeable(t: torch.Tensor) -> bool:
    """Whether the dims before the last two of ``t`` can be merged into one without a copy."""
    return all(t.stride(i) == t.stride(i + 1) * t.shape[i + 1] for i in range(t.dim() - 3))


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool) -> torch.Tensor:
    """``R x`` over the first ``r`` dims of ``x[..., s, d]``; dims ``r …`` are copied.

    Eager: blocks of rows and of positions of about :data:`_CHUNK_BYTES`, each rotated while it is in
    the cache — by one complex multiply when the layout is ``adjacent`` and ``cos``/``sin`` are a
    rotation table, else by the pair arithmetic of :func:`_rotate_into` (one multiply, two
    multiply-adds; ``half_split`` halves are contiguous, ``adjacent`` pairs would be stride 2).
    Under ``torch.compile``: the fused real expression :func:`_rotation_expr`.
    """
    r = cos.shape[-1]
    if torch.compiler.is_compiling():
        rotated = _rotation_expr(x[..., :r], cos, sin, layout, inverse)
        return rotated if r == x.shape[-1] else torch.cat([rotated, x[..., r:]], dim=-1)
    out = torch.empty_like(x)
    if r < x.shape[-1]:
        out[..., r:].copy_(x[..., r:])
    xs, outs = x[..., :r], out[..., :r]
    if xs.dim() == 2:
        xs, outs = xs.unsqueeze(0), outs.unsqueeze(0)
    if _leading_mergeable(xs) and _leading_mergeable(outs):  # [b, h, s, r] → [b·h, s, r]: finer blocks
        xs, outs = xs.view(-1, *xs.shape[-2:]), outs.view(-1, *outs.shape[-2:])
    work = torch.float32 if x.dtype in (torch.bfloat16, torch.float16) else x.dtype
    complex_ok = layout == "adjacent" and work in (torch.float32, torch.float64) and (work != x.dtype or all(
        t.stride(-1) == 1 and all(st % 2 == 0 for st in t.stride()[:-1]) and t.storage_offset() % 2 == 0
        for t in (xs, outs)))  # upcast blocks are contiguous; else the pairs must be complex-viewable as they are
    rotor = _rotor(cos, sin, inverse, work) if complex_ok else None
    row_bytes = r * max(x.element_size(), 4)
    seq_step = max(1, min(xs.shape[-2], _CHUNK_BYTES // row_bytes))
    lead_step = max(1, _CHUNK_BYTES // (row_bytes * seq_step))
    for i0 in range(0, xs.shape[0], lead_step):
        for s0 in range(0, xs.shape[-2], seq_step):
            rows, seq = slice(i0, i0 + lead_step), slice(s0, s0 + seq_step)
            x_blk, out_blk = xs[rows][..., seq, :], outs[rows][..., seq, :]
            if rotor is None:
                _rotate_into(out_blk, x_blk, cos[seq], sin[seq], layout, inverse)
            else:
                _rotate_complex_into(out_blk, x_blk, rotor[seq])
    return out


class _Rotate(torch.autograd.Function):
    """Autograd for :func:`apply_rotary`: the adjoint of a rotation is the rotation by the opposite angle."""

    @staticmethod
    def forward(ctx, x, cos, sin, layout):  # type: ignore[override]
        ctx.save_for_backward(cos, sin)
        ctx.layout = layout
        return _rotate(x, cos, sin, layout, inverse=False)

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        cos, sin = ctx.saved_tensors
        return _rotate(grad, cos, sin, ctx.layout, inverse=True), None, None, None


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, *, layout: str) -> torch.Tensor:
    """Rotate the first ``r`` dims of ``x`` pairwise (SPEC §7; RoFormer eq. 34 for ``adjacent``).

    Args:
        x: ``[..., s, d]`` queries or keys, e.g. ``[b, h, s, d_h]``; ``d ≥ r``.
        cos: ``[s, r]`` ``cos(t_s·θ_i)`` placed in ``layout`` (both columns of pair ``i``), ``r`` even.
        sin: ``[s, r]`` the matching sines.
        layout: ``"adjacent"`` or ``"half_split"`` (module docstring).

    Returns ``[..., s, d]``, the same dtype and strides as ``x``. ``cos``/``sin`` are constants
    for autograd (gradients flow to ``x`` only).
    """
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
        raise ValueError("cos and sin must not require grad: apply_rotary differentiates with respect to x only")
    return _Rotate.apply(x, cos, sin, layout)


def _layout_table(t: torch.Tensor, layout: str) -> torch.Tensor:
    """``[s, r/2]`` per-pair values → ``[s, r]`` with each value in both columns of its pair."""
    return torch.cat([t, t], dim=-1) if layout == "half_split" else t.repeat_interleave(2, dim=-1)


class RotaryEmbedding(RotaryContract):
    """Rotary position embedding for queries and keys ``[b, h, s, d_h]`` (SPEC §7; module docstring).

    Args:
        head_dim: ``d_h``, the per-head dimension of the queries and keys.
        base: ``ρ`` of ``θ_i = ρ^(−2i/r)`` (10000 in RoFormer, GPT-NeoX, LLaMA 1–2).
        rotary_dim: dimensions rotated: an even int, a float fraction of ``head_dim``
            (``int(head_dim·fraction)``, must come out even), or ``None`` for all.
        layout: ``"adjacent"`` (RoFormer/GPT-J) or ``"half_split"`` (GPT-NeoX/Hugging Face).
        scaling: ``None``, ``"linear"`` (position interpolation) or ``"ntk"`` (base scaling).
        scaling_factor: context-extension factor ``≥ 1`` used by ``scaling``.
        max_len: positions whose cos/sin are tabulated up front; longer inputs grow the table.

    The tables are non-persistent buffers (``state_dict()`` is empty), rebuilt from float64
    angles (:func:`posenc.nn.functional.sincos`) for each device and dtype they are used in.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        rotary_dim: int | float | None = None,
        layout: str = "half_split",
        scaling: str | None = None,
        scaling_factor: float = 1.0,
        max_len: int = 2048,
    ) -> None:
        super().__init__()
        self.head_dim = _validate.positive_int("head_dim", head_dim)
        self.base = _validate.positive_float("base", base)
        self.rotary_dim = spectrum.rotary_dim(self.head_dim, rotary_dim)
        self.layout = _validate.choice("layout", layout, LAYOUTS)
        if scaling is not None:
            _validate.choice("scaling", scaling, SCALINGS)
        self.scaling = scaling
        self.scaling_factor = _validate.positive_float("scaling_factor", scaling_factor)
        if self.scaling_factor < 1.0:
            raise ValueError(f"scaling_factor must be >= 1 (it extends the context), got {scaling_factor!r}")
        if scaling == "ntk" and self.rotary_dim <= 2:
            raise ValueError(f"scaling='ntk' needs rotary_dim > 2 (base·factor^(r/(r−2))), got {self.rotary_dim}")
        self._frequencies = torch.from_numpy(self._compute_frequencies())
        self._table_dtype: torch.dtype | None = None
        self.register_buffer("_cos", torch.empty(0), persistent=False)
        self.register_buffer("_sin", torch.empty(0), persistent=False)
        self._build(_validate.positive_int("max_len", max_len), torch.get_default_dtype(), torch.device("cpu"))

    def _compute_frequencies(self) -> np.ndarray:
        r, base = self.rotary_dim, self.base
        if self.scaling == "ntk":
            base = base * self.scaling_factor ** (r / (r - 2))
        theta = spectrum.geometric(r, base)
        return theta / self.scaling_factor if self.scaling == "linear" else theta

    @property
    def frequencies(self) -> torch.Tensor:
        """``[r/2]`` float64 rotation frequencies ``θ_i`` after scaling (angles are ``t·θ_i``)."""
        return self._frequencies.clone()

    def tables(self, positions: torch.Tensor, *, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)``, each ``[s, r]`` in ``self.layout``, for arbitrary real ``positions [s]``."""
        c_sin, c_cos = sincos(positions, self._frequencies.to(positions.device), dtype=dtype)
        return _layout_table(c_cos, self.layout), _layout_table(c_sin, self.layout)

    def _build(self, length: int, dtype: torch.dtype, device: torch.device) -> None:
        self._cos, self._sin = self.tables(torch.arange(length, device=device), dtype=dtype)
        self._table_dtype = dtype

    def _cached(self, start: int, length: int, dtype: torch.dtype, device: torch.device
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``start … start+length−1`` of the tables in ``dtype`` on ``device``.

        The cache is rebuilt for a new dtype or device (from float64 angles, never by casting) and
        doubles when a sequence runs past its end; a window far beyond it (``end > 2·cached``,
        e.g. one step of decoding at position 10^6) is computed directly instead of cached.
        """
        end = start + length
        cached = self._cos.shape[0]
        if self._table_dtype != self._cos.dtype or self._cos.dtype != dtype or self._cos.device != device:
            self._build(cached, dtype, device)
        if end > 2 * cached:
            return self.tables(torch.arange(start, end, device=device), dtype=dtype)
        if end > cached:
            self._build(2 * cached, dtype, device)
        return self._cos[start:end], self._sin[start:end]

    def cos_sin(
        self, length: int, *, positions: torch.Tensor | None = None, offset: int = 0, dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[length, r]`` for ``positions`` (default ``offset … offset+length−1``, cached).

        The tables :meth:`rotate` applies; :class:`posenc.nn.TransformerEncoder` computes them once
        per forward and every layer rotates with them.
        """
        device = torch.device("cpu") if device is None else torch.device(device)
        if positions is None:
            return self._cached(_positions.check_offset(offset), length, dtype, device)
        positions = _positions.check_positions("positions", positions, length)
        return self.tables(positions.to(device), dtype=dtype)

    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [..., s, head_dim]`` rotated by tables from :meth:`cos_sin` (:func:`apply_rotary` in this layout)."""
        return apply_rotary(x, cos, sin, layout=self.layout)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries ``[b, h, s_q, d_h]`` and keys ``[b, h, s_k, d_h]``.

        Positions default to ``offset + 0 … s_k − 1`` for keys and the last ``s_q`` of those for
        queries (cached decoding; :mod:`posenc.nn._positions`); explicit ``[s]`` positions may be
        any real numbers. Returns ``(q_rot, k_rot)`` in the inputs' dtype.
        """
        for name, t in (("q", q), ("k", k)):
            if t.dim() < 2 or t.shape[-1] != self.head_dim:
                raise ValueError(f"{name} must be [..., s, head_dim={self.head_dim}], got {list(t.shape)}")
        s_q, s_k = q.shape[-2], k.shape[-2]
        if q_positions is None and k_positions is None:
            offset = _positions.check_offset(offset)
            k_cos, k_sin = self._cached(offset, s_k, k.dtype, k.device)
            start = _positions.query_start(s_q, s_k, offset)
            q_cos, q_sin = (k_cos, k_sin) if start == offset else self._cached(start, s_q, q.dtype, q.device)
        else:
            qp, kp = _positions.resolve(
                s_q, s_k, q_positions=q_positions, k_positions=k_positions, offset=offset, device=q.device
            )
            k_cos, k_sin = self.tables(kp, dtype=k.dtype)
            q_cos, q_sin = (k_cos, k_sin) if qp is kp else self.tables(qp, dtype=q.dtype)
        return self.rotate(q, q_cos, q_sin), self.rotate(k, k_cos, k_sin)

    def extra_repr(self) -> str:
        scaling = "" if self.scaling is None else f", scaling={self.scaling!r}, scaling_factor={self.scaling_factor}"
        return f"head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, base={self.base}, layout={self.layout!r}{scaling}"
