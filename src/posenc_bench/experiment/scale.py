"""Scale policies for additive encodings and the seeded model they build.

An input encoding is summed with the model's tokens (the projected inputs of the transformer,
the CNN features of the spatio-temporal model), so its norm relative to theirs decides how much
it disturbs them: the sinusoidal row has norm ``√(d/2)``, the DFT row norm 1 (Idé, Labaien &
Chen 2024, eq. 21). To tell what an encoding *is* from how *large* it is, each additive
encoding runs under a policy (options of the input-encoding modules, ``out = x + scale·row/‖row‖``):

========  ===================================================  =================================
policy    encoding row added to the projected input            module options
========  ===================================================  =================================
native    as defined                                           ``{}``
unit      rescaled to norm 1                                   ``unit_norm=True``
matched   rescaled to ``m``, the mean norm of the tokens       ``unit_norm=True, scale=m``
          of the training inputs at initialisation
learned   ``a·row/‖row‖``, one trainable scalar ``a``, a₀ = 1  ``unit_norm=True, learn_scale=True``
========  ===================================================  =================================

Rotary and bias encodings have no additive scale; only ``native`` applies to them.
(``dfstrans_dft`` reads ``unit_norm=True, scale=m`` as "start at norm ``m``", then decays.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from posenc import registry
from posenc_bench.experiment.config import RunConfig
from posenc_bench.models import SpatioTemporalClassifier, TransformerClassifier

Classifier = TransformerClassifier | SpatioTemporalClassifier


def encoding_options(encoding: str, scale: str, *, matched_norm: float | None = None) -> dict[str, Any]:
    """Module options realising scale policy ``scale`` for ``encoding`` (see the module table)."""
    if scale == "native":
        return {}
    info = registry.get(encoding)
    if not info.scales:
        raise ValueError(
            f"scale policy {scale!r} applies to encodings registered with scales=True (additive input "
            f"encodings with unit_norm/scale options); {encoding!r} ({info.family}) has none: use scale 'native'"
        )
    if scale == "unit":
        return {"unit_norm": True}
    if scale == "learned":
        return {"unit_norm": True, "learn_scale": True, "scale": 1.0}
    if scale == "matched":
        if matched_norm is None or not np.isfinite(matched_norm) or matched_norm <= 0:
            raise ValueError(f"scale 'matched' needs a finite matched_norm > 0, got {matched_norm!r}")
        return {"unit_norm": True, "scale": float(matched_norm)}
    raise ValueError(f"scale must be one of native, unit, matched, learned; got {scale!r}")


@torch.no_grad()
def mean_projected_norm(model: Classifier, X: np.ndarray, *, batch_size: int = 1024) -> float:
    """Mean ‖token‖₂ of the tokens the encoding is added to, for instances ``X: [n, s, F]``.

    Transformer: ``project(x_t)`` per time step. Spatio-temporal: the CNN feature of each
    (window, sensor), with BatchNorm in training mode (batch statistics, as in training; the
    measuring model is a throw-away copy, so its running statistics do not matter).
    """
    if isinstance(model, SpatioTemporalClassifier):
        model.train()
        tokens = [
            model.features(torch.as_tensor(X[i : i + batch_size])) for i in range(0, len(X), batch_size)
        ]
    else:
        tokens = [model.project(torch.as_tensor(X[i : i + batch_size])) for i in range(0, len(X), batch_size)]
    return float(torch.cat([t.reshape(-1, t.shape[-1]) for t in tokens]).double().norm(dim=-1).mean())


def build_classifier(
    config: RunConfig, n_features: int, X_train: np.ndarray
) -> tuple[Classifier, dict[str, Any]]:
    """The classifier of ``config`` initialised under ``torch.manual_seed(config.seed)``, and its encoding options.

    For ``matched`` the model is first built with no encoding under the same seed to measure
    the token norm on ``X_train``; the input projection (transformer) or the CNN
    (spatio-temporal) is built first, so its initial weights are the same in both builds.
    """

    def build(encoding: str, options: dict[str, Any]) -> Classifier:
        torch.manual_seed(config.seed)
        if config.axes.model.spatiotemporal:
            return SpatioTemporalClassifier(
                n_features,
                n_windows=config.n_windows,
                window_length=config.window_length,
                d_model=config.d_model,
                n_heads=config.n_heads,
                encoding=encoding,
                encoding_options=options,
                dropout=config.dropout,
            )
        return TransformerClassifier(
            n_features,
            config.d_model,
            config.n_heads,
            config.n_layers,
            encoding=encoding,
            encoding_options=options,
            dropout=config.dropout,
            max_len=config.window,
        )

    norm = mean_projected_norm(build("none", {}), X_train) if config.scale == "matched" else None
    options = run_encoding_options(config, matched_norm=norm)
    return build(config.encoding, options), options


def run_encoding_options(config: RunConfig, *, matched_norm: float | None = None) -> dict[str, Any]:
    """``config.encoding_options`` with its scale policy's options (:func:`encoding_options`); a clash is refused."""
    policy = encoding_options(config.encoding, config.scale, matched_norm=matched_norm)
    clash = sorted(set(policy) & set(config.encoding_options))
    if clash:
        raise ValueError(
            f"encoding options {clash} are set by scale policy {config.scale!r}; drop them or use 'native'"
        )
    return {**config.encoding_options, **policy}
