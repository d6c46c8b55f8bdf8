"""Multi-head attention and a pre-LN Transformer encoder that take any registered encoding.

An encoding acts through the hooks of :class:`~posenc.nn.contracts.EncodingContract`, and attention
calls them without knowing the encoding's family. Its position-only work — rotary cos/sin, an
additive bias, Shaw's index — is a :class:`~posenc.nn.contracts.PositionContext` computed **once
per forward** by the encoder and shared by every layer (as x-transformers shares its rotary tables).
Per layer:

1. ``q, k ← enc.transform_qk(q, k, context)`` (rotary);
2. ``bias ← enc.score_bias(context)`` joins the additive mask with padding and causality (ALiBi, T5);
3. an encoding with ``scores_qk`` adds its term to the scores: written out with
   ``enc.add_scores_`` when it has no ``score_term`` (contextual encodings), when ``enc.needs_weights``,
   or on the CPU when a gradient flows through it; otherwise ``enc.score_term(q, context)`` joins the
   fused kernel's mask (Shaw on keys);
4. ``enc.combine_values(α, v, context)`` forms the output where the weights are written out (Shaw's
   value term); otherwise ``scaled_dot_product_attention`` does.

A mask that needs a gradient (T5 while training, Shaw's key term) goes to the fused kernel on CUDA,
whose memory-efficient form returns the mask's gradient; on the CPU it is written out, as the fused
kernel would fall back to its general unfused form there. The encodings form such terms so that their
own gradient needs no atomic additions (:mod:`posenc.nn._diagonals`).

With ``[b, s]`` positions (left-padded batches, packed sequences) each context entry gains a leading
batch dimension, broadcast against ``[b, h, s, s]`` scores.

The encoding is bound to :class:`MultiHeadAttention` at construction and checked there once.
One encoding module is shared by all layers (as T5 shares its bias table); the encoder owns it,
so ``state_dict()`` holds it once, under ``encoding.``.

Masks: ``key_padding_mask [b, s]`` (``True`` = padding, never attended to) and ``causal``
(query ``i`` sees keys ``j ≤ i``). A query whose every key is masked outputs zeros, on every path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from posenc import validate
from posenc.nn.build import build_encoding, head_dim
from posenc.nn.contracts import EncodingContract, InputContract, PositionContext, refuse_tracing


def _attention_encoding(
    encoding: EncodingContract | None, *, n_heads: int, head_dim: int
) -> EncodingContract | None:
    """Check that ``encoding`` acts inside attention and was built for this head shape."""
    if encoding is None:
        return None
    if not isinstance(encoding, EncodingContract):
        raise TypeError(
            f"encoding must be a positional-encoding module (posenc.nn.contracts), got {type(encoding).__name__}"
        )
    if encoding.family == "input":
        raise TypeError(f"{type(encoding).__name__} acts on the input tokens; give it to TransformerEncoder")
    encoding.check_attention(n_heads=n_heads, head_dim=head_dim)
    return encoding


def _check_padding(key_padding_mask: torch.Tensor | None, b: int, s: int) -> None:
    if key_padding_mask is None:
        return
    if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
        got = (
            key_padding_mask.dtype
            if isinstance(key_padding_mask, torch.Tensor)
            else type(key_padding_mask).__name__
        )
        raise TypeError(f"key_padding_mask must be a bool tensor [b, s] (True = padding), got {got}")
    shape = tuple(key_padding_mask.shape)
    if len(shape) != 2 or shape[0] not in (1, b) or shape[1] != s:
        raise ValueError(
            f"key_padding_mask must have shape [b={b} or 1, s={s}] (True = padding), got {list(shape)}"
        )


def _check_attn_bias(attn_bias: torch.Tensor | None, b: int, h: int, s: int) -> torch.Tensor | None:
    if attn_bias is None:
        return None
    if not isinstance(attn_bias, torch.Tensor) or not attn_bias.is_floating_point():
        got = attn_bias.dtype if isinstance(attn_bias, torch.Tensor) else type(attn_bias).__name__
        raise TypeError(f"attn_bias must be a float tensor broadcastable to [b, h, s, s], got {got}")
    try:
        torch.broadcast_shapes(attn_bias.shape, (b, h, s, s))
    except RuntimeError:
        raise ValueError(
            f"attn_bias must broadcast to [b={b}, h={h}, s={s}, s={s}], got {list(attn_bias.shape)}"
        ) from None
    return attn_bias


def _additive_mask(
    scores_bias: torch.Tensor | None,
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
    if key_padding_mask is None and scores_bias is None and (fused_causal or not causal):
        return None
    if key_padding_mask is None and not causal:
        return scores_bias
    mask = like.new_zeros(1, 1, s, s) if scores_bias is None else scores_bias
    if causal:
        future = torch.ones(s, s, dtype=torch.bool, device=like.device).triu(1)
        mask = mask.masked_fill(future, float("-inf"))
    if key_padding_mask is not None:
        mask = mask.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    return mask


def _explicit_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout: float,
    *,
    may_hide: bool,
    encoding: EncodingContract | None = None,
    context: PositionContext | None = None,
) -> torch.Tensor:
    """``softmax(q kᵀ + mask) v`` written out, for ``q`` already scaled by ``1/√d_h``.

    With an ``encoding`` (and its ``context``) its ``add_scores_`` adds its term to the scores when it
    has ``scores_qk``, and its ``combine_values`` forms the output. With ``may_hide`` (the mask may hold
    ``−inf``), rows whose keys are all hidden get weight 0. The mask is added in place: the cheapest
    unfused form, used where a fused kernel cannot serve (the weights, or the mask's gradient, needed).
    """
    # heads contiguous once: every batched product below (and its backward) then runs without a copy
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    scores = torch.matmul(q, k.transpose(-2, -1))
    if mask is not None:
        scores = scores.add_(mask)
    if encoding is not None and context is not None and encoding.scores_qk:
        scores = encoding.add_scores_(scores, q, k, context)
    if may_hide:
        hidden = torch.isneginf(scores).all(dim=-1, keepdim=True)
        weights = torch.softmax(scores.masked_fill(hidden, 0.0), dim=-1).masked_fill(hidden, 0.0)
    else:
        weights = torch.softmax(scores, dim=-1)
    weights = F.dropout(weights, p=dropout, training=dropout > 0)
    if encoding is not None and context is not None:
        return encoding.combine_values(weights, v, context)
    return weights @ v


def _grad_needed(*tensors: torch.Tensor | None, module: nn.Module | None = None) -> bool:
    """Whether autograd will ask for a gradient through any of ``tensors`` or ``module``'s parameters."""
    if not torch.is_grad_enabled():
        return False
    params = () if module is None else module.parameters()
    return any(t is not None and t.requires_grad for t in (*tensors, *params))


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention ``[b, s, d] → [b, s, d]`` with an optional positional encoding.

    Args:
        d_model: model width ``d``; ``n_heads`` must divide it.
        n_heads: number of heads ``h``; ``d_h = d/h``.
        encoding: a rotary, bias or query-bias module (input encodings belong to the encoder),
            checked once here against ``n_heads`` and ``d_h``.
        own_encoding: register ``encoding`` as a submodule (its parameters are this module's). The
            encoder passes ``False``: it owns the one module that all its layers share.
        dropout: dropout on the attention weights (training only).
        bias: whether the projections have biases.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        encoding: EncodingContract | None = None,
        own_encoding: bool = True,
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.head_dim = head_dim(d_model, n_heads)
        self.d_model, self.n_heads = d_model, n_heads
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        self.dropout = float(dropout)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        bound = _attention_encoding(encoding, n_heads=n_heads, head_dim=self.head_dim)
        if own_encoding:
            self.encoding = bound
        else:  # a reference, not a submodule: the owner's state_dict holds it once
            self.__dict__["encoding"] = bound
        self.family = "none" if bound is None else bound.family

    def context(self, x: torch.Tensor, *, positions: torch.Tensor | None = None) -> PositionContext:
        """The bound encoding's :class:`PositionContext` for tokens ``x [b, s, d]`` (empty without one)."""
        if self.encoding is None:
            return PositionContext()
        return self.encoding.context(x.shape[1], positions=positions, dtype=x.dtype, device=x.device)

    def forward(
        self,
        x: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        positions: torch.Tensor | None = None,
        context: PositionContext | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Attend over ``x [b, s, d]``.

        Args:
            key_padding_mask: ``[b, s]`` bool, ``True`` = padding (never attended to).
            causal: hide keys after the query.
            positions: ``[s]`` or ``[b, s]`` token positions for the encoding (default ``0 … s−1``);
                used only when ``context`` is not given.
            context: the encoding's :meth:`context`, computed once by the caller for all layers;
                ``None`` computes it here.
            attn_bias: further additive float scores bias broadcastable to ``[b, h, s, s]``.
        """
        refuse_tracing(self)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be [b, s, d_model={self.d_model}], got {list(x.shape)}")
        b, s, _ = x.shape
        _check_padding(key_padding_mask, b, s)
        if context is None:
            context = self.context(x, positions=positions)
        elif positions is not None:
            raise ValueError(
                "give positions or a precomputed context, not both (the context holds the positions)"
            )
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        scores_bias = _check_attn_bias(attn_bias, b, self.n_heads, s)
        enc = self.encoding
        if enc is not None:
            q, k = enc.transform_qk(q, k, context)
            bias = enc.score_bias(context)
            if bias is not None:
                bias = _batched(bias)
                scores_bias = bias if scores_bias is None else scores_bias + bias
        scorer = enc if enc is not None and enc.scores_qk else None
        p = self.dropout if self.training else 0.0
        may_hide = key_padding_mask is not None or causal or attn_bias is not None
        scale = 1.0 / math.sqrt(self.head_dim)
        if scorer is not None:  # its term is linear in q: scale q [b, h, s, d_h], not a [b, h, s, s] term
            q = q * scale
        # a score term joins the mask later (the scores, or the fused kernel's mask): causality goes in too
        mask = _additive_mask(scores_bias, key_padding_mask, causal, s, q, fused_causal=scorer is None)
        # on CUDA the fused kernel returns a mask's gradient; on the CPU a learned mask is written out
        fused_grad = q.device.type == "cuda"
        term = None
        if (
            scorer is not None
            and not scorer.needs_weights
            and (fused_grad or not _grad_needed(q, mask, module=scorer))
        ):
            term = scorer.score_term(q, context)  # None: it needs q·kᵀ (contextual), written out below
        if enc is not None and (enc.needs_weights or (scorer is not None and term is None)):
            # the value term needs the weights; the score term its gradient, or q·kᵀ itself: written out
            q = q if scorer is not None else q * scale
            out = _explicit_attention(q, k, v, mask, p, may_hide=may_hide, encoding=enc, context=context)
        elif scorer is None and not fused_grad and _grad_needed(mask):
            # a learned mask (T5) on the CPU: scaled_dot_product_attention would leave its fused kernel for
            # its general unfused one to return the mask's gradient; the lean explicit form is faster
            out = _explicit_attention(q * scale, k, v, mask, p, may_hide=may_hide)
        else:
            if term is not None:  # the query-dependent term as the fused kernel's mask
                mask = term if mask is None else mask + term
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal and mask is None,
                scale=None if scorer is None else 1.0,
            )  # fmt: skip
        result: torch.Tensor = self.out(out.transpose(1, 2).reshape(b, s, self.d_model))
        return result


def _layer_indices(name: str, value: Sequence[int], n_layers: int) -> tuple[int, ...]:
    """``value`` as sorted distinct layer indices in ``0 … n_layers − 1``, else raise naming ``name``."""
    if isinstance(value, str) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise TypeError(f"{name} must be a sequence of layer indices (ints), got {value!r}")
    bad = [i for i in value if not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"{name} must hold layer indices in 0…{n_layers - 1}, got {bad}")
    return tuple(sorted(set(value)))


def _batched(bias: torch.Tensor) -> torch.Tensor:
    """A context bias ``[h, s, s]`` or ``[b, h, s, s]`` as a 4-D tensor broadcastable to the scores."""
    return bias if bias.dim() == 4 else bias[None]


class TransformerEncoderLayer(nn.Module):
    """Pre-LN layer: ``x + Attn(LN(x))``, then ``x + FF(LN(x))`` with ``FF = Linear·GELU·Linear``.

    Args:
        d_model, n_heads: width and heads (``n_heads`` divides ``d_model``).
        encoding, own_encoding: the attention-side encoding, as :class:`MultiHeadAttention`.
        dim_feedforward: hidden width of the feed-forward block (default ``4·d_model``).
        dropout: dropout on attention weights and on both residual branches.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        encoding: EncodingContract | None = None,
        own_encoding: bool = True,
        dim_feedforward: int | None = None,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        hidden = (
            4 * d_model
            if dim_feedforward is None
            else validate.positive_int("dim_feedforward", dim_feedforward)
        )
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention(
            d_model, n_heads, encoding=encoding, own_encoding=own_encoding, dropout=dropout
        )
        self.norm2 = nn.LayerNorm(d_model)
        self.feedforward = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        positions: torch.Tensor | None = None,
        context: PositionContext | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[b, s, d] → [b, s, d]``; arguments as :meth:`MultiHeadAttention.forward`."""
        a = self.attention(
            self.norm1(x),
            key_padding_mask=key_padding_mask,
            causal=causal,
            positions=positions,
            context=context,
            attn_bias=attn_bias,
        )
        x = x + self.dropout(a)
        out: torch.Tensor = x + self.dropout(self.feedforward(self.norm2(x)))
        return out


class TransformerEncoder(nn.Module):
    """A stack of pre-LN layers with a final LayerNorm and any registered encoding.

    Args:
        d_model, n_heads, n_layers: sizes (``n_heads`` divides ``d_model``).
        encoding: a registered name (:func:`posenc.nn.available_encodings`), a module, or ``None``.
        encoding_options: constructor options of the named encoding (:func:`posenc.nn.build_encoding`).
        dim_feedforward: feed-forward width (default ``4·d_model``).
        dropout: dropout on attention weights, residual branches and the encoded input.
        max_len: longest sequence planned for; sizes learned tables and caches.
        no_rope_layers: indices of layers whose attention runs without the encoding (NoPE layers
            interleaved with encoded ones, as Llama 4 and SmolLM3 do with rotary); attention-side
            encodings only.

    An input encoding is applied once to ``x``; when it widens the tokens (``out_features >
    d_model``, concat mode) a linear ``input_projection`` maps back to ``d_model``. Any other
    encoding is bound to every layer's attention, which consumes the position context the
    encoder computes once per forward. ``.encoding`` is the module (or ``None``).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        n_layers: int,
        *,
        encoding: str | EncodingContract | None = "sinusoidal",
        encoding_options: dict[str, object] | None = None,
        dim_feedforward: int | None = None,
        dropout: float = 0.0,
        max_len: int = 512,
        no_rope_layers: Sequence[int] = (),
    ) -> None:
        super().__init__()
        self.d_model = d_model
        n_layers = validate.positive_int("n_layers", n_layers)
        self.no_rope_layers = _layer_indices("no_rope_layers", no_rope_layers, n_layers)
        self.encoding = build_encoding(
            encoding, d_model=d_model, n_heads=n_heads, max_len=max_len, **(encoding_options or {})
        )
        self.family = "none" if self.encoding is None else self.encoding.family
        inside = None if self.family in ("none", "input") else self.encoding
        if self.no_rope_layers and inside is None:
            raise ValueError(
                f"no_rope_layers applies to encodings that act inside attention, not to {self.family!r} ones"
            )
        width = self.encoding.out_features if isinstance(self.encoding, InputContract) else d_model
        self.input_projection = nn.Linear(width, d_model) if width != d_model else None
        self.input_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(
                d_model,
                n_heads,
                encoding=None if i in self.no_rope_layers else inside,
                own_encoding=False,
                dim_feedforward=dim_feedforward,
                dropout=dropout,
            )
            for i in range(n_layers)
        )
        self.norm = nn.LayerNorm(d_model)

    def forward(
        self,
        x: torch.Tensor,
        *,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``[b, s, d_model] → [b, s, d_model]``.

        Args:
            key_padding_mask: ``[b, s]`` bool, ``True`` = padding (ignored as keys).
            causal: every position attends only to itself and earlier positions.
            positions: ``[s]`` positions of the tokens (default ``0 … s−1``), for every encoding; the
                encodings acting inside attention (rotary, biases, Shaw) also take ``[b, s]``, one row
                per sequence (left-padded batches, packed sequences).
        """
        refuse_tracing(self)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be [b, s, d_model={self.d_model}], got {list(x.shape)}")
        if isinstance(self.encoding, InputContract):
            x = self.encoding(x, positions=positions)
            if self.input_projection is not None:
                x = self.input_projection(x)
        x = self.input_dropout(x)
        context = PositionContext()  # computed once, used by every layer
        if self.encoding is not None and not isinstance(self.encoding, InputContract):
            context = self.encoding.context(x.shape[1], positions=positions, dtype=x.dtype, device=x.device)
        for layer in self.layers:
            x = layer(x, key_padding_mask=key_padding_mask, causal=causal, context=context)
        out: torch.Tensor = self.norm(x)
        return out
