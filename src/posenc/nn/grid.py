"""Fixed n-D sinusoidal tables of image and video patch grids as torch tensors (MAE, timm, ViT-style).

The table is :func:`posenc.tables.sincos_nd` (angles in float64, one rounding to ``dtype``); this
module only hands it to torch, so the NumPy and torch tables are the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from posenc import tables


def sincos_nd(
    shape: Sequence[int],
    axis_dims: Sequence[int],
    *,
    base: float = tables.DEFAULT_BASE,
    layout: str = "per_axis",
    column_order: Sequence[int] | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``[Π shape, Σ axis_dims]``: :func:`posenc.tables.sincos_nd` (He et al. 2022, MAE) in ``dtype`` on ``device``."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    table = tables.sincos_nd(
        list(shape),
        list(axis_dims),
        base=base,
        layout=layout,
        column_order=None if column_order is None else list(column_order),
        dtype=np.float64,
    )
    return torch.from_numpy(table).to(device=device, dtype=dtype)
