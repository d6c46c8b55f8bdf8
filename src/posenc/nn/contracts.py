"""What attention may ask of an encoding: optional hooks, and one typed contract per family.

An encoding acts on attention through **hooks** of :class:`EncodingContract`; each has a default
that does nothing, so an encoding overrides only what it uses, and
:class:`~posenc.nn.attention.MultiHeadAttention` calls them without knowing families:

=======================  ============================================  ================================
hook                     acts on                                       used by
=======================  ============================================  ================================
``context``              positions only, once per forward (all layers)  every encoding inside attention
``transform_qk``         queries and keys                              rotary (:class:`RotaryContract`)
``score_bias``           the scores: a position-only additive bias     ALiBi, T5 (:class:`ScoreBiasContract`)
``score_term``           the scores: a term computed from ``q``        Shaw (:class:`QueryBiasContract`);
                         (and ``k``), as a :class:`ScoreTerm`          CoPE (:class:`ContextualContract`)
``combine_values``       the output from weights and values            Shaw on values (``needs_weights``)
=======================  ============================================  ================================

Input encodings (:class:`InputContract`) act on the tokens before the first layer instead.
The class attribute ``family`` names where an encoding acts for the registry and the analysis
(:mod:`posenc.registry` reads it from the class), so a new kind of encoding is one class and one
``register`` call. :meth:`EncodingContract.context` is the part of the work that depends on
positions only; the encoder calls it once per forward and hands the resulting
:class:`PositionContext` to every layer (as x-transformers hands its rotary tables).

Positions are ``[s]`` (shared by the batch) or ``[b, s]`` (left-padded batches, packed
sequences); the context then carries a leading batch dimension that attention broadcasts.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc.backends import slots as slot_backends
from posenc.errors import UsageError
from posenc.nn._slots import add_gathered_, gather_slots
from posenc.registry import EncodingView, Family


@dataclass(frozen=True)
class PositionContext:
    """What the positions of one forward contribute to attention, computed once for all layers.

    Attributes:
        cos_sin: rotary ``(cos, sin)``, each ``[s, r]`` (or ``[b, s, r]`` for batched positions).
        key_cos_sin: the keys' tables when they differ from the queries' (xPos scales the two
            inversely); ``None``: keys use ``cos_sin``.
        attn_bias: additive score bias ``[h, s, s]`` (or ``[b, h, s, s]``).
        diagonals: the same bias per offset, ``[h, 2s − 1]`` with ``attn_bias[h, i, j] = diagonals[h, s − 1
            + j − i]``, where it is constant along diagonals (default positions): what a FlexAttention
            ``score_mod`` reads instead of the ``[h, s, s]`` tensor.
        index: Shaw's clipped-distance rows ``[s, s]`` (or ``[b, s, s]``), long.
        state: any other encoding's own per-forward data, read back by its hooks.
    """

    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None
    key_cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None
    attn_bias: torch.Tensor | None = None
    diagonals: torch.Tensor | None = None
    index: torch.Tensor | None = None
    state: Any = None


@dataclass(frozen=True)
class ScoreTerm:
    """A score term that depends on the queries, in the forms attention's kernels read.

    Either **slots**: ``term[…, i, j] = slots[…, i, index[(b,) i, j]]``, a gather from a few values per
    query (Shaw et al. 2018, eq. 4: ``slots = q·w^Kᵀ``, ``[b, h, s_q, 2k + 1]``), with ``band = (k, shift)``
    when ``index[i, j] = clip(j − i + shift, −k, k) + k`` (default positions: a FlexAttention ``score_mod``
    then reads the slots, and no ``[b, h, s_q, s_k]`` tensor is formed); or **from_scores**: a function of
    the written-out scores ``q·kᵀ/√d_h + mask`` returning them plus the term (contextual encodings, e.g.
    CoPE, whose positions are counted from ``q·kᵀ``: no fused kernel serves them).
    """

    slots: torch.Tensor | None = None
    index: torch.Tensor | None = None
    band: tuple[int, int] | None = None
    from_scores: Callable[[torch.Tensor], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if (self.from_scores is None) == (self.slots is None or self.index is None):
            raise ValueError("a ScoreTerm holds either slots and their index, or from_scores")

    @property
    def reads_scores(self) -> bool:
        """Whether the term is computed from ``q·kᵀ`` (then the scores are written out)."""
        return self.from_scores is not None

    def _slot_call(self) -> slot_backends.SlotCall:
        if self.slots is None or self.index is None:
            raise ValueError("a term read from the scores has no slots")
        return slot_backends.SlotCall(self.slots, self.index, self.band)

    def dense(self) -> torch.Tensor:
        """The term as a ``[b, h, s_q, s_k]`` tensor (a fused kernel's mask); slots only
        (:func:`posenc.backends.slots.gather`)."""
        return slot_backends.gather(self._slot_call())

    def add_to(self, scores: torch.Tensor) -> torch.Tensor:
        """``scores [b, h, s_q, s_k]`` plus the term, in place where possible."""
        if self.from_scores is not None:
            return self.from_scores(scores)
        return slot_backends.add_gathered(scores, self._slot_call())


def refuse_tracing(module: nn.Module) -> None:
    """Raise when ``torch.jit.trace`` records ``module``: a trace freezes the sequence length into the
    graph (cached tables sliced to it, position checks), and the traced model would silently compute
    wrong results at any other length. ``torch.export`` and ``torch.compile`` follow the shapes."""
    if torch.jit.is_tracing():
        raise UsageError(
            f"torch.jit.trace cannot record {type(module).__name__} faithfully: its tables and position checks "
            "depend on the sequence length, which a trace freezes; use torch.export.export(model, (x,)) "
            "(with dynamic_shapes for other lengths) or torch.compile(model)"
        )


def _numpy(tensor: torch.Tensor) -> NDArray[np.float64]:
    return tensor.detach().to("cpu", torch.float64).numpy()


class EncodingContract(nn.Module, abc.ABC):
    """Base of every positional-encoding module: ``family`` says where it acts, the hooks how.

    Attention calls, per layer and in this order: :meth:`transform_qk`, :meth:`score_bias`, then —
    when :attr:`scores_qk` — :meth:`score_term`, and :meth:`combine_values`. Shapes: ``q, k, v [b, h, s,
    d_h]``, scores and weights ``[b, h, s_q, s_k]``.
    """

    family: ClassVar[Family]
    scores_qk: ClassVar[bool] = False
    """Whether the encoding adds a score term that depends on the queries (and keys): :meth:`score_term`."""

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The position-only work of one forward over ``length`` tokens (none for input encodings)."""
        return PositionContext()

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys as the scores see them (default: unchanged)."""
        return q, k

    def score_bias(self, context: PositionContext) -> torch.Tensor | None:
        """A position-only additive score bias ``[h, s, s]`` or ``[b, h, s, s]`` (default: the context's)."""
        return context.attn_bias

    def score_term(self, q: torch.Tensor, k: torch.Tensor, context: PositionContext) -> ScoreTerm:
        """The encoding's term of the scores ``q·kᵀ + mask`` (``q`` already scaled by ``1/√d_h``), as a
        :class:`ScoreTerm` each attention path can read. Called only when :attr:`scores_qk`."""
        raise NotImplementedError(f"{type(self).__name__} sets scores_qk but defines no score_term")

    @property
    def needs_weights(self) -> bool:
        """Whether :meth:`combine_values` needs the attention weights (which fused kernels never return)."""
        return False

    def combine_values(
        self, weights: torch.Tensor, v: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        """The attention output ``[b, h, s_q, d_h]`` for weights ``[b, h, s_q, s_k]`` (default ``weights·v``)."""
        return weights @ v

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        """Raise ``ValueError`` if this encoding was built for another attention shape."""

    @abc.abstractmethod
    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """This module as :mod:`posenc.analysis` measures it (NumPy arrays, no tensors)."""

    def _check_head_dim(self, head_dim: int) -> None:
        own = getattr(self, "head_dim", None)
        if own != head_dim:
            raise ValueError(
                f"encoding {type(self).__name__} has head_dim={own} but the attention has {head_dim}"
            )


class InputContract(EncodingContract):
    """An encoding added to (or concatenated with) the tokens ``[b, s, d_model]`` before the first layer.

    Implementations provide ``forward(x, *, positions=None)`` returning ``[b, s, out_features]``
    and ``table(length)``, the rows of positions ``0 … length−1``.
    """

    family: ClassVar[Family] = "input"

    @property
    @abc.abstractmethod
    def out_features(self) -> int:
        """Width of the encoded tokens (``d_model`` when added; more when concatenated)."""

    @abc.abstractmethod
    def table(
        self, length: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
    ) -> torch.Tensor:
        """``[length, dim]`` rows for positions ``0 … length−1`` (what :meth:`forward` adds)."""

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The rows :meth:`table` returns, as NumPy."""
        return EncodingView(name, self.family, dim, table=lambda n: _numpy(self.table(n)))


class RotaryContract(EncodingContract):
    """An encoding that rotates queries and keys ``[b, h, s, head_dim]`` by position-dependent angles."""

    family: ClassVar[Family] = "rotary"
    head_dim: int

    @abc.abstractmethod
    def cos_sin(
        self,
        length: int,
        *,
        positions: torch.Tensor | None = None,
        dtype: torch.dtype,
        device: torch.device | str | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` tables for ``length`` tokens at ``positions`` (default ``0 … length−1``)."""

    @abc.abstractmethod
    def rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``x [b, h, s, head_dim]`` rotated by precomputed tables from :meth:`cos_sin`."""

    def transform_qk(
        self, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``q`` rotated by the context's tables, ``k`` by the keys' (xPos) or the same."""
        if context.cos_sin is None:
            raise ValueError(f"{type(self).__name__}: the context holds no rotary tables (use its context())")
        k_cos, k_sin = context.cos_sin if context.key_cos_sin is None else context.key_cos_sin
        return self.rotate(q, *context.cos_sin), self.rotate(k, k_cos, k_sin)

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        return PositionContext(cos_sin=self.cos_sin(length, positions=positions, dtype=dtype, device=device))

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        self._check_head_dim(head_dim)

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """Rows ``R_t q`` for the all-ones probe ``q = 1/√2``: pair ``i`` gives ``⟨R_m q, R_n q⟩ ∋ cos((m−n)θ_i)``.

        The probe needs no knowledge of the layout; dimensions that are not rotated stay constant.
        """

        def table(n: int) -> NDArray[np.float64]:
            cos, sin = self.cos_sin(n, dtype=torch.float64, device="cpu")
            probe = torch.full((1, 1, n, self.head_dim), 2.0**-0.5, dtype=torch.float64)
            return _numpy(self.rotate(probe, cos, sin)[0, 0])

        return EncodingView(name, self.family, dim, table=table)


class ScoreBiasContract(EncodingContract):
    """An encoding that adds a query-independent ``[h, s_q, s_k]`` tensor to the attention scores."""

    family: ClassVar[Family] = "bias"
    n_heads: int

    @abc.abstractmethod
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
        """``[h, s_q, s_k]`` (``[b, h, s_q, s_k]`` for batched positions) additive score bias."""

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        bias = self.bias(
            length, length, q_positions=positions, k_positions=positions, dtype=dtype, device=device
        )
        return PositionContext(attn_bias=bias)

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        if self.n_heads != n_heads:
            raise ValueError(
                f"encoding {type(self).__name__} has n_heads={self.n_heads}, the attention {n_heads}"
            )

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """``bias(n, n)`` as NumPy ``[h, n, n]``."""
        return EncodingView(name, self.family, dim, bias=lambda n: _numpy(self.bias(n, n)))


class QueryBiasContract(EncodingContract):
    """A relative encoding whose score term depends on the query (Shaw et al. 2018, eqs. 3–5)."""

    family: ClassVar[Family] = "query_bias"
    scores_qk: ClassVar[bool] = True
    head_dim: int

    @property
    @abc.abstractmethod
    def on_values(self) -> bool:
        """Whether :meth:`attend` adds a value term to ``weights·v`` (it needs the weights)."""

    @abc.abstractmethod
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
        """Long ``[s_q, s_k]`` (or ``[b, s_q, s_k]``) index of each query/key pair."""

    @abc.abstractmethod
    def slot_scores(self, q: torch.Tensor) -> torch.Tensor:
        """``[…, s_q, n]`` unscaled: query ``i`` against each of the ``n`` learned vectors the index picks."""

    def key_scores(self, q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``[b, h, s_q, s_k]`` unscaled query-dependent score term: :meth:`slot_scores` gathered by
        ``index [(b,) s_q, s_k]`` (:func:`~posenc.nn._slots.gather_slots`)."""
        return gather_slots(self.slot_scores(q), index)

    def add_key_scores_(self, scores: torch.Tensor, q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """:meth:`key_scores` added to ``scores [b, h, s_q, s_k]`` in place, as it is gathered
        (:func:`~posenc.nn._slots.add_gathered_`); returns ``scores``."""
        return add_gathered_(scores, self.slot_scores(q), index)

    @abc.abstractmethod
    def attend(self, weights: torch.Tensor, v: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``[b, h, s_q, head_dim]`` attention output for weights ``[b, h, s_q, s_k]`` and values
        ``v [b, h, s_k, head_dim]``: ``weights·v``, plus the value term when :attr:`on_values`."""

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        index = self.index(length, length, q_positions=positions, k_positions=positions, device=device)
        return PositionContext(index=index)

    def _index(self, context: PositionContext) -> torch.Tensor:
        if context.index is None:
            raise ValueError(f"{type(self).__name__}: the context holds no index (use its context())")
        return context.index

    def score_term(self, q: torch.Tensor, k: torch.Tensor, context: PositionContext) -> ScoreTerm:
        """The key term ``q_i·a^K_ij``: :meth:`slot_scores` gathered by the context's index."""
        return ScoreTerm(slots=self.slot_scores(q), index=self._index(context))

    @property
    def needs_weights(self) -> bool:
        """The value term needs the weights: :attr:`on_values`."""
        return self.on_values

    def combine_values(
        self, weights: torch.Tensor, v: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        """:meth:`attend`: ``weights·v`` plus the value term when :attr:`on_values`."""
        return self.attend(weights, v, self._index(context))

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        self._check_head_dim(head_dim)

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """The key term ``q·a_ij/√d_h`` for one fixed random probe query ``q ~ N(0, I)``, ``[1, n, n]``."""
        probe = torch.randn(self.head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        weight = next(self.parameters(), torch.empty(0))

        def bias(n: int) -> NDArray[np.float64]:
            q = probe.to(weight.dtype).expand(1, 1, n, self.head_dim)
            scores: NDArray[np.float64] = _numpy(self.key_scores(q, self.index(n, n))[0]) / np.sqrt(
                self.head_dim
            )
            return scores

        return EncodingView(
            name,
            self.family,
            dim,
            bias=bias,
            notes={"view": f"the key term q·a(clip(j-i))/sqrt(d_h) for one random probe query (seed {seed})"},
        )


class ContextualContract(EncodingContract):
    """An encoding whose positions are computed from the queries and keys (e.g. CoPE, Golovneva et al. 2024).

    Subclasses implement :meth:`add_scores_`, which receives ``scores = q·kᵀ/√d_h + mask`` together with
    ``q`` (scaled) and ``k``, and may override :meth:`combine_values`; their :meth:`score_term` reads the
    scores, so attention always writes them out (no fused kernel sees ``q·kᵀ`` before the softmax).
    """

    family: ClassVar[Family] = "contextual"
    scores_qk: ClassVar[bool] = True

    @abc.abstractmethod
    def add_scores_(
        self, scores: torch.Tensor, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        """``scores`` plus the term of positions computed from ``q`` and ``k``."""

    def score_term(self, q: torch.Tensor, k: torch.Tensor, context: PositionContext) -> ScoreTerm:
        """:meth:`add_scores_` as a term read from the written-out scores."""
        return ScoreTerm(from_scores=lambda scores: self.add_scores_(scores, q, k, context))

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        self._check_head_dim(head_dim)
