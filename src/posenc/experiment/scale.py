"""Scale policies for additive encodings (issue 6 §1) and the seeded model they build.

An input encoding is summed with the projected inputs, so its norm relative to theirs
decides how much it disturbs them: the sinusoidal row has norm ``√(d/2)``, the DFT row
norm 1 (SPEC §4). To tell what an encoding *is* from how *large* it is, each additive
encoding runs under a policy (options of the input-encoding modules, ``out = x + scale·row/‖row‖``):

========  ===================================================  =================================
policy    encoding row added to the projected input            module options
========  ===================================================  =================================
native    as defined                                           ``{}``
unit      rescaled to norm 1                                   ``unit_norm=True``
matched   rescaled to ``m``, the mean norm of the projected    ``unit_norm=True, scale=m``
          training inputs at initialisation
learned   ``a·row/‖row‖``, one trainable scalar ``a``, a₀ = 1  ``unit_norm=True, learn_scale=True``
========  ===================================================  =================================

Rotary and bias encodings have no additive scale; only ``native`` applies to them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from posenc import registry
from posenc.experiment.config import RunConfig
from posenc.models import TransformerClassifier


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
def mean_projected_norm(model: TransformerClassifier, X: np.ndarray, *, batch_size: int = 1024) -> float:
    """Mean over windows and time steps of ``‖project(x_t)‖₂`` for windows ``X: [n, s, F]``."""
    total = 0.0
    for i in range(0, len(X), batch_size):
        total += float(model.project(torch.as_tensor(X[i : i + batch_size])).norm(dim=-1).double().sum())
    return total / (len(X) * X.shape[1])


def build_classifier(
    config: RunConfig, n_features: int, X_train: np.ndarray
) -> tuple[TransformerClassifier, dict[str, Any]]:
    """The classifier of ``config`` initialised under ``torch.manual_seed(config.seed)``, and its encoding options.

    For ``matched`` the projection is first built alone under the same seed to measure the
    norm on ``X_train``; the input projection is the classifier's first module, so its
    initial weights are the same in both builds.
    """

    def build(encoding: str, options: dict[str, Any]) -> TransformerClassifier:
        torch.manual_seed(config.seed)
        return TransformerClassifier(
            n_features, config.d_model, config.n_heads, config.n_layers, encoding=encoding,
            encoding_options=options, dropout=config.dropout, max_len=config.window,
        )

    norm = mean_projected_norm(build("none", {}), X_train) if config.scale == "matched" else None
    options = run_encoding_options(config, matched_norm=norm)
    return build(config.encoding, options), options


def run_encoding_options(config: RunConfig, *, matched_norm: float | None = None) -> dict[str, Any]:
    """``config.encoding_options`` with its scale policy's options (:func:`encoding_options`); a clash is refused."""
    policy = encoding_options(config.encoding, config.scale, matched_norm=matched_norm)
    clash = sorted(set(policy) & set(config.encoding_options))
    if clash:
        raise ValueError(f"encoding options {clash} are set by scale policy {config.scale!r}; drop them or use 'native'")
    return {**config.encoding_options, **policy}
