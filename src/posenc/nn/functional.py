"""Functional core shared by every PyTorch encoding: exact sin/cos of ``positions ⊗ frequencies``.

Angles ``t·w`` are formed in float64 and only the finished sin/cos are cast (SPEC §1,
"Precision"): in float32 the angle at ``t = 10^6`` is already off by ~0.06 rad.
"""

from __future__ import annotations

import torch


def sincos(
    positions: torch.Tensor, frequencies: torch.Tensor, *, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin(t ⊗ w), cos(t ⊗ w))``, each ``[s, f]``, computed from float64 angles, returned in ``dtype``.

    Args:
        positions: ``[s]`` positions (any real dtype; promoted to float64).
        frequencies: ``[f]`` angular frequencies (promoted to float64).
        dtype: dtype of the returned tensors.
    """
    a = torch.outer(positions.to(torch.float64), frequencies.to(torch.float64))
    return torch.sin(a).to(dtype), torch.cos(a).to(dtype)
