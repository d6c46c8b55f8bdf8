"""Attention with a positional score term: the written-out reference, and the fused kernels that may serve it.

One attention call (:class:`ScoreCall`) is ``softmax(q·kᵀ/√d_h + bias + term + mask)·v`` where ``bias`` is a
position-only additive bias (ALiBi, T5, … ``[(b,) h, s, s]``), ``term`` a query-dependent
:class:`~posenc.nn.contracts.ScoreTerm` (Shaw et al. 2018's key term, CoPE), and the mask hides padded keys
and, when causal, keys after the query. Backends, in order of preference:

``flex``
    FlexAttention (``torch.nn.attention.flex_attention``) with a ``score_mod`` that reads the *small*
    tables: T5-like biases per offset, ``diagonals[h, s − 1 + j − i]`` (``[h, 2s − 1]``), Shaw's slot scores
    ``slots[b, h, i, clip(j − i, −k, k) + k]`` (``[b, h, s, 2k + 1]``), and a block mask for causality and
    padding, so no ``[b, h, s, s]`` tensor is formed and causal blocks are skipped. Gradients reach the
    tables through FlexAttention's backward, which accumulates a captured tensor's gradient with atomic
    additions in float32 (``torch._inductor``'s ``zeros_and_scatter`` lowering). CUDA only: on the CPU
    torch 2.13 refuses FlexAttention's backward. Chosen where a gradient flows into the bias or the term
    (there SDPA leaves its flash kernel for a mask that needs a gradient), nothing needs the weights or
    dropout, and the heads are at least 16 wide (torch 2.13's CUDA kernels need that); float16,
    bfloat16 and float32. Two entries: eagerly FlexAttention compiled once with the causal block mask kept
    per length, and while ``torch.compile`` traces the same call inlined into the caller's graph.
``sdpa``
    ``scaled_dot_product_attention`` with the bias, the term (formed as ``[b, h, s, s]``) and the mask
    merged into one additive mask. Off CUDA only where no gradient flows through that mask (on the CPU the
    fused kernel would fall back to its general unfused form, slower than the reference).
``explicit``
    The reference: the scores written out, the bias and mask added in place, the term added
    (:meth:`~posenc.nn.contracts.ScoreTerm.add_to`), softmax, dropout, and the encoding's
    ``combine_values`` (Shaw's value term reads the weights). Serves every call.

A query whose every key is hidden outputs zeros on every backend.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F

from posenc.backends import Backend, Environment, select

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from posenc.nn.contracts import ScoreTerm


@dataclasses.dataclass(frozen=True)
class ScoreCall:
    """One attention call, as its backends read it.

    Attributes:
        q, k, v: ``[b, h, s, d_h]``; ``q`` already scaled by ``1/√d_h`` when ``q_scaled``, as it must be
            with a ``term`` (a score term is linear in ``q``: it is formed from the scaled queries).
        bias: additive bias broadcastable to ``[b, h, s, s]`` (the encoding's and the caller's), or ``None``.
        diagonals: the bias per offset ``[h, 2s − 1]`` (``bias[…, h, i, j] = diagonals[h, s − 1 + j − i]``)
            when that is all the bias is, else ``None``.
        term: the encoding's query-dependent term, or ``None``.
        key_padding_mask: ``[b or 1, s]`` bool, ``True`` = padding.
        causal: query ``i`` sees keys ``j ≤ i``.
        may_hide: whether a row's keys may all be hidden (padding, causality, a caller's bias).
        dropout: dropout probability on the weights.
        combine: ``(weights, v) → output``, the encoding's value hook (default ``weights·v``).
        needs_weights: whether ``combine`` needs the weights (no fused kernel returns them).
    """

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    q_scaled: bool = False
    bias: torch.Tensor | None = None
    diagonals: torch.Tensor | None = None
    term: ScoreTerm | None = None
    key_padding_mask: torch.Tensor | None = None
    causal: bool = False
    may_hide: bool = False
    dropout: float = 0.0
    combine: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    needs_weights: bool = False

    @property
    def scaled_q(self) -> torch.Tensor:
        """``q/√d_h``."""
        return self.q if self.q_scaled else self.q * self.q.shape[-1] ** -0.5

    def mask_needs_grad(self) -> bool:
        """Whether autograd asks for a gradient through the bias or the term (metadata only)."""
        if not torch.is_grad_enabled():
            return False
        tables = (self.bias, self.diagonals, None if self.term is None else self.term.slots)
        return any(t is not None and t.requires_grad for t in tables)


def additive_mask(
    bias: torch.Tensor | None,
    key_padding_mask: torch.Tensor | None,
    causal: bool,
    s: int,
    like: torch.Tensor,
    *,
    fused_causal: bool = True,
) -> torch.Tensor | None:
    """Merge a float bias ``[…, s, s]``, padding and causality into one additive mask (``−inf`` = hidden).

    ``None`` when nothing is hidden or biased, and, with ``fused_causal``, when causality is all there
    is to hide (the fused kernel's ``is_causal`` hides it then).
    """
    if key_padding_mask is None and bias is None and (fused_causal or not causal):
        return None
    if key_padding_mask is None and not causal:
        return bias
    mask = like.new_zeros(1, 1, s, s) if bias is None else bias
    if causal:
        future = torch.ones(s, s, dtype=torch.bool, device=like.device).triu(1)
        mask = mask.masked_fill(future, float("-inf"))
    if key_padding_mask is not None:
        mask = mask.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return mask


def explicit(call: ScoreCall) -> torch.Tensor:
    """The reference: ``softmax(q kᵀ/√d_h + mask + term)`` written out, then ``combine(weights, v)``.

    The mask is added in place and the term by :meth:`~posenc.nn.contracts.ScoreTerm.add_to`: the cheapest
    unfused form. With ``may_hide``, rows whose keys are all hidden get weight 0.
    """
    # heads contiguous once: every batched product below (and its backward) then runs without a copy
    q, k, v = call.scaled_q.contiguous(), call.k.contiguous(), call.v.contiguous()
    s = q.shape[-2]
    mask = additive_mask(call.bias, call.key_padding_mask, call.causal, s, q, fused_causal=False)
    scores = torch.matmul(q, k.transpose(-2, -1))
    if mask is not None:
        scores = scores.add_(mask)
    if call.term is not None:
        scores = call.term.add_to(scores)
    if call.may_hide:
        hidden = torch.isneginf(scores).all(dim=-1, keepdim=True)
        weights = torch.softmax(scores.masked_fill(hidden, 0.0), dim=-1).masked_fill(hidden, 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    weights = F.dropout(weights, p=call.dropout, training=call.dropout > 0)
    return weights @ v if call.combine is None else call.combine(weights, v)


def sdpa(call: ScoreCall) -> torch.Tensor:
    """``scaled_dot_product_attention`` with the bias, the term and the mask as one additive mask."""
    q, s = call.q, call.q.shape[-2]
    mask = additive_mask(call.bias, call.key_padding_mask, call.causal, s, q, fused_causal=call.term is None)
    if call.term is not None:  # the query-dependent term as the fused kernel's mask
        term = call.term.dense()
        mask = term if mask is None else mask + term
    out: torch.Tensor = F.scaled_dot_product_attention(
        q, call.k, call.v, attn_mask=mask, dropout_p=call.dropout, is_causal=call.causal and mask is None,
        scale=1.0 if call.q_scaled else None,
    )  # fmt: skip
    return out


def score_mod(
    diagonals: torch.Tensor | None, slots: torch.Tensor | None, band: tuple[int, int] | None, s_q: int
) -> Callable[..., torch.Tensor]:
    """FlexAttention's ``score_mod(score, b, h, i, j)``: ``score + diagonals[h, s_q − 1 + j − i]`` and/or
    ``+ slots[b, h, i, clip(j − i + shift, −k, k) + k]`` for ``band = (k, shift)``. Each table is indexed
    once (FlexAttention's backward accumulates a captured tensor's gradient from one indexing only)."""
    k, shift = (0, 0) if band is None else band

    def mod(
        score: torch.Tensor, b: torch.Tensor, h: torch.Tensor, i: torch.Tensor, j: torch.Tensor
    ) -> torch.Tensor:
        if diagonals is not None:
            score = score + diagonals[h, s_q - 1 + j - i]
        if slots is not None:
            score = score + slots[b, h, i, (j - i + shift).clamp(-k, k) + k]
        return score

    return mod


def _mask_mod(key_padding_mask: torch.Tensor | None, causal: bool) -> Callable[..., torch.Tensor]:
    """FlexAttention's ``mask_mod(b, h, i, j)``: ``True`` where key ``j`` is seen by query ``i``."""

    def visible(b: torch.Tensor, h: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        seen = j <= i if causal else j >= 0
        if key_padding_mask is not None:
            seen = seen & ~key_padding_mask[b, j]
        return seen

    return visible


def flex_attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    diagonals: torch.Tensor | None,
    slots: torch.Tensor | None,
    band: tuple[int, int] | None,
    block_mask: BlockMask | None,
) -> torch.Tensor:
    """``flex_attention`` of ``q`` (already scaled) with :func:`score_mod` over the tables and ``block_mask``.

    Eagerly compiled as a whole (:func:`_compiled_flex`): its inputs are then tensors and integers only, and
    the ``score_mod`` closure it builds never reaches the compiler's guards; while ``torch.compile`` traces,
    inlined into the caller's graph."""
    from torch.nn.attention.flex_attention import flex_attention

    mod = score_mod(diagonals, slots, band, q.shape[-2])
    out: torch.Tensor = flex_attention(q, k, v, score_mod=mod, block_mask=block_mask, scale=1.0)
    return out


@functools.cache
def _compiled_flex() -> Callable[..., torch.Tensor]:
    compiled: Callable[..., torch.Tensor] = torch.compile(flex_attend)
    return compiled


@functools.lru_cache(maxsize=8)
def _causal_block_mask(s: int, device: torch.device) -> BlockMask:
    """The causal block mask of ``s`` queries and keys, built once per length and device (eager calls)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(_mask_mod(None, True), None, None, s, s, device=device)


def _block_mask(call: ScoreCall, s: int, device: torch.device, *, cached: bool) -> BlockMask | None:
    """FlexAttention's block mask for causality and padding (``None``: every key seen); the causal mask
    without padding kept per length and device when ``cached`` (eager calls; a traced graph builds its own)."""
    from torch.nn.attention.flex_attention import create_block_mask

    pad = call.key_padding_mask
    if pad is None and not call.causal:
        return None
    if pad is None and cached:
        return _causal_block_mask(s, device)
    batch = None if pad is None else pad.shape[0]
    return create_block_mask(_mask_mod(pad, call.causal), batch, None, s, s, device=device)


def _flex(call: ScoreCall, kernel: Callable[..., torch.Tensor], *, cached: bool) -> torch.Tensor:
    """FlexAttention with a ``score_mod`` reading the small tables (:func:`score_mod`) and a block mask,
    run by ``kernel`` (:func:`flex_attend` or its compiled form)."""
    q = call.scaled_q
    term = call.term
    slots, band = (None, None) if term is None else (term.slots, term.band)
    block_mask = _block_mask(call, q.shape[-2], q.device, cached=cached)
    return kernel(q, call.k.contiguous(), call.v.contiguous(), call.diagonals, slots, band, block_mask)


def flex(call: ScoreCall) -> torch.Tensor:
    """:func:`_flex` eagerly: :func:`flex_attend` compiled once (eagerly FlexAttention forms the scores; its
    fused kernels come from the compiler), the causal block mask kept per length."""
    return _flex(call, _compiled_flex(), cached=True)


def flex_traced(call: ScoreCall) -> torch.Tensor:
    """:func:`_flex` while ``torch.compile`` traces: :func:`flex_attend` inlined, the block mask built in the graph."""
    return _flex(call, flex_attend, cached=False)


_FLEX_MIN_HEAD_DIM = 16  # torch 2.13's CUDA FlexAttention kernels: "embedding dimension … at least 16"


def _flex_supports(call: ScoreCall) -> bool:
    term = call.term
    banded_term = term is None or (term.band is not None and not term.reads_scores)
    banded_bias = call.bias is None or call.diagonals is not None
    has_table = call.diagonals is not None or term is not None
    return (
        has_table
        and call.q.shape[-1] >= _FLEX_MIN_HEAD_DIM
        and banded_term
        and banded_bias
        and not call.needs_weights
        and call.dropout == 0.0
        and call.mask_needs_grad()
    )


def _sdpa_supports(call: ScoreCall) -> bool:
    return not call.needs_weights and (call.term is None or not call.term.reads_scores)


def _sdpa_without_mask_grad(call: ScoreCall) -> bool:
    return _sdpa_supports(call) and not call.mask_needs_grad()


_EVERY_DEVICE = frozenset({"cpu", "cuda", "mps", "xpu", "hpu", "meta"})
_CUDA = frozenset({"cuda"})
_FLEX_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32})

BACKENDS: tuple[Backend[ScoreCall], ...] = (
    Backend("flex", flex, devices=_CUDA, dtypes=_FLEX_DTYPES, supports=_flex_supports),
    Backend(
        "flex",
        flex_traced,
        devices=_CUDA,
        dtypes=_FLEX_DTYPES,
        eager=False,
        compiled=True,
        supports=_flex_supports,
    ),
    # the fused kernels return a mask's gradient on CUDA; on the CPU SDPA would leave its fused kernel for
    # its general unfused one, slower than the reference, so there it serves masks without a gradient only
    Backend("sdpa", sdpa, devices=_CUDA, compiled=True, exported=True, supports=_sdpa_supports),
    Backend(
        "sdpa", sdpa, devices=_EVERY_DEVICE, compiled=True, exported=True, supports=_sdpa_without_mask_grad
    ),
    Backend("explicit", explicit, devices=_EVERY_DEVICE, compiled=True, exported=True),
)


def choose(call: ScoreCall) -> Backend[ScoreCall]:
    """The backend that serves ``call`` (:func:`posenc.backends.select` over :data:`BACKENDS`)."""
    return select(BACKENDS, call, Environment.of(call.q))


def attend(call: ScoreCall) -> torch.Tensor:
    """The attention output ``[b, h, s, d_h]`` of ``call``, by the backend :func:`choose` picks."""
    return cast(torch.Tensor, choose(call).apply(call))
