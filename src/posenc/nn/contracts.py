"""One typed contract per encoding family: what the encoder and attention may ask of an encoding.

An encoding acts in exactly one place, named by its class attribute ``family``:

============  =====================================  =========================================
family        contract                               what the stack asks of it
============  =====================================  =========================================
input         :class:`InputContract`                 ``x ← enc(x, positions=…)`` once, on tokens
rotary        :class:`RotaryContract`                ``cos, sin ← enc.cos_sin(…)`` once per
                                                     forward; ``enc.rotate(q|k, cos, sin)`` per layer
bias          :class:`ScoreBiasContract`             ``enc.bias(s, s, …)`` ``[h, s, s]`` once per forward
query_bias    :class:`QueryBiasContract`             ``enc.index(s, s, …)`` once per forward;
                                                     ``key_scores`` / ``attend`` per layer
============  =====================================  =========================================

The registry (:mod:`posenc.registry`) reads ``family`` from the class, so a new encoding
declares where it acts once, by subclassing. :meth:`EncodingContract.context` is the part of
the work that depends on positions only; the encoder calls it once per forward and hands the
resulting :class:`PositionContext` to every layer (as x-transformers hands its rotary tables).

Positions are ``[s]`` (shared by the batch) or ``[b, s]`` (left-padded batches, packed
sequences); the context then carries a leading batch dimension that attention broadcasts.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc.registry import EncodingView, Family


@dataclass(frozen=True)
class PositionContext:
    """What the positions of one forward contribute to attention, computed once for all layers.

    Attributes:
        cos_sin: rotary ``(cos, sin)``, each ``[s, r]`` (or ``[b, s, r]`` for batched positions).
        key_cos_sin: the keys' tables when they differ from the queries' (xPos scales the two
            inversely); ``None``: keys use ``cos_sin``.
        attn_bias: additive score bias ``[h, s, s]`` (or ``[b, h, s, s]``).
        index: Shaw's clipped-distance rows ``[s, s]`` (or ``[b, s, s]``), long.
    """

    cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None
    key_cos_sin: tuple[torch.Tensor, torch.Tensor] | None = None
    attn_bias: torch.Tensor | None = None
    index: torch.Tensor | None = None


def _numpy(tensor: torch.Tensor) -> NDArray[np.float64]:
    return tensor.detach().to("cpu", torch.float64).numpy()


class EncodingContract(nn.Module, abc.ABC):
    """Base of every positional-encoding module: ``family`` says where it acts."""

    family: ClassVar[Family]

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        """The position-only work of one forward over ``length`` tokens (none for input encodings)."""
        return PositionContext()

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
    def key_scores(self, q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``[b, h, s_q, s_k]`` unscaled query-dependent score term."""

    def add_key_scores_(self, scores: torch.Tensor, q: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """:meth:`key_scores` added to ``scores [b, h, s_q, s_k]`` in place; returns ``scores``.
        Override where the term can be added without a temporary of the scores' size."""
        return scores.add_(self.key_scores(q, index))

    @abc.abstractmethod
    def attend(self, weights: torch.Tensor, v: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """``[b, h, s_q, head_dim]`` attention output for weights ``[b, h, s_q, s_k]`` and values
        ``v [b, h, s_k, head_dim]``: ``weights·v``, plus the value term when :attr:`on_values`."""

    def context(
        self, length: int, *, positions: torch.Tensor | None, dtype: torch.dtype, device: torch.device
    ) -> PositionContext:
        index = self.index(length, length, q_positions=positions, k_positions=positions, device=device)
        return PositionContext(index=index)

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
