"""Reordering query/key projections between the rotary pair layouts (Su et al. 2021, RoFormer).

``adjacent`` checkpoints (Meta LLaMA, GPT-J, RoFormer) keep pair ``i`` of a head in rows ``2i``, ``2i + 1``;
``half_split`` ones (Hugging Face, GPT-NeoX) in rows ``i``, ``i + r/2`` (:mod:`posenc.nn.rotary`).
"""

from __future__ import annotations

import numpy as np
import torch

from posenc import spectrum, validate
from posenc.backends.rotate import LAYOUTS

_SINUSOIDAL_LAYOUT = {"adjacent": "interleaved", "half_split": "split"}
"""Rotary pair layouts are the sinusoidal column layouts with ``(a_i, b_i)`` in place of ``(sin_i, cos_i)``."""


def permute_rotary_weights(
    weight: torch.Tensor, *, n_heads: int, src: str, dst: str, rotary_dim: int | None = None
) -> torch.Tensor:
    """Reorder the output rows of a query or key projection from pair layout ``src`` to ``dst``.

    ``weight`` is ``[n_heads·d_h, d_in]`` (an ``nn.Linear`` weight) or ``[n_heads·d_h]`` (its bias).
    Within each head, row ``2i`` / ``2i+1`` of an ``adjacent`` checkpoint (Meta LLaMA, GPT-J, RoFormer)
    holds the coordinates ``a_i`` / ``b_i`` that ``half_split`` (Hugging Face, GPT-NeoX) keeps in rows
    ``i`` / ``i + r/2``; rows ``r … d_h − 1`` (partial rotary) stay. Rotating the permuted projection
    in ``dst`` gives the same attention scores as rotating the original in ``src`` (the score sums
    over pairs, which are only renamed). ``adjacent → half_split`` is the permutation of Hugging
    Face's LLaMA conversion script (``permute``: ``view(h, d_h/2, 2, d_in).transpose(1, 2)``).
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() not in (1, 2):
        got = list(weight.shape) if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"weight must be a [n_heads·head_dim, d_in] or [n_heads·head_dim] tensor, got {got}")
    n_heads = validate.positive_int("n_heads", n_heads)
    validate.choice("src", src, LAYOUTS)
    validate.choice("dst", dst, LAYOUTS)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight has {rows} rows, not a multiple of n_heads={n_heads}")
    head_dim = rows // n_heads
    r = spectrum.rotary_dim(head_dim, rotary_dim)
    in_head = np.arange(head_dim)
    in_head[:r] = spectrum.layout_permutation(r, _SINUSOIDAL_LAYOUT[src], _SINUSOIDAL_LAYOUT[dst])
    order = torch.from_numpy((np.arange(n_heads)[:, None] * head_dim + in_head[None]).reshape(-1))
    return weight.index_select(0, order.to(weight.device))
