"""Self-supervised Transformer detectors built on :class:`posenc.nn.TransformerEncoder`.

Both read a window ``x[b, s, F]`` of one channel and that channel's id; the positional
encoding is the only thing that tells the encoder where each step is.

* ``"forecast"`` — predict the next ``horizon`` steps of the target features from the window
  (the telemanom setting, Hundman et al. 2018, with a Transformer instead of an LSTM): the
  output token of the **last** step goes through a linear head to ``[horizon, n_targets]``.
* ``"reconstruct"`` — masked-step reconstruction: masked steps have their features set to 0 and
  a mask-indicator input set to 1; every output token goes through a linear head to
  ``[n_targets]``; the loss is taken on masked steps only (as in masked time-series modelling,
  Zerveas et al. 2021, KDD).

Layout of one token before the encoder::

    input_projection([x_t, mask_t]) + channel_embedding[channel]     (mask_t only for "reconstruct")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from posenc import validate
from posenc.nn import TransformerEncoder
from posenc.nn.contracts import EncodingContract

DETECTORS = ("forecast", "reconstruct")


class SequenceDetector(nn.Module):
    """Windows ``[b, s, F]`` + channel ids ``[b]`` → forecasts ``[b, horizon, T]`` or reconstructions ``[b, s, T]``.

    Args:
        n_features: ``F``, input features per step.
        n_targets: ``T``, features predicted (telemanom: the telemetry value only).
        n_channels: number of channels (size of the channel-identity embedding).
        d_model, n_heads, n_layers: the encoder.
        kind: ``"forecast"`` or ``"reconstruct"`` (module docstring).
        horizon: steps forecast (``kind="forecast"``).
        encoding, encoding_options, dropout, max_len: passed to :class:`posenc.nn.TransformerEncoder`.
    """

    def __init__(
        self,
        n_features: int,
        n_targets: int,
        n_channels: int,
        d_model: int,
        n_heads: int,
        n_layers: int,
        *,
        kind: str = "forecast",
        horizon: int = 1,
        encoding: str | EncodingContract | None = "sinusoidal",
        encoding_options: Mapping[str, Any] | None = None,
        dropout: float = 0.1,
        max_len: int = 512,
    ) -> None:
        super().__init__()
        self.n_features = validate.positive_int("n_features", n_features)
        self.n_targets = validate.positive_int("n_targets", n_targets)
        validate.positive_int("n_channels", n_channels)
        self.kind = validate.choice("kind", kind, DETECTORS)
        self.horizon = validate.positive_int("horizon", horizon)
        # Created first, so under one torch seed its initial weights do not depend on the encoding.
        self.input_projection = nn.Linear(n_features + (kind == "reconstruct"), d_model)
        self.channel_embedding = nn.Embedding(n_channels, d_model)
        nn.init.normal_(self.channel_embedding.weight, std=0.02)
        self.encoder = TransformerEncoder(
            d_model,
            n_heads,
            n_layers,
            encoding=encoding,
            encoding_options=dict(encoding_options or {}),
            dropout=dropout,
            max_len=max_len,
        )
        out = n_targets * (horizon if kind == "forecast" else 1)
        self.head = nn.Linear(d_model, out)

    def forward(
        self, x: torch.Tensor, channel: torch.Tensor, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Forecasts ``[b, horizon, T]`` (``mask`` must be ``None``) or reconstructions ``[b, s, T]`` (``mask[b, s]`` bool)."""
        if x.ndim != 3 or x.shape[-1] != self.n_features:
            raise ValueError(f"x must have shape [b, s, n_features={self.n_features}], got {tuple(x.shape)}")
        if channel.shape != x.shape[:1]:
            raise ValueError(f"channel must have shape [b]={tuple(x.shape[:1])}, got {tuple(channel.shape)}")
        if self.kind == "reconstruct":
            if mask is None or mask.shape != x.shape[:2]:
                raise ValueError(
                    f"reconstruct needs mask of shape [b, s]={tuple(x.shape[:2])}, got "
                    f"{None if mask is None else tuple(mask.shape)}"
                )
            m = mask.unsqueeze(-1).to(x.dtype)
            x = torch.cat([x * (1 - m), m], dim=-1)
        elif mask is not None:
            raise ValueError("forecast takes no mask")
        h = self.encoder(self.input_projection(x) + self.channel_embedding(channel).unsqueeze(1))
        if self.kind == "forecast":
            return self.head(h[:, -1]).view(x.shape[0], self.horizon, self.n_targets)
        return self.head(h)
