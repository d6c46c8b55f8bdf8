"""Relative-position encodings that act on attention scores: ALiBi, T5 buckets, Shaw et al.

With queries at positions ``i`` and keys at ``j`` (defaults and alignment:
:mod:`posenc.nn._positions`), each adds to the scores ``q_i·k_j/√d_h`` before the softmax:

==========  ======================================================  =================================
class       added to score ``(i, j)`` of head ``h``                  source
==========  ======================================================  =================================
ALiBi       ``−m_h·|i − j|``, fixed geometric slopes ``m_h``         Press et al. 2022, §3
T5          ``b_h[bucket(j − i)]``, learned scalars                  Raffel et al. 2020, §2.1
Shaw        ``q_i·a^K_(clip(j−i))/√d_h`` (and ``Σ_j α_ij a^V`` on     Shaw et al. 2018, eqs. 3–5
            the outputs), learned vectors shared by the heads
==========  ======================================================  =================================

ALiBi and T5 depend only on the positions, so they are an additive float mask ``[h, s_q, s_k]``
(:meth:`AttentionBias.bias`) and attention keeps its fused kernel. Shaw's key term depends on
the query (:meth:`ShawRelativeBias.score_term`); its value term needs the attention weights
(:meth:`ShawRelativeBias.attend`), which fused attention kernels never return.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import torch
from torch import nn

from posenc import spectrum, validate
from posenc.backends import slots as slot_backends
from posenc.nn._diagonals import toeplitz
from posenc.nn._positions import check_end, check_offset, query_start, relative_distances
from posenc.nn._slots import attend_with_slots
from posenc.nn.contracts import PositionContext, QueryBiasContract, ScoreBiasContract, ScoreTerm


def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> torch.Tensor:
    """``[n_heads]`` float64 ALiBi slopes ``m_h`` (Press et al. 2022; :func:`posenc.spectrum.alibi_slopes`).

    Powers of two: ``2^(−Bh/n)``, ``h = 1 … n``, ``B = alibi_bias_max`` (Press et al.: 8, so 8 heads
    get 1/2 … 1/256; MPT makes ``B`` an option); otherwise the slopes of the largest power of two
    below ``n`` followed by every other slope of twice that many heads.
    """
    return torch.from_numpy(spectrum.alibi_slopes(n_heads, alibi_bias_max=alibi_bias_max))


class AttentionBias(ScoreBiasContract):
    """An encoding that adds a query-independent ``[h, s_q, s_k]`` tensor to the attention scores."""

    n_heads: int
    by_offset: ClassVar[bool] = True
    """Whether the bias of default positions depends on ``j − i`` alone (:meth:`diagonals`)."""

    def bias(
        self,
        q_len: int,
        k_len: int,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """``[h, s_q, s_k]`` additive bias for queries at positions ``i`` and keys at ``j``.

        With ``[b, s]`` positions (one row per sequence of the batch) the bias is ``[b, h, s_q, s_k]``.
        With default positions the bias is constant along diagonals: it is formed on the ``s_q + s_k − 1``
        offsets and spread by :func:`~posenc.nn._diagonals.toeplitz`, whose gradient sums along diagonals
        (no atomic additions into the small table of a learned bias).
        """
        if q_positions is None and k_positions is None and q_len > 0 and k_len > 0:
            per_offset = self.diagonals(q_len, k_len, offset=offset, dtype=dtype, device=device)
            return toeplitz(per_offset, q_len, k_len)
        distance = relative_distances(
            q_len, k_len, q_positions=q_positions, k_positions=k_positions, offset=offset, device=device
        )
        return self._bias_from_distance(distance).to(dtype)

    def diagonals(
        self,
        q_len: int,
        k_len: int,
        *,
        offset: int = 0,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """``[h, s_q + s_k − 1]``: the bias of default positions per offset, ``bias[h, i, j] = diagonals[h,
        s_q − 1 + j − i]`` (what a FlexAttention ``score_mod`` reads instead of the ``[h, s_q, s_k]`` bias)."""
        start = query_start(q_len, k_len, check_offset(offset))
        check_end(offset + k_len)
        # diagonal m of the [s_q, s_k] bias holds key minus query position m − (s_q − 1) + offset − start
        distance = torch.arange(offset - start - (q_len - 1), offset - start + k_len, device=device)
        return self._bias_from_distance(distance[None]).squeeze(-2).to(dtype)

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The bias; with default positions also its :meth:`diagonals` (``[h, 2s − 1]``, formed again: they
        are what a FlexAttention ``score_mod`` reads, and the gradient must reach the table through them)."""
        context = super().context(length, positions=positions, dtype=dtype, device=device)
        if positions is not None or length < 1 or not self.by_offset:
            return context
        diagonals = self.diagonals(length, length, dtype=dtype, device=device)
        return dataclasses.replace(context, diagonals=diagonals)

    def _bias_from_distance(self, distance: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class ALiBiBias(AttentionBias):
    """Attention with linear biases (Press et al. 2022): score ``(i, j)`` of head ``h`` gets ``−m_h·|i − j|``.

    Press et al. write the causal case, ``−m_h·(i − j)`` for ``j ≤ i``; ``|i − j|`` is the same there
    and extends it symmetrically to bidirectional encoders. No parameters.

    Args:
        n_heads: number of heads; slopes from :func:`alibi_slopes`.
        alibi_bias_max: ``B`` of the slopes ``2^(−Bh/n)`` (8 in Press et al. and BLOOM; MPT's
            ``alibi_bias_max``).
    """

    def __init__(self, n_heads: int, *, alibi_bias_max: float = 8.0) -> None:
        super().__init__()
        self.n_heads = validate.positive_int("n_heads", n_heads)
        self.alibi_bias_max = validate.positive_float("alibi_bias_max", alibi_bias_max)
        self._slopes = alibi_slopes(
            self.n_heads, alibi_bias_max=self.alibi_bias_max
        )  # a float64 constant, not a buffer: .half() must not round it

    @property
    def slopes(self) -> torch.Tensor:
        """``[h]`` float64 head slopes ``m_h``."""
        return self._slopes.clone()

    def _bias_from_distance(self, distance: torch.Tensor) -> torch.Tensor:
        slopes = self._slopes.to(distance.device)
        return -slopes[:, None, None] * distance.abs().to(torch.float64).unsqueeze(-3)

    def extra_repr(self) -> str:
        return f"n_heads={self.n_heads}, alibi_bias_max={self.alibi_bias_max}"


def t5_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket of each relative position ``j − i`` (Raffel et al. 2020; Mesh TF / Hugging Face).

    Bidirectional: half the buckets for ``j − i > 0``, half for ``≤ 0``; causal: only ``j ≤ i``
    is distinguished (later keys share bucket 0). Within a half of ``n`` buckets, distances
    ``r < n/2`` get their own bucket and larger ones ``n/2 + ⌊log(r/(n/2)) / log(max_distance/(n/2))·(n/2)⌋``,
    capped at ``n − 1``. The logarithm is taken in float32, as both reference implementations do,
    so the bucket boundaries match theirs exactly.

    Args:
        relative_position: integer tensor of ``j − i`` (key minus query position).
    Returns a long tensor of the same shape with values in ``0 … num_buckets − 1``.
    """
    if relative_position.is_floating_point() or relative_position.is_complex():
        raise TypeError(f"T5 buckets need integer positions, got dtype {relative_position.dtype}")
    rel = relative_position.long()
    buckets = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (rel > 0).long() * num_buckets
        rel = rel.abs()
    else:
        rel = (-rel).clamp(min=0)
    max_exact = num_buckets // 2
    scaled = torch.log(rel.clamp(min=max_exact).float() / max_exact) / math.log(max_distance / max_exact)
    large = (max_exact + (scaled * (num_buckets - max_exact)).long()).clamp(max=num_buckets - 1)
    return buckets + torch.where(rel < max_exact, rel, large)


class T5RelativeBias(AttentionBias):
    """T5 relative attention bias (Raffel et al. 2020): a learned scalar per head and bucket of ``j − i``.

    Args:
        n_heads: number of heads.
        num_buckets: buckets (both directions together when ``bidirectional``); T5 uses 32.
        max_distance: distance beyond which all share the last bucket; T5 uses 128.
        bidirectional: encoder-style (``True``) or causal/decoder-style bucketing.
        init_std: standard deviation of the normal initialisation of the per-head scalars.

    Parameter ``relative_attention_bias.weight`` ``[num_buckets, h]`` (Hugging Face's name and shape).
    """

    def __init__(
        self,
        n_heads: int,
        *,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
        init_std: float = 0.02,
    ) -> None:
        super().__init__()
        self.n_heads = validate.positive_int("n_heads", n_heads)
        self.num_buckets = validate.positive_int("num_buckets", num_buckets)
        self.max_distance = validate.positive_int("max_distance", max_distance)
        if not isinstance(bidirectional, bool):
            raise TypeError(f"bidirectional must be a bool, got {bidirectional!r}")
        self.bidirectional = bidirectional
        exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
        if exact < 1:
            need = 4 if bidirectional else 2
            raise ValueError(
                f"num_buckets must be >= {need} (bidirectional={bidirectional}), got {num_buckets}"
            )
        if max_distance <= exact:
            raise ValueError(f"max_distance must exceed the {exact} exact buckets, got {max_distance}")
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.n_heads)
        nn.init.normal_(
            self.relative_attention_bias.weight, std=validate.positive_float("init_std", init_std)
        )

    def buckets(self, distance: torch.Tensor) -> torch.Tensor:
        """Bucket of each ``j − i`` under this module's settings (:func:`t5_bucket`)."""
        return t5_bucket(
            distance,
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )

    def _bias_from_distance(self, distance: torch.Tensor) -> torch.Tensor:
        # index_select on the [h, num_buckets] transpose gives a contiguous [h, ...] bias, and its backward
        # is an index_add (the Embedding lookup's backward sorts the s_q·s_k indices first)
        buckets = self.buckets(distance)
        table = self.relative_attention_bias.weight.t()
        return table.index_select(1, buckets.reshape(-1)).view(self.n_heads, *buckets.shape).movedim(0, -3)

    def extra_repr(self) -> str:
        return (
            f"n_heads={self.n_heads}, num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
            f"bidirectional={self.bidirectional}"
        )


class ShawRelativeBias(QueryBiasContract):
    """Relative position representations (Shaw et al. 2018): learned vectors for clipped ``j − i``.

    ``a^K_ij = w^K[clip(j − i, −k, k)]`` and ``a^V_ij = w^V[…]`` with ``k = max_distance``
    (eqs. 3–5), shared by all heads as in the paper::

        e_ij = q_i·(k_j + a^K_ij) / √d_h,     z_i = Σ_j α_ij (v_j + a^V_ij)

    Args:
        head_dim: ``d_h``, the width of the learned vectors.
        max_distance: clipping distance ``k``; ``2k + 1`` vectors are learned.
        on_values: also learn ``w^V`` and add the value term.
        init_std: standard deviation of the normal initialisation.

    Used by :class:`posenc.nn.MultiHeadAttention` through :meth:`score_term` (the slots
    :meth:`slot_scores` and the index :meth:`index`) and :meth:`attend`.
    """

    def __init__(
        self, head_dim: int, *, max_distance: int = 16, on_values: bool = False, init_std: float = 0.02
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.max_distance = validate.positive_int("max_distance", max_distance)
        if not isinstance(on_values, bool):
            raise TypeError(f"on_values must be a bool, got {on_values!r}")
        std = validate.positive_float("init_std", init_std)
        self.keys = nn.Parameter(torch.randn(2 * self.max_distance + 1, self.head_dim) * std)
        self.values = (
            nn.Parameter(torch.randn(2 * self.max_distance + 1, self.head_dim) * std) if on_values else None
        )

    @property
    def on_values(self) -> bool:
        """Whether the value term is learned and applied."""
        return self.values is not None

    def index(
        self,
        q_len: int,
        k_len: int,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
        offset: int = 0,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """``[s_q, s_k]`` long: row of ``w`` for each pair, ``clip(j − i, −k, k) + k``.

        ``[b, s_q, s_k]`` with ``[b, s]`` positions (one row per sequence of the batch).
        """
        distance = relative_distances(
            q_len, k_len, q_positions=q_positions, k_positions=k_positions, offset=offset, device=device
        )
        if distance.is_floating_point():
            raise TypeError(f"Shaw relative positions need integer positions, got dtype {distance.dtype}")
        return distance.clamp(-self.max_distance, self.max_distance) + self.max_distance

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The clipped-distance index; with default positions ``state`` holds its band's shift (``0``: key
        minus query position is ``j − i``), which lets the GPU paths sum along diagonals."""
        index = self.index(length, length, q_positions=positions, k_positions=positions, device=device)
        return PositionContext(index=index, state=0 if positions is None else None)

    def _band(self, context: PositionContext) -> tuple[int, int] | None:
        """``(k, shift)`` where the context's index is a band of diagonals (default positions), else ``None``."""
        if isinstance(context.state, int) and self._index(context).dim() == 2:
            return self.max_distance, context.state
        return None

    def score_term(self, q: torch.Tensor, k: torch.Tensor, context: PositionContext) -> ScoreTerm:
        """The key term ``q_i·a^K_ij``: :meth:`slot_scores` gathered by the index; with default positions
        a band (``clip(j − i, −k, k) + k``), which a FlexAttention ``score_mod`` reads from the slots and
        which, written out off the CPU, :func:`~posenc.nn._diagonals.band_gather` forms with a gradient
        summed along diagonals instead of scattered with atomics."""
        return ScoreTerm(slots=self.slot_scores(q), index=self._index(context), band=self._band(context))

    def combine_values(
        self, weights: torch.Tensor, v: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        """:meth:`attend` (:func:`posenc.backends.slots.attend`: for a band off the CPU the weights are summed
        per slot by :func:`~posenc.nn._diagonals.band_sum`, its gradient a gather, no atomics)."""
        if self.values is None:
            return weights @ v
        call = slot_backends.SlotCall(weights, self._index(context), self._band(context))
        return slot_backends.attend(weights, v, self.values.to(weights.dtype), call)

    def slot_scores(self, q: torch.Tensor) -> torch.Tensor:
        """``q·w^Kᵀ``, ``[…, s_q, 2k + 1]``: every query against every learned key vector; the key term
        ``q_i·a^K_ij`` (:meth:`key_scores`) gathers from it, ``2k + 1`` dot products per query."""
        return q @ self.keys.to(q.dtype).T

    def attend(self, weights: torch.Tensor, v: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``[b, h, s_q, d_h]`` ``z_i = Σ_j α_ij (v_j + a^V_ij)`` (eq. 3) for weights ``[b, h, s_q, s_k]``
        and values ``v [b, h, s_k, d_h]``; ``α·v`` without ``on_values``.

        The weights are summed per clipped distance into ``2k + 1`` slots and multiplied by ``w^V``
        once (:func:`~posenc.nn._slots.attend_with_slots`).
        """
        if self.values is None:
            return weights @ v
        return attend_with_slots(weights, v, self.values.to(weights.dtype), index)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, max_distance={self.max_distance}, on_values={self.on_values}"
