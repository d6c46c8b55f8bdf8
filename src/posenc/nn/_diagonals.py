"""Score terms that depend on the query–key offset ``j − i``, and their gradients without atomics.

A relative bias (Raffel et al. 2020, §2.1: T5's ``b_h[bucket(j − i)]``) is constant along the
diagonals of the ``[s_q, s_k]`` scores; Shaw et al.'s (2018, eqs. 3–5) terms read, in row ``i``, the
slot ``clip(j − i, −k, k) + k``. The gradient of either is a sum of the scores' gradient along
diagonals (T5: over every row and the batch; Shaw: within each row, the clipped ends summed). Done
by ``scatter_add``/``index_add`` that sum lands ``s²`` atomic additions on a few hundred addresses,
which serialises on a GPU. Here the sum is one memory-bound pass over a *skewed* view instead:

``skew(g)[…, i, s_q − 1 + j − i] = g[…, i, j]`` (zeros elsewhere), ``[…, s_q, s_q + s_k − 1]``: the
gradient padded once and read back with a row stride one longer than its rows, so that each column is
one offset ``j − i``. Then

* :func:`toeplitz` (``out[…, i, j] = d[…, s_q − 1 + j − i]``) has the gradient ``skew(g).sum(−2)``;
* :func:`band_gather` (``out[…, i, j] = slots[…, i, clip(j − i + shift, −k, k) + k]``) has the gradient
  :func:`band_sum`: ``skew(g)``'s middle ``2k − 1`` columns, and the sums of the columns on either
  side; :func:`band_sum` is the adjoint of :func:`band_gather` and each is the other's gradient.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


def skew(g: torch.Tensor) -> torch.Tensor:
    """``[…, s_q, s_k] → […, s_q, s_q + s_k − 1]``: ``out[…, i, s_q − 1 + j − i] = g[…, i, j]``, zeros elsewhere.

    ``g`` padded by ``s_q − 1`` zero columns on the left and one zero row below, then viewed with a row
    stride of ``s_q + s_k``: row ``i`` starts ``i`` elements further right, and whatever it reads past
    its row's end is the next row's left padding (zeros).
    """
    s_q, s_k = g.shape[-2], g.shape[-1]
    width = s_q + s_k - 1
    padded = F.pad(g, (s_q - 1, 0, 0, 1))  # [..., s_q + 1, width], contiguous
    return padded.as_strided((*g.shape[:-2], s_q, width), (*padded.stride()[:-2], width + 1, 1))


class _Toeplitz(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, diagonals: torch.Tensor, s_q: int, s_k: int) -> torch.Tensor:
        # window t of the unfolded row holds d[t + j]; row i is window s_q − 1 − i
        return diagonals.unfold(-1, s_k, 1).flip(-2)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return skew(grad).sum(-2), None, None


def toeplitz(diagonals: torch.Tensor, s_q: int, s_k: int) -> torch.Tensor:
    """``out[…, i, j] = diagonals[…, s_q − 1 + j − i]``: ``[…, s_q + s_k − 1] → […, s_q, s_k]``.

    Differentiable in ``diagonals``: the gradient is the sum of the output's gradient along each
    diagonal (:func:`skew`, then a sum over the rows), one pass without atomics.
    """
    if diagonals.shape[-1] != s_q + s_k - 1 or s_q < 1 or s_k < 1:
        raise ValueError(
            f"diagonals must be [..., s_q + s_k - 1 = {s_q + s_k - 1}] for s_q={s_q} >= 1, s_k={s_k} >= 1, "
            f"got {list(diagonals.shape)}"
        )
    out: torch.Tensor = _Toeplitz.apply(diagonals, s_q, s_k)
    return out


def _columns(s_q: int, s_k: int, k: int, shift: int) -> int:
    """Column of :func:`skew` holding offset ``j − i + shift = −k``."""
    return s_q - 1 - k - shift


def _band_sum(weights: torch.Tensor, k: int, shift: int) -> torch.Tensor:
    s_q, s_k = weights.shape[-2], weights.shape[-1]
    skewed = skew(weights)
    width = skewed.shape[-1]
    low = _columns(s_q, s_k, k, shift)  # columns ≤ low clip to slot 0, ≥ low + 2k to slot 2k
    start, stop = max(low + 1, 0), min(low + 2 * k, width)
    middle = skewed[..., min(start, width) : max(stop, start)]
    before = min(start - (low + 1), 2 * k - 1)  # offsets outside the scores: zeros
    middle = F.pad(middle, (before, 2 * k - 1 - before - middle.shape[-1]))
    left = skewed[..., : min(max(low + 1, 0), width)].sum(-1, keepdim=True)
    right = skewed[..., min(max(low + 2 * k, 0), width) :].sum(-1, keepdim=True)
    return torch.cat([left, middle, right], dim=-1)


def _broadcast_index(index: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    index = index.unsqueeze(1) if index.dim() == 3 else index  # [b, s_q, s_k] → per head
    return index.expand(*like.shape[:-1], index.shape[-1])


class _BandGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, slots: torch.Tensor, index: torch.Tensor, k: int, shift: int) -> torch.Tensor:
        ctx.band = k, shift
        return slots.gather(-1, _broadcast_index(index, slots))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return _band_sum(grad, *ctx.band), None, None, None


class _BandSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, weights: torch.Tensor, index: torch.Tensor, k: int, shift: int) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.band = k, shift
        return _band_sum(weights, k, shift)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (index,) = ctx.saved_tensors
        return band_gather(grad, index, *ctx.band), None, None, None


def _check_band(src: torch.Tensor, index: torch.Tensor, k: int, name: str) -> None:
    if index.dim() != 2 or src.dim() < 2 or src.shape[-2] != index.shape[0]:
        raise ValueError(
            f"index must be [s_q, s_k] with s_q = {name}.shape[-2]; got index {list(index.shape)} and "
            f"{name} {list(src.shape)}"
        )
    if k < 1:
        raise ValueError(f"k must be a positive clipping distance, got {k}")


def band_gather(slots: torch.Tensor, index: torch.Tensor, k: int, shift: int = 0) -> torch.Tensor:
    """``out[…, i, j] = slots[…, i, clip(j − i + shift, −k, k) + k]`` (Shaw et al. 2018, eq. 4's ``a^K_ij``).

    Args:
        slots: ``[…, s_q, 2k + 1]``.
        index: ``[s_q, s_k]`` long, ``clip(j − i + shift, −k, k) + k`` (the forward's gather reads it).
        k: clipping distance.
        shift: key position minus query position at ``i = j = 0``.

    Returns ``[…, s_q, s_k]``; its gradient in ``slots`` is :func:`band_sum` (no atomics).
    """
    _check_band(slots, index, k, "slots")
    out: torch.Tensor = _BandGather.apply(slots, index, k, shift)
    return out


def band_sum(weights: torch.Tensor, index: torch.Tensor, k: int, shift: int = 0) -> torch.Tensor:
    """``out[…, i, t] = Σ_{j : clip(j − i + shift, −k, k) + k = t} weights[…, i, j]``, ``[…, s_q, 2k + 1]``:
    the adjoint of :func:`band_gather` (Shaw et al. 2018, eq. 3's value term sums the weights so).

    One pass over :func:`skew` of ``weights``; the gradient is :func:`band_gather`.
    """
    _check_band(weights, index, k, "weights")
    if weights.shape[-1] != index.shape[-1]:
        raise ValueError(f"weights must be [..., s_q, s_k={index.shape[-1]}], got {list(weights.shape)}")
    out: torch.Tensor = _BandSum.apply(weights, index, k, shift)
    return out
