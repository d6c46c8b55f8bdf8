"""Swap a Hugging Face ``transformers`` model's rotary embedding for posenc's float64-angle one.

transformers' rotary modules (``LlamaRotaryEmbedding``, ``MistralRotaryEmbedding``, ``Qwen2…``,
``GPTNeoXRotaryEmbedding`` …) share one interface: ``forward(x, position_ids) → (cos, sin)``,
each ``[b, s, r]`` in the ``rotate_half`` layout, already multiplied by the rope type's attention
factor, in ``x``'s dtype; the attention layers then apply them. They form the angles
``position_ids · inv_freq`` in float32, which is off by up to ``t·2^−24`` radians (0.06 at
``t = 10^6``). :class:`HFRotary` has the same interface and forms the angles in float64
(:meth:`posenc.nn.RotaryEmbedding.cos_sin`), for every rope type :meth:`~posenc.nn.RotaryEmbedding.from_hf`
reads. Usage::

    from transformers import LlamaForCausalLM
    from posenc.integrations.hf import swap_rotary

    model = LlamaForCausalLM.from_pretrained(...)
    swap_rotary(model)            # same logits (float32 round-off), exact angles at any position

Nothing here imports transformers: the model is only walked and one attribute replaced.
"""

from __future__ import annotations

import torch
from torch import nn

from posenc.nn.rotary import RotaryEmbedding


class HFRotary(nn.Module):
    """A drop-in for a transformers rotary module: ``forward(x, position_ids) → (cos, sin)`` ``[b, s, r]``.

    Args:
        rope: a half-split :class:`posenc.nn.RotaryEmbedding` (e.g. ``RotaryEmbedding.from_hf(config)``).
    """

    def __init__(self, rope: RotaryEmbedding) -> None:
        super().__init__()
        if not isinstance(rope, RotaryEmbedding):
            raise TypeError(f"rope must be a posenc RotaryEmbedding, got {type(rope).__name__}")
        if rope.layout != "half_split" or rope.xpos_scale_base is not None:
            raise ValueError(
                "transformers applies cos/sin with rotate_half to both q and k: rope must have layout='half_split' "
                f"and no xPos, got layout={rope.layout!r}, xpos_scale_base={rope.xpos_scale_base}"
            )
        self.rope = rope

    @torch.no_grad()
    def forward(self, x: torch.Tensor, position_ids: torch.Tensor, **_: object) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[b, s, r]`` in ``x``'s dtype for ``position_ids [b, s]``."""
        positions = position_ids if position_ids.dim() == 2 else position_ids.reshape(1, -1)
        cos, sin = self.rope.cos_sin(positions.shape[-1], positions=positions, dtype=x.dtype, device=x.device)
        return cos, sin


def swap_rotary(model: nn.Module) -> list[str]:
    """Replace every transformers rotary module inside ``model`` by an :class:`HFRotary`; return their names.

    A rotary module is recognised by its class name ending in ``RotaryEmbedding`` and its ``config``
    (the model config it was built from), from which :meth:`RotaryEmbedding.from_hf` reads the rope
    type. Raises ``ValueError`` if ``model`` has none.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding") and hasattr(child, "config"):
                device = next((b.device for b in child.buffers()), torch.device("cpu"))
                setattr(module, child_name, HFRotary(RotaryEmbedding.from_hf(child.config)).to(device))
                swapped.append(f"{name}.{child_name}" if name else child_name)
    if not swapped:
        raise ValueError(f"{type(model).__name__} has no transformers rotary embedding (a *RotaryEmbedding with a config)")
    return swapped
