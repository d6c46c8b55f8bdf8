"""Randomized positional encodings (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers", §3): train on positions drawn from a range longer than any test.

A sequence of ``s`` tokens gets, instead of ``0 … s − 1``, an ordered sample of ``s`` distinct
positions from ``0 … M − 1`` (``M`` above the longest test length), drawn afresh at every forward
pass — at evaluation too, as the authors' released code does (its noisy encodings have no training
switch). Every position up to ``M`` is thus seen in training and only the order is informative,
which lets any encoding that takes ``positions`` face longer sequences at test time. Tested at
``0 … s − 1`` instead, such a model meets gaps between neighbours it was never trained on (a
variant :class:`RandomizedPositions` offers with ``draw_in_eval=False``).
"""

from __future__ import annotations

import torch
from torch import nn

from posenc import validate


def randomized_positions(
    length: int,
    max_position: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``[length]`` int64 positions: ``length`` distinct values of ``0 … max_position − 1`` in increasing order."""
    length = validate.non_negative_int("length", length)
    max_position = validate.positive_int("max_position", max_position)
    if length > max_position:
        raise ValueError(
            f"max_position={max_position} must be >= the sequence length {length} (positions are distinct)"
        )
    sample = torch.randperm(max_position, generator=generator)[:length]
    return sample.sort().values.to(device)


class RandomizedPositions(nn.Module):
    """Wrap a model whose ``forward(x, *, positions=…, **kw)`` passes ``positions`` to its encoding.

    Each call draws one ordered sample (:func:`randomized_positions`, shared by the batch) and passes
    it as ``positions``, in training and, by default, in evaluation (module docstring).

    Args:
        model: e.g. :class:`posenc.nn.TransformerEncoder`; any encoding (input, rotary, bias) works.
        max_position: ``M``, the range positions are drawn from (Ruoss et al.: well above the
            longest test length).
        generator: optional RNG for the draws.
        draw_in_eval: draw in evaluation mode too (Ruoss et al.'s code); ``False``: the model sees its
            default positions ``0 … s − 1`` there.
    """

    def __init__(
        self,
        model: nn.Module,
        max_position: int,
        *,
        generator: torch.Generator | None = None,
        draw_in_eval: bool = True,
    ) -> None:
        super().__init__()
        self.model = model
        self.max_position = validate.positive_int("max_position", max_position)
        self.generator = generator
        self.draw_in_eval = validate.boolean("draw_in_eval", draw_in_eval)

    def forward(self, x: torch.Tensor, **kwargs: object) -> torch.Tensor:
        """``model(x, positions=sample, **kwargs)``; in evaluation with ``draw_in_eval=False``,
        ``model(x, **kwargs)``."""
        if "positions" in kwargs:
            raise ValueError("RandomizedPositions draws the positions itself; do not pass positions=")
        if self.training or self.draw_in_eval:
            kwargs["positions"] = randomized_positions(
                x.shape[1], self.max_position, generator=self.generator, device=x.device
            )
        out: torch.Tensor = self.model(x, **kwargs)
        return out

    def extra_repr(self) -> str:
        return f"max_position={self.max_position}, draw_in_eval={self.draw_in_eval}"
