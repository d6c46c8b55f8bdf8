"""Anomaly classifiers built from :mod:`posenc.nn` parts.

``TransformerClassifier`` is a window classifier for comparing encodings (the time-series
classification task of Idé, Labaien & Chen 2024, §5): each time step's feature vector is projected to ``d_model``, the
encoder (with any registered positional encoding) mixes the time steps, the outputs are
**mean-pooled over time** and a linear head gives one logit per window.

Mean pooling is itself order-free, so whatever the model learns about order must come
through the positional encoding — the quantity the benchmark compares. With ``encoding="none"``
the whole classifier is invariant to permuting the time steps of a window.

``SpatioTemporalClassifier`` is the model those authors actually used (Labaien et al. 2023,
DFStrans): a per-sensor CNN per window, attention across windows and across sensors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from posenc import validate
from posenc.nn import MultiHeadAttention, TransformerEncoder, build_encoding
from posenc.nn.contracts import EncodingContract, InputContract


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
        encoding: str | EncodingContract | None = "sinusoidal",
        encoding_options: Mapping[str, Any] | None = None,
        dropout: float = 0.1,
        max_len: int = 512,
    ) -> None:
        super().__init__()
        validate.positive_int("n_features", n_features)
        self.n_features = n_features
        # Created first, so under one torch seed its initial weights do not depend on the encoding.
        self.input_projection = nn.Linear(n_features, d_model)
        self.encoder = TransformerEncoder(
            d_model,
            n_heads,
            n_layers,
            encoding=encoding,
            encoding_options=dict(encoding_options or {}),
            dropout=dropout,
            max_len=max_len,
        )
        self.head = nn.Linear(d_model, 1)

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """The projected inputs ``[b, s, d_model]`` that the positional encoding is added to."""
        if x.ndim != 3 or x.shape[-1] != self.n_features:
            raise ValueError(f"x must have shape [b, s, n_features={self.n_features}], got {tuple(x.shape)}")
        return self.input_projection(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[b]`` of windows ``x: [b, s, n_features]``."""
        return self.head(self.encoder(self.project(x)).mean(dim=1)).squeeze(-1)

    def encoding_row_norm(self, steps: int) -> float:
        """Mean ‖row‖₂ that the input encoding adds now to windows of ``steps`` time steps; NaN for other families."""
        encoder = self.encoder
        return added_row_norm(encoder.encoding if encoder.family == "input" else None, steps)


