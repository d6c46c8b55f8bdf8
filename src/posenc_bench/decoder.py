"""A causal decoder over tokens built from posenc's encoder: the model of ``--task lengthgen``.

``tokens [b, s] → embedding [b, s, d] → posenc.nn.TransformerEncoder(causal) → logits [b, s, V]``:
the pre-LN blocks, attention and every registered encoding are posenc's own, so the decoder
differs from the benchmark's classifier only in its input (token ids) and output (next token).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from posenc.nn import TransformerEncoder


class CausalDecoder(nn.Module):
    """Next-token decoder ``[b, s] → [b, s, vocab]`` with any registered encoding.

    Args:
        vocab: token ids ``0 … vocab − 1``.
        d_model, n_heads, n_layers: sizes of the :class:`posenc.nn.TransformerEncoder`.
        encoding, encoding_options: a registry name and its constructor options.
        max_len: the longest training sequence (sizes tables; FIRE's threshold ``L``).
        encoder_options: further keyword arguments of the encoder (e.g. ``no_rope_layers``).
    """

    def __init__(
        self,
        vocab: int,
        *,
        d_model: int,
        n_heads: int,
        n_layers: int,
        encoding: str | None,
        encoding_options: dict[str, Any] | None = None,
        max_len: int = 64,
        encoder_options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, d_model)
        self.encoder = TransformerEncoder(
            d_model,
            n_heads,
            n_layers,
            encoding=encoding,
            encoding_options=encoding_options,
            max_len=max_len,
            **(encoder_options or {}),
        )
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor, *, positions: torch.Tensor | None = None) -> torch.Tensor:
        """``[b, s]`` int64 tokens → ``[b, s, vocab]`` logits of each next token (causal)."""
        hidden = self.encoder(self.embedding(tokens), causal=True, positions=positions)
        logits: torch.Tensor = self.head(hidden)
        return logits
