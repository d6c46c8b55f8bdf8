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

from typing import cast

import torch
from torch import nn

from posenc.nn.rotary import RotaryEmbedding


class HFRotary(nn.Module):
    """A drop-in for a transformers rotary module: ``forward(x, position_ids) → (cos, sin)`` ``[b, s, r]``.

    Args:
        rope: a half-split :class:`posenc.nn.RotaryEmbedding` (e.g. ``RotaryEmbedding.from_hf(config)``),
            or a dict ``{layer_type: RotaryEmbedding}`` for models with one rope per layer type
            (Gemma 3), which call ``forward(x, position_ids, layer_type=…)``.
    """

    def __init__(self, rope: RotaryEmbedding | dict[str, RotaryEmbedding]) -> None:
        super().__init__()
        ropes = rope if isinstance(rope, dict) else {"": rope}
        for r in ropes.values():
            if not isinstance(r, RotaryEmbedding):
                raise TypeError(f"rope must be a posenc RotaryEmbedding, got {type(r).__name__}")
            if r.layout != "half_split" or r.xpos_scale_base is not None:
                raise ValueError(
                    "transformers applies cos/sin with rotate_half to both q and k: rope must have "
                    f"layout='half_split' and no xPos, got layout={r.layout!r}, xpos_scale_base={r.xpos_scale_base}"
                )
        self.ropes = nn.ModuleDict(ropes) if "" not in ropes else None
        self.rope = ropes.get("")

    @classmethod
    def from_config(cls, config: object) -> HFRotary:
        """The posenc rotary for a transformers config, one per layer type when the config has several."""
        parameters = getattr(config, "rope_parameters", None) or {}
        layer_types = sorted(k for k, v in parameters.items() if isinstance(v, dict))
        if layer_types:
            return cls({t: RotaryEmbedding.from_hf(config, layer_type=t) for t in layer_types})
        return cls(RotaryEmbedding.from_hf(config))

    @torch.no_grad()
    def forward(
        self, x: torch.Tensor, position_ids: torch.Tensor, layer_type: str | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[b, s, r]`` in ``x``'s dtype for ``position_ids [b, s]``."""
        rope = self.rope
        if self.ropes is not None:
            if layer_type is None or layer_type not in self.ropes:
                raise ValueError(f"layer_type must be one of {list(self.ropes)}, got {layer_type!r}")
            rope = cast(RotaryEmbedding, self.ropes[layer_type])
        rope = cast(RotaryEmbedding, rope)
        positions = position_ids if position_ids.dim() == 2 else position_ids.reshape(1, -1)
        return rope.cos_sin(positions.shape[-1], positions=positions, dtype=x.dtype, device=x.device)


def swap_rotary(model: nn.Module) -> list[str]:
    """Replace every transformers rotary module inside ``model`` by an :class:`HFRotary`; return their names.

    A rotary module is recognised by its class name ending in ``RotaryEmbedding`` and its ``config``
    (the model config it was built from), from which :meth:`RotaryEmbedding.from_hf` reads the rope
    type (one per layer type where the config has several). Raises ``ValueError`` if ``model`` has none.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding") and hasattr(child, "config"):
                device = next((b.device for b in child.buffers()), torch.device("cpu"))
                setattr(module, child_name, HFRotary.from_config(child.config).to(device))
                swapped.append(f"{name}.{child_name}" if name else child_name)
    if not swapped:
        raise ValueError(
            f"{type(model).__name__} has no transformers rotary embedding (a *RotaryEmbedding with a config)"
        )
    return swapped