class _MaxPool2(nn.Module):
    """``MaxPool1d(2)`` on ``[n, c, l]`` (odd ``l`` drops the last step) as a reshape and a max: faster on CPU."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, length = x.shape
        return x[..., : length - length % 2].reshape(n, c, length // 2, 2).amax(dim=-1)


def _conv_block(channels_in: int, channels_out: int, groups: int) -> list[nn.Module]:
    """Conv1d (k = 5, same length) → ReLU → max-pool 2 → BatchNorm, every group (sensor) with its own weights."""
    return [
        nn.Conv1d(channels_in, channels_out, 5, padding=2, groups=groups),
        nn.ReLU(),
        _MaxPool2(),
        nn.BatchNorm1d(channels_out),
    ]


class SpatioTemporalClassifier(nn.Module):
    """Multivariate segments ``[b, n_windows·window_length, n_sensors]`` → anomaly logits ``[b]``.

    The DFStrans architecture of Labaien et al. (2023), batched::

        x [b, W·L, F] → windows [b, W, L, F]
        per-sensor CNN: 3 × (Conv1d k=5 → ReLU → MaxPool 2 → BatchNorm), its own weights per sensor
                      → h [b, W, F, d]      d = channels · ⌊L/8⌋
        positional encoding on the window axis W (input: added to h; rotary/bias: in temporal attention)
        temporal: attention across windows, per sensor     [b·F, W, d] → LN(h + Attn(h))
        spatial:  attention across sensors, per window     [b·W, F, d] → LN(h + Attn(h))   (no encoding)
        z = temporal + spatial;  z = LN(z + FF(z));  mean over W → [b, F·d] → Linear·ReLU·Linear → logit

    The published code loops over sensors and windows with one attention layer per sensor and per
    window; here one temporal and one spatial layer are shared, and both run as single batched
    ``scaled_dot_product_attention`` calls. The CNN keeps per-sensor weights (grouped convolutions).

    Args:
        n_sensors: ``F``, features (sensors) per time step.
        n_windows: ``W``, windows per segment (the positions the encoding sees).
        window_length: ``L``, time steps per window (at least 8: three poolings by 2).
        d_model: feature width ``d`` per (window, sensor); a multiple of ``⌊L/8⌋`` (the CNN has
            ``d / ⌊L/8⌋`` channels). The paper: ``L = 100``, 20 channels, ``d = 240``.
        n_heads: attention heads (divide ``d_model``).
        encoding, encoding_options: a registered encoding on the window axis and its options.
        dropout: dropout on the residual branches, the feed-forward block and the head (not on the
            attention weights, which would take SDPA off its fused kernel; the paper also drops those).
        dim_feedforward: feed-forward width (default ``4·d_model``; the paper 2048).
        head_hidden: hidden units of the head (the paper 512).
    """

    def __init__(
        self,
        n_sensors: int,
        *,
        n_windows: int = 8,
        window_length: int = 16,
        d_model: int = 16,
        n_heads: int = 2,
        encoding: str | EncodingContract | None = "sinusoidal",
        encoding_options: Mapping[str, Any] | None = None,
        dropout: float = 0.1,
        dim_feedforward: int | None = None,
        head_hidden: int = 64,
    ) -> None:
        super().__init__()
        self.n_sensors = validate.positive_int("n_sensors", n_sensors)
        self.n_windows = validate.positive_int("n_windows", n_windows)
        self.window_length = validate.positive_int("window_length", window_length)
        reduced = self.window_length // 8
        if reduced == 0:
            raise ValueError(
                f"window_length must be >= 8: the CNN halves it three times (k=5, max-pool 2), so "
                f"window_length={window_length} leaves 0 features per channel"
            )
        self.d_model = validate.positive_int("d_model", d_model)
        if self.d_model % reduced:
            raise ValueError(
                f"d_model must be a multiple of window_length // 8 = {reduced} (d_model = CNN channels × "
                f"{reduced}), got d_model={d_model} with window_length={window_length}"
            )
        channels = self.d_model // reduced
        hidden = (
            4 * self.d_model
            if dim_feedforward is None
            else validate.positive_int("dim_feedforward", dim_feedforward)
        )
        F, d = self.n_sensors, self.d_model
        self.cnn = nn.Sequential(
            *_conv_block(F, F * channels, F),
            *_conv_block(F * channels, F * channels, F),
            *_conv_block(F * channels, F * channels, F),
        )
        self.encoding = build_encoding(
            encoding, d_model=d, n_heads=n_heads, max_len=self.n_windows, **dict(encoding_options or {})
        )
        self.family = "none" if self.encoding is None else self.encoding.family
        width = self.encoding.out_features if isinstance(self.encoding, InputContract) else d
        self.input_projection = nn.Linear(width, d) if width != d else None
        inside = None if self.family in ("none", "input") else self.encoding
        # no dropout on the attention weights: it forces SDPA off its fused CPU kernel (residual branches keep it)
        self.temporal = MultiHeadAttention(d, n_heads, encoding=inside, own_encoding=False)
        self.spatial = MultiHeadAttention(d, n_heads)
        self.temporal_norm, self.spatial_norm, self.out_norm = (
            nn.LayerNorm(d),
            nn.LayerNorm(d),
            nn.LayerNorm(d),
        )
        self.feedforward = nn.Sequential(
            nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, d)
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Sequential(
            nn.Linear(F * d, head_hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(head_hidden, 1)
        )

    @property
    def segment_length(self) -> int:
        """Time steps per instance: ``n_windows · window_length``."""
        return self.n_windows * self.window_length

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """CNN features ``[b, n_windows, n_sensors, d_model]`` of segments ``x [b, W·L, F]``."""
        if x.ndim != 3 or x.shape[1] != self.segment_length or x.shape[2] != self.n_sensors:
            raise ValueError(
                f"x must have shape [b, n_windows·window_length = {self.n_windows}·{self.window_length} = "
                f"{self.segment_length}, n_sensors={self.n_sensors}], got {tuple(x.shape)}"
            )
        b, W, L, F = x.shape[0], self.n_windows, self.window_length, self.n_sensors
        windows = x.reshape(b, W, L, F).permute(0, 1, 3, 2).reshape(b * W, F, L)  # sensors as conv groups
        h = self.cnn(windows)  # [b·W, F·channels, ⌊L/8⌋], group f holds sensor f's channels
        return h.reshape(b, W, F, self.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[b]`` of segments ``x: [b, n_windows·window_length, n_sensors]``."""
        h = self.features(x)
        b, W, F, d = h.shape
        per_sensor = h.transpose(1, 2).reshape(b * F, W, d)  # tokens = windows of one sensor
        if isinstance(self.encoding, InputContract):
            per_sensor = self.encoding(per_sensor)
            if self.input_projection is not None:
                per_sensor = self.input_projection(per_sensor)
        temporal = self.temporal_norm(per_sensor + self.dropout(self.temporal(per_sensor)))
        per_window = per_sensor.reshape(b, F, W, d).transpose(1, 2).reshape(b * W, F, d)  # tokens = sensors
        spatial = self.spatial_norm(per_window + self.dropout(self.spatial(per_window)))
        z = temporal.reshape(b, F, W, d).transpose(1, 2) + spatial.reshape(b, W, F, d)
        z = self.out_norm(z + self.dropout(self.feedforward(z)))
        return self.head(z.mean(dim=1).reshape(b, F * d)).squeeze(-1)

    def encoding_row_norm(self, steps: int | None = None) -> float:
        """Mean Euclidean norm of the rows an input encoding adds now (over the ``n_windows`` positions); NaN otherwise.

        ``steps`` (time steps per instance) is accepted for symmetry with
        :meth:`TransformerClassifier.encoding_row_norm`; the positions are always the windows.
        """
        return added_row_norm(self.encoding if self.family == "input" else None, self.n_windows)


def added_row_norm(encoding: nn.Module | None, length: int) -> float:
    """Mean over positions ``0 … length−1`` of ‖row‖₂ that the input encoding ``encoding`` adds; NaN for ``None``.

    Reads the encoding's current table (:meth:`posenc.nn.input.InputEncoding.table`, scale applied),
    so an encoding whose table changes while training (``dfstrans_dft``) reports its present state.
    """
    if not isinstance(encoding, InputContract):
        return float("nan")
    with torch.no_grad():
        return float(encoding.table(length).double().norm(dim=-1).mean())
