"""Models built on :class:`posenc.nn.TransformerEncoder`.

``TransformerClassifier`` is the window classifier of the faithful-PE experiment (seed
``ide-*`` §5; SPEC §8): each time step's feature vector is projected to ``d_model``, the
encoder (with any registered positional encoding) mixes the time steps, the outputs are
**mean-pooled over time** and a linear head gives one logit per window.

Mean pooling is itself order-free, so whatever the model learns about order must come
through the positional encoding — the quantity the benchmark compares. With ``encoding="none"``
the whole classifier is invariant to permuting the time steps of a window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from posenc import _validate
from posenc.nn import TransformerEncoder


class TransformerClassifier(nn.Module):
    """Windows ``[b, s, F]`` → anomaly logits ``[b]``: projection → encoder → mean over time → linear.

    Args:
        n_features: ``F``, features per time step.
        d_model: model width.
        n_heads: attention heads (must divide ``d_model``).
        n_layers: encoder layers.
        encoding: registry name (``posenc.registry.names()``) or a module, passed to the encoder.
        encoding_options: keyword options of that encoding (e.g. ``{"scale": 2.0, "unit_norm": True}``).
        dropout: dropout inside the encoder.
        max_len: longest window the encoding must cover (learned tables are this long).
    """

    def __init__(
        self,
        n_features: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        *,
        encoding: str | nn.Module | None = "sinusoidal",
        encoding_options: Mapping[str, Any] | None = None,
        dropout: float = 0.1,
        max_len: int = 512,
    ) -> None:
        super().__init__()
        _validate.positive_int("n_features", n_features)
        self.n_features = n_features
        # Created first, so under one torch seed its initial weights do not depend on the encoding.
        self.input_projection = nn.Linear(n_features, d_model)
        self.encoder = TransformerEncoder(
            d_model, n_heads, n_layers, encoding=encoding,
            encoding_options=dict(encoding_options or {}), dropout=dropout, max_len=max_len,
        )
        self.head = nn.Linear(d_model, 1)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """The projected inputs ``[b, s, d_model]`` that the positional encoding is added to."""
        if x.ndim != 3 or x.shape[-1] != self.n_features:
            raise ValueError(
                f"x must have shape [b, s, n_features={self.n_features}], got {tuple(x.shape)}"
            )
        return self.input_projection(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[b]`` of windows ``x: [b, s, n_features]``."""
        return self.head(self.encoder(self.project(x)).mean(dim=1)).squeeze(-1)
