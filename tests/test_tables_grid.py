"""2-D and 3-D sinusoidal tables (posenc.tables.sincos_nd, posenc.nn.grid.sincos_nd) against the peers' builders.

MAE's ``get_2d_sincos_pos_embed`` (facebookresearch/mae, util/pos_embed.py) and timm's
``build_sincos2d_pos_embed`` (timm/layers/pos_embed_sincos.py) are transcribed below: MAE is not a
package, and timm cannot be installed here (its torchvision requirement replaces the CPU torch build
with a CUDA one), so its test against the installed timm skips with that reason.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc import tables
from posenc.nn import grid


def mae_1d(embed_dim: int, pos: np.ndarray) -> np.ndarray:
    omega = np.arange(embed_dim // 2, dtype=np.float64)
    omega /= embed_dim / 2.0
    omega = 1.0 / 10000**omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_2d(embed_dim: int, grid_hw: tuple[int, int]) -> np.ndarray:
    grid_h = np.arange(grid_hw[0], dtype=np.float32)
    grid_w = np.arange(grid_hw[1], dtype=np.float32)
    g = np.meshgrid(grid_w, grid_h)  # w goes first
    g = np.stack(g, axis=0).reshape([2, 1, grid_hw[0], grid_hw[1]])
    emb_h = mae_1d(embed_dim // 2, g[0])
    emb_w = mae_1d(embed_dim // 2, g[1])
    return np.concatenate([emb_h, emb_w], axis=1)


def mae_3d(embed_dim: int, t: int, hw: tuple[int, int]) -> np.ndarray:
    """The 3-D form of MAE-ST / CogVideoX: a quarter of the columns for time, then MAE's 2-D."""
    temporal = mae_1d(embed_dim // 4, np.arange(t, dtype=np.float32))
    spatial = mae_2d(embed_dim // 4 * 3, hw)
    return np.concatenate([np.repeat(temporal, hw[0] * hw[1], axis=0), np.tile(spatial, (t, 1))], axis=1)


def timm_2d(feat_shape: list[int], dim: int, interleave_sin_cos: bool = False) -> torch.Tensor:
    pos_dim = dim // 4
    bands = 1.0 / (10000.0 ** (torch.arange(0, pos_dim, 1, dtype=torch.int64).to(torch.float32) / pos_dim))
    g = torch.stack(torch.meshgrid([torch.arange(s).to(torch.float32) for s in feat_shape], indexing="ij"))
    g = g.flatten(1).transpose(0, 1)
    pos2 = g.unsqueeze(-1) * bands.unsqueeze(0)
    stack_dim = 2 if interleave_sin_cos else 1
    return torch.stack([torch.sin(pos2), torch.cos(pos2)], dim=stack_dim).flatten(1)


@pytest.mark.parametrize("hw", [(14, 14), (6, 10)])
def test_2d_table_equals_mae(hw):
    ours = tables.sincos_nd(hw, (32, 32), column_order=(1, 0))
    np.testing.assert_allclose(ours, mae_2d(64, hw), rtol=0, atol=1e-15)


def test_3d_table_equals_mae_st():
    ours = tables.sincos_nd((4, 6, 10), (16, 24, 24), column_order=(0, 2, 1))
    np.testing.assert_allclose(ours, mae_3d(64, 4, (6, 10)), rtol=0, atol=1e-15)


@pytest.mark.parametrize("interleave", [False, True])
def test_2d_table_equals_timm(interleave):
    ours = grid.sincos_nd(
        (6, 10), (32, 32), layout="per_axis" if interleave else "sin_cos", dtype=torch.float64
    )
    theirs = timm_2d([6, 10], 64, interleave_sin_cos=interleave)
    assert (ours - theirs.double()).abs().max() < 5e-6  # timm's float32 angles, up to 9·ω
    assert torch.equal(
        ours.float(), grid.sincos_nd((6, 10), (32, 32), layout="per_axis" if interleave else "sin_cos")
    )


def test_installed_timm_if_any():
    timm_sincos = pytest.importorskip(
        "timm.layers.pos_embed_sincos",
        reason="timm cannot be installed here: it requires torchvision, whose wheel replaces the CPU torch",
    )
    theirs = timm_sincos.build_sincos2d_pos_embed([6, 10], dim=64)
    ours = grid.sincos_nd((6, 10), (32, 32), layout="sin_cos")
    assert (ours - theirs).abs().max() < 5e-6


def test_torch_table_is_the_numpy_table():
    table = tables.sincos_nd((3, 4, 5), (4, 6, 6), layout="sin_cos", dtype=np.float32)
    assert torch.equal(grid.sincos_nd((3, 4, 5), (4, 6, 6), layout="sin_cos"), torch.from_numpy(table))


def test_bad_grids_are_refused_naming_the_parameter():
    with pytest.raises(ValueError, match="axis_dims must all be even"):
        tables.sincos_nd((4, 4), (31, 33))
    with pytest.raises(ValueError, match="axis_dims must give one column count per axis"):
        tables.sincos_nd((4, 4), (32,))
    with pytest.raises(ValueError, match="column_order must be a permutation"):
        tables.sincos_nd((4, 4), (8, 8), column_order=(0, 0))
    with pytest.raises(ValueError, match="layout must be one of"):
        tables.sincos_nd((4, 4), (8, 8), layout="interleaved")
    with pytest.raises(TypeError, match="dtype must be a floating torch.dtype"):
        grid.sincos_nd((4, 4), (8, 8), dtype=torch.int64)
