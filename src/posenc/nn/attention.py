"""Multi-head attention and a pre-LN Transformer encoder that take any registered encoding.

An encoding acts through the hooks of :class:`~posenc.nn.contracts.EncodingContract`, and attention
calls them without knowing the encoding's family. Its position-only work — rotary cos/sin, an
additive bias, Shaw's index — is a :class:`~posenc.nn.contracts.PositionContext` computed **once
per forward** by the encoder and shared by every layer (as x-transformers shares its rotary tables).
Per layer:

1. ``q, k ← enc.transform_qk(q, k, context)`` (rotary);
2. ``bias ← enc.score_bias(context)`` joins the caller's ``attn_bias`` (ALiBi, T5), with its per-offset
   form ``context.diagonals`` where it has one;
3. an encoding with ``scores_qk`` gives its query-dependent term, ``enc.score_term(q, k, context)``, as a
   :class:`~posenc.nn.contracts.ScoreTerm` (Shaw's slots, CoPE's function of the scores);
4. ``enc.combine_values(α, v, context)`` forms the output where the weights are written out (Shaw's
   value term).

One backend then computes the attention (:mod:`posenc.backends.scores`, chosen by
:func:`posenc.backends.select`): FlexAttention with a ``score_mod`` that reads the small per-offset and
slot tables where a gradient flows into them (CUDA); ``scaled_dot_product_attention`` with one additive
mask where a fused kernel serves; otherwise the scores written out (the weights needed, a term read from
``q·kᵀ``, or a learned mask on the CPU, where the fused kernel would fall back to its general unfused
form). The encodings form the written-out terms so that their own gradient needs no atomic additions
(:mod:`posenc.nn._diagonals`).

With ``[b, s]`` positions (left-padded batches, packed sequences) each context entry gains a leading
batch dimension, broadcast against ``[b, h, s, s]`` scores.

The encoding is bound to :class:`MultiHeadAttention` at construction and checked there once.
One encoding module is shared by all layers (as T5 shares its bias table); the encoder owns it,
so ``state_dict()`` holds it once, under ``encoding.``.

Masks: ``key_padding_mask [b, s]`` (``True`` = padding, never attended to) and ``causal``
(query ``i`` sees keys ``j ≤ i``). A query whose every key is masked outputs zeros, on every backend.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import torch
from torch import nn

from posenc import validate
from posenc.backends import scores as score_backends
from posenc.backends.scores import ScoreCall
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
        call = ScoreCall(
            q,
            k,
            v,
            bias=_check_attn_bias(attn_bias, b, self.n_heads, s),
            key_padding_mask=key_padding_mask,
            causal=causal,
            may_hide=key_padding_mask is not None or causal or attn_bias is not None,
            dropout=self.dropout if self.training else 0.0,
        )
        out = score_backends.attend(call if self.encoding is None else _encoded(call, self.encoding, context))
        result: torch.Tensor = self.out(out.transpose(1, 2).reshape(b, s, self.d_model))
        return result


def _encoded(call: ScoreCall, enc: EncodingContract, context: PositionContext) -> ScoreCall:
    """``call`` with the encoding's hooks applied: queries and keys transformed, its bias joined to the
    caller's (with its per-offset form where the caller adds none), its score term formed from the scaled
    queries, and its value hook."""
    q, k = enc.transform_qk(call.q, call.k, context)
    bias = enc.score_bias(context)
    diagonals = context.diagonals if call.bias is None else None
    if bias is not None:
        bias = bias if bias.dim() == 4 else bias[None]
        bias = bias if call.bias is None else call.bias + bias
    term = None
    if enc.scores_qk:  # its term is linear in q: scale q [b, h, s, d_h], not a [b, h, s, s] term
        # contiguous once: the term's product and the scores' then save the same tensor for the backward
        q = (q * q.shape[-1] ** -0.5).contiguous()
        term = enc.score_term(q, k, context)
    combine = functools.partial(enc.combine_values, context=context)
    return dataclasses.replace(
        call,
        q=q,
        k=k,
        q_scaled=term is not None,
        bias=call.bias if bias is None else bias,
        diagonals=diagonals if bias is not None else None,
        term=term,
        combine=combine,
        needs_weights=enc.needs_weights,
    )


def _layer_indices(name: str, value: Sequence[int], n_layers: int) -> tuple[int, ...]:
    """``value`` as sorted distinct layer indices in ``0 … n_layers − 1``, else raise naming ``name``."""
    if isinstance(value, str) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise TypeError(f"{name} must be a sequence of layer indices (ints), got {value!r}")
    bad = [i for i in value if not 0 <= i < n_layers]
    if bad:
        raise ValueError(f"{name} must hold layer indices in 0…{n_layers - 1}, got {bad}")
    return tuple(sorted(set(value)))


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
