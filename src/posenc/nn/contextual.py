"""Contextual position encoding (CoPE; Golovneva et al. 2024, "Contextual Position Encoding: Learning to
Count What's Important", eqs. 3–5): positions counted by gates on ``q·k``.

For query ``i`` and key ``j`` the gate ``g_ij = σ(q_i·k_j)`` says whether key ``j`` counts; the
position of ``j`` seen from ``i`` is the number of counted keys from ``j`` on (eq. 3)::

    p_ij = Σ_{t=j}^{i} g_it                      (causal: keys after i have g = 0)

a real number, so the learned position embeddings ``e[0 … P−1]`` are interpolated (eq. 4)::

    e[p] = (p − ⌊p⌋)·e[⌈p⌉] + (1 − p + ⌊p⌋)·e[⌊p⌋]

and the score becomes ``q_i·k_j + q_i·e[p_ij]`` (eq. 5). As in the authors' code, ``q_i·e[p]`` is
formed for the ``P`` integer positions once (``[b, h, s, P]``) and interpolated by a gather, and
``p`` is clamped to ``P − 1``. Here the gates are the sigmoid of the scores attention already
holds, ``q·k/√d_h`` plus the mask (``−∞`` hidden keys get gate 0, as in the authors' code), and
``q`` arrives scaled by ``1/√d_h``: ``e`` is learned, so that factor only rescales it.
Without a causal mask the count runs from ``j`` to the last key.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc import validate
from posenc.nn.contracts import ContextualContract, PositionContext
from posenc.registry import EncodingView


def cope_positions(scores: torch.Tensor) -> torch.Tensor:
    """``p_ij = Σ_{t ≥ j} σ(scores_it)`` ``[…, s_q, s_k]`` (eq. 3; hidden keys, score ``−∞``, count 0)."""
    gates = torch.sigmoid(scores)
    return gates.flip(-1).cumsum(-1).flip(-1)


def interpolate(table: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``table[…, p]`` at real ``positions`` (eq. 4): the two neighbouring integer entries, weighted
    linearly; ``table [..., s_q, P]``, ``positions [..., s_q, s_k]`` in ``[0, P − 1]``."""
    floor = positions.floor()
    weight = positions - floor
    low = table.gather(-1, floor.long())
    high = table.gather(-1, positions.ceil().long())
    return low + weight * (high - low)


class CoPE(ContextualContract):
    """Contextual position encoding (module docstring): ``e [P, d_h]`` learned, shared by all heads.

    Args:
        head_dim: ``d_h``.
        max_len: default ``P`` (the counts are clamped to ``P − 1``).
        npos_max: ``P`` when it should differ from ``max_len``.
        init_std: standard deviation of ``e``'s normal initialisation (0: zeros, the authors' choice,
            under which an untrained model ignores positions; the default 0.02 does not).
    """

    def __init__(
        self, head_dim: int, max_len: int = 64, *, npos_max: int | None = None, init_std: float = 0.02
    ) -> None:
        super().__init__()
        self.head_dim = validate.positive_int("head_dim", head_dim)
        self.npos_max = validate.positive_int("npos_max", max_len if npos_max is None else npos_max)
        given: object = init_std
        if isinstance(given, bool) or not isinstance(given, numbers.Real):
            raise TypeError(f"init_std must be a real number >= 0, got {given!r} ({type(given).__name__})")
        std = float(given)
        if not math.isfinite(std) or std < 0:
            raise ValueError(f"init_std must be a finite number >= 0, got {init_std!r}")
        self.embeddings = nn.Parameter(torch.randn(self.npos_max, self.head_dim) * std)

    def check_attention(self, *, n_heads: int, head_dim: int) -> None:
        self._check_head_dim(head_dim)

    def add_scores_(
        self, scores: torch.Tensor, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        """``scores + q·e[p]`` for ``scores [b, h, s_q, s_k] = q·kᵀ + mask`` and scaled ``q [b, h, s_q, d_h]``."""
        positions = cope_positions(scores).clamp(max=self.npos_max - 1)
        table = q @ self.embeddings.to(q.dtype).T  # [b, h, s_q, P]: q_i·e[p] at every integer p
        return scores + interpolate(table, positions)

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        """With every gate 1 CoPE counts tokens, ``p_ij = |i − j| + 1``: the term ``q·e[p]/√d_h`` for one
        random probe query ``q ~ N(0, I)`` (seed ``seed``), ``[1, n, n]``."""
        probe = torch.randn(self.head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

        def bias(n: int) -> NDArray[np.float64]:
            t = torch.arange(n)
            p = ((t[:, None] - t[None, :]).abs() + 1).clamp(max=self.npos_max - 1)
            z = self.embeddings.detach().to(torch.float64) @ probe / np.sqrt(self.head_dim)
            rows: NDArray[np.float64] = z[p].numpy()[None]
            return rows

        return EncodingView(
            name,
            self.family,
            dim,
            bias=bias,
            notes={"view": f"q·e[|i-j|+1]/sqrt(d_h), every gate 1, one random probe query (seed {seed})"},
        )

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, npos_max={self.npos_max}"
