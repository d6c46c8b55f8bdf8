"""The remapped positions of dual chunk attention (An et al. 2024, "Training-Free Long-Context Scaling of Large
Language Models", §3), as vLLM rotates queries and keys for it.

Dual chunk attention splits a long sequence into chunks of ``L = chunk_size − local_size`` tokens and scores
three blocks with queries rotated at different positions, so that no relative distance exceeds what the model
was trained on. Each rotation is an ordinary rotary one (the default ``θ_i``) at a remapped position; as
vLLM computes them (``vllm/model_executor/layers/rotary_embedding/dual_chunk_rope.py``,
``DualChunkRotaryEmbedding``: its five query caches and its key cache, indexed by ``t mod L``)::

    key                    t mod L
    intra-chunk query      t mod L
    successive-chunk query min(t mod L + L, chunk_size)
    inter-chunk query      min(2L − 1, chunk_size)          (every token)
    successive, critical   t mod L + L
    inter, critical        t mod L + chunk_size

:class:`posenc.nn.RotaryEmbedding` given these as ``q_positions`` / ``k_positions`` rotates exactly as vLLM
does (with float64 angles). The attention that merges the three score blocks (intra, successive and inter
chunk) is an attention kernel, not a positional encoding, and is not here.
"""

from __future__ import annotations

import dataclasses
import numbers

import torch

_INTEGER_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


@dataclasses.dataclass(frozen=True)
class DualChunkPositions:
    """The key positions and the five query position sets of dual chunk attention (module docstring), each
    int64 and of the input positions' shape."""

    key: torch.Tensor
    intra: torch.Tensor
    successive: torch.Tensor
    inter: torch.Tensor
    successive_critical: torch.Tensor
    inter_critical: torch.Tensor


def _count(name: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value}")
    return int(value)


def dual_chunk_positions(
    positions: torch.Tensor | int, *, chunk_size: int, local_size: int
) -> DualChunkPositions:
    """The remapped positions vLLM rotates keys and queries at for dual chunk attention (module docstring).

    Args:
        positions: token positions ``t`` (an integer tensor of any shape), or an int ``n`` meaning ``0 … n−1``.
        chunk_size, local_size: the ``dual_chunk_attention_config`` values, ``0 <= local_size < chunk_size``;
            chunks hold ``L = chunk_size − local_size`` tokens.
    """
    chunk_size = _count("chunk_size", chunk_size, 1)
    local_size = _count("local_size", local_size, 0)
    if local_size >= chunk_size:
        raise ValueError(
            f"local_size must be < chunk_size={chunk_size} (chunks hold chunk_size − local_size tokens), "
            f"got {local_size}"
        )
    if isinstance(positions, numbers.Integral) and not isinstance(positions, bool):
        positions = torch.arange(_count("positions", positions, 0))
    if not isinstance(positions, torch.Tensor) or positions.dtype not in _INTEGER_DTYPES:
        kind = positions.dtype if isinstance(positions, torch.Tensor) else type(positions).__name__
        raise TypeError(f"positions must be an integer tensor or an int count, got {kind}")
    length = chunk_size - local_size
    within = positions.to(torch.int64) % length
    return DualChunkPositions(
        key=within,
        intra=within,
        successive=(within + length).clamp(max=chunk_size),
        inter=torch.full_like(within, min(2 * length - 1, chunk_size)),
        successive_critical=within + length,
        inter_critical=within + chunk_size,
    )
