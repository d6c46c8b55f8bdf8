"""Query and key positions of one attention call: the single alignment rule shared by rotary and biases.

Every encoding that acts inside attention needs the positions of the queries and of the keys.
They are given explicitly, or default to ranges aligned at the *end* (bottom-right), the
convention of cached decoding, where ``s_q`` new queries follow ``s_k − s_q`` earlier keys::

    keys     offset + 0 … offset + s_k − 1
    queries  offset + s_k − s_q … offset + s_k − 1

For self-attention (``s_q = s_k``) both are ``offset + 0 … offset + s − 1``.
"""

from __future__ import annotations

import numbers

import torch


def check_offset(offset: object) -> int:
    """Return ``offset`` as an int ≥ 0, else raise naming the parameter."""
    if isinstance(offset, bool) or not isinstance(offset, numbers.Integral):
        raise TypeError(f"offset must be an int >= 0, got {offset!r} ({type(offset).__name__})")
    if offset < 0:
        raise ValueError(f"offset must be an int >= 0, got {offset}")
    return int(offset)


def query_start(q_len: int, k_len: int, offset: int) -> int:
    """Position of the first query under the end-aligned default: ``offset + s_k − s_q``."""
    if q_len > k_len:
        raise ValueError(
            f"default positions need s_q <= s_k (queries aligned to the last keys), got s_q={q_len} > "
            f"s_k={k_len}; pass q_positions and k_positions explicitly"
        )
    return offset + k_len - q_len


def check_positions(name: str, positions: object, length: int) -> torch.Tensor:
    """Validate explicit positions: a real 1-D tensor ``[length]``."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"{name} must be a 1-D torch.Tensor of {length} positions, got {type(positions).__name__}")
    if positions.dim() != 1 or positions.shape[0] != length:
        raise ValueError(f"{name} must have shape [{length}] (one position per token), got {list(positions.shape)}")
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name} must hold real numbers, got dtype {positions.dtype}")
    return positions


def resolve(
    q_len: int,
    k_len: int,
    *,
    q_positions: torch.Tensor | None,
    k_positions: torch.Tensor | None,
    offset: int,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions ``([s_q], [s_k])`` of the queries and keys.

    Explicit positions win; when only one is given and ``s_q = s_k`` it serves both (self-attention).
    Otherwise the defaults of the module docstring apply (int64 ranges on ``device``).
    """
    offset = check_offset(offset)
    if q_positions is None and k_positions is not None and q_len == k_len:
        q_positions = k_positions
    if k_positions is None and q_positions is not None and q_len == k_len:
        k_positions = q_positions
    if (q_positions is None) != (k_positions is None):
        given = "q_positions" if k_positions is None else "k_positions"
        raise ValueError(
            f"{given} was given but not its partner and s_q={q_len} != s_k={k_len}; pass both q_positions and k_positions"
        )
    if q_positions is None:
        start = query_start(q_len, k_len, offset)
        return (
            torch.arange(start, start + q_len, device=device),
            torch.arange(offset, offset + k_len, device=device),
        )
    return check_positions("q_positions", q_positions, q_len), check_positions("k_positions", k_positions, k_len)


def relative_distances(
    q_len: int,
    k_len: int,
    *,
    q_positions: torch.Tensor | None = None,
    k_positions: torch.Tensor | None = None,
    offset: int = 0,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """``[s_q, s_k]`` key position minus query position, ``j − i`` (the sign of T5's ``relative_position``)."""
    qp, kp = resolve(
        q_len, k_len, q_positions=q_positions, k_positions=k_positions, offset=offset,
        device=torch.device("cpu") if device is None else torch.device(device),
    )
    return kp.to(qp.device)[None, :] - qp[:, None]
