"""Independent float64 references that several test files compare posenc against."""

from __future__ import annotations

import torch

F64 = torch.float64


def reference_rotary(x: torch.Tensor, positions: torch.Tensor, *, layout: str, rotary_dim: int, base: float):
    """Independent float64 RoPE: Hugging Face ``rotate_half`` (half_split) or GPT-J ``rotate_every_two`` (adjacent)."""
    r = rotary_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, r, 2, dtype=F64) / r))
    angles = positions.to(F64)[:, None] * inv_freq[None, :]  # [s, r/2]
    x_rot, x_pass = x[..., :r].to(F64), x[..., r:].to(F64)
    if layout == "half_split":  # HF: emb = cat(freqs, freqs); rotate_half = cat(-x2, x1)
        emb = torch.cat([angles, angles], dim=-1)
        x1, x2 = x_rot[..., : r // 2], x_rot[..., r // 2 :]
        turned = torch.cat([-x2, x1], dim=-1)
    else:  # GPT-J: sin/cos repeat_interleave(2); rotate_every_two = stack(-x[1::2], x[0::2]) interleaved
        emb = angles.repeat_interleave(2, dim=-1)
        turned = torch.stack([-x_rot[..., 1::2], x_rot[..., 0::2]], dim=-1).flatten(-2)
    out = x_rot * torch.cos(emb) + turned * torch.sin(emb)
    return torch.cat([out, x_pass], dim=-1)
