"""A gather from per-row slots by an index shared over heads, its adjoint, and Shaw's attention terms.

Shaw et al. (2018), eqs. 3–5, add ``q_i·a^K_ij`` to the attention scores and ``Σ_j α_ij a^V_ij`` to
the outputs, where ``a_ij = w[index[i, j]]`` is one of ``n = 2k + 1`` learned vectors. With
``T = q·w^Kᵀ`` (``[…, s_q, n]``) the key term is the gather ``T[…, i, index[i, j]]``
(:func:`gather_slots`, or :func:`add_gathered_` straight into the scores); the value term is ``S·w^V``
with ``S[…, i, t] = Σ_{j : index[i, j] = t} α_ij`` (:func:`sum_slots`; :func:`attend_with_slots` adds it
to ``α·v``). Both maps are linear and each is the other's adjoint, so each is the other's gradient.

On the CPU in float32/float64 all run in the compiled loop of :mod:`posenc._native` (one pass; a
clipped-distance index row is three runs: a fill or sum, a copy, a fill or sum), and the in-place forms
skip a full ``[…, s_q, s_k]`` temporary: the key term is added to the scores as it is gathered, and the
weights' gradient ``g·vᵀ + (g·w^Vᵀ)[index]`` is formed in one buffer. Elsewhere, under
``torch.compile``, or without the loop: ``torch.gather`` and ``Tensor.scatter_add``.
"""

from __future__ import annotations

from typing import Any, cast

import torch

from posenc import _native
from posenc.backends import Backend, Environment, select
from posenc.backends.rotate import CPU


def _per_head(index: torch.Tensor) -> torch.Tensor:
    """``[s_q, s_k]`` as is; ``[b, s_q, s_k]`` → ``[b, 1, s_q, s_k]`` to broadcast over the heads."""
    return index.unsqueeze(1) if index.dim() == 3 else index


def _loop_rows(call: tuple[torch.Tensor, torch.Tensor]) -> tuple[int, int] | None:
    """``(nb, g)`` for the compiled loop on ``(src, index)``, rows ``(ib·g + h)·s_q + i`` reading index row
    ``(ib, i)``, or ``None`` where the index is not shared as the loop expects (read from metadata only)."""
    src, index = call
    if index.device != src.device or index.dtype != torch.int64 or src.dim() < 2:
        return None
    rows = src.shape[:-2].numel()
    if index.dim() == 2:
        return 1, rows
    if src.dim() == 4 and index.dim() == 3 and src.shape[0] == index.shape[0]:
        return index.shape[0], src.shape[1]
    return None


_BACKENDS: tuple[Backend[tuple[torch.Tensor, torch.Tensor]], ...] = (
    Backend("loop", _loop_rows, devices=CPU, dtypes=frozenset({torch.float32, torch.float64}), needs="native",
            supports=lambda call: _loop_rows(call) is not None),
    Backend("torch", lambda call: None, compiled=True, exported=True, differentiable=True),
)  # fmt: skip
"""Where the compiled loop serves (its ``apply`` gives its row layout), else ``torch.gather``/``scatter_add``."""


def _native_shape(src: torch.Tensor, index: torch.Tensor) -> tuple[int, int] | None:
    """The loop's ``(nb, g)`` (:func:`_loop_rows`) where :func:`posenc.backends.select` chooses it, else ``None``
    (not built or switched off, not the CPU, another dtype, under ``torch.compile``, an index it cannot share)."""
    chosen = select(_BACKENDS, (src, index), Environment.of(src))
    return cast("tuple[int, int] | None", chosen.apply((src, index)))


_GATHER, _SUM, _GATHER_ADD = "gather", "sum", "gather_add"  # the modes of posenc._native.slots


def _run(
    src: torch.Tensor,
    index: torch.Tensor,
    width: int,
    mode: str,
    nb: int,
    g: int,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """The compiled loop in ``mode`` from ``src`` into ``out`` (new ``[…, width]`` when ``None``; in
    place for ``_GATHER_ADD``, where ``out`` must be contiguous)."""
    src, index = src.contiguous(), index.contiguous()
    if out is None:
        out = src.new_empty(*src.shape[:-1], width)
    sq, k = index.shape[-2:]
    _native.slots(
        src.view(nb, g, sq, src.shape[-1]), out.view(nb, g, sq, out.shape[-1]), index.view(nb, sq, k), mode
    )
    return out


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, table: torch.Tensor, index: torch.Tensor, nb: int, g: int) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.n = table.shape[-1]
        return _run(table, index, index.shape[-1], _GATHER, nb, g)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (index,) = ctx.saved_tensors
        return sum_slots(grad, index, ctx.n), None, None, None


class _GatherAdd(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, dst: torch.Tensor, table: torch.Tensor, index: torch.Tensor, nb: int, g: int
    ) -> torch.Tensor:
        ctx.mark_dirty(dst)
        ctx.save_for_backward(index)
        ctx.n = table.shape[-1]
        return _run(table, index, index.shape[-1], _GATHER_ADD, nb, g, out=dst)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None, None]:
        (index,) = ctx.saved_tensors
        return grad, sum_slots(grad, index, ctx.n), None, None, None


class _Sum(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, weights: torch.Tensor, index: torch.Tensor, n: int, nb: int, g: int
    ) -> torch.Tensor:
        ctx.save_for_backward(index)
        return _run(weights, index, n, _SUM, nb, g)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:
        (index,) = ctx.saved_tensors
        return gather_slots(grad, index), None, None, None, None


class _AttendWithSlots(torch.autograd.Function):
    """``α·v + sum_slots(α)·w``; the backward forms ``∂α = g·vᵀ + (g·wᵀ)[index]`` in one buffer."""

    @staticmethod
    def forward(
        ctx: Any,
        weights: torch.Tensor,
        values: torch.Tensor,
        slot_values: torch.Tensor,
        index: torch.Tensor,
        nb: int,
        g: int,
    ) -> torch.Tensor:
        slots = _run(weights, index, slot_values.shape[0], _SUM, nb, g)
        ctx.save_for_backward(weights, values, slot_values, index, slots)
        ctx.shape = nb, g
        return torch.matmul(weights, values).add_(slots @ slot_values)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        weights, values, slot_values, index, slots = ctx.saved_tensors
        n, d = slot_values.shape
        grad = grad.contiguous()  # once, not in each of the four products below
        differentiable = torch.is_grad_enabled()  # create_graph: every term through autograd's ops
        d_weights = d_values = d_slot_values = None
        if ctx.needs_input_grad[0]:
            d_weights = torch.matmul(grad, values.transpose(-2, -1))
            per_slot = grad @ slot_values.T
            if differentiable:
                d_weights = d_weights + gather_slots(per_slot, index)
            else:
                nb, g = ctx.shape
                _run(per_slot, index, index.shape[-1], _GATHER_ADD, nb, g, out=d_weights)
        if ctx.needs_input_grad[1]:
            d_values = torch.matmul(weights.transpose(-2, -1), grad)
        if ctx.needs_input_grad[2]:
            if differentiable:
                slots = sum_slots(weights, index, n)
            d_slot_values = slots.reshape(-1, n).T @ grad.reshape(-1, d)
        return d_weights, d_values, d_slot_values, None, None, None


def _check(src: torch.Tensor, index: torch.Tensor, name: str, width: int) -> None:
    if index.dim() not in (2, 3) or src.dim() < 2 or src.shape[-2] != index.shape[-2]:
        raise ValueError(
            f"index must be [s_q, s_k] or [b, s_q, s_k] with s_q = {name}.shape[-2]; got index "
            f"{list(index.shape)} and {name} {list(src.shape)}"
        )
    if index.dim() == 3 and (src.dim() != 4 or index.shape[0] not in (1, src.shape[0])):
        raise ValueError(f"a [b, s_q, s_k] index needs {name} [b, h, s_q, {width}]; got {list(src.shape)}")


def _check_dst(dst: torch.Tensor, name: str, shape: tuple[int, ...]) -> None:
    if tuple(dst.shape) != shape:
        raise ValueError(f"{name} must be {list(shape)}, got {list(dst.shape)}")


def gather_slots(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``out[…, i, j] = table[…, i, index[i, j]]`` (``index[b, i, j]`` for row ``b`` of a batched index).

    Args:
        table: ``[…, s_q, n]``, ``[b, h, s_q, n]`` with a batched index.
        index: ``[s_q, s_k]`` or ``[b, s_q, s_k]`` int64, values in ``[0, n)``, shared over the heads.

    Returns ``[…, s_q, s_k]``; differentiable in ``table`` (its gradient is :func:`sum_slots`).
    """
    _check(table, index, "table", table.shape[-1])
    shape = _native_shape(table, index)
    if shape is None:
        return table.gather(-1, _per_head(index).expand(*table.shape[:-1], index.shape[-1]))
    gathered: torch.Tensor = _Gather.apply(table, index, *shape)
    return gathered


def sum_slots(weights: torch.Tensor, index: torch.Tensor, n: int) -> torch.Tensor:
    """``out[…, i, t] = Σ_{j : index[i, j] = t} weights[…, i, j]`` for ``t < n``: the adjoint of
    :func:`gather_slots`.

    Args:
        weights: ``[…, s_q, s_k]``, ``[b, h, s_q, s_k]`` with a batched index.
        index: as :func:`gather_slots`, ``[s_q, s_k]`` or ``[b, s_q, s_k]``.
        n: the number of slots.

    Returns ``[…, s_q, n]``; differentiable in ``weights`` (its gradient is :func:`gather_slots`).
    """
    _check(weights, index, "weights", n)
    if weights.shape[-1] != index.shape[-1]:
        raise ValueError(
            f"weights must be [..., s_q, s_k={index.shape[-1]}] like index, got {list(weights.shape)}"
        )
    shape = _native_shape(weights, index)
    if shape is None:
        slots = weights.new_zeros(*weights.shape[:-1], n)
        return slots.scatter_add(-1, _per_head(index).expand_as(weights), weights)
    summed: torch.Tensor = _Sum.apply(weights, index, n, *shape)
    return summed


def add_gathered_(dst: torch.Tensor, table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``dst[…, i, j] += table[…, i, index[i, j]]`` in place; returns ``dst``.

    :func:`gather_slots` added to ``dst`` (``[…, s_q, s_k]``, the gather's shape) without a temporary of
    that size. Differentiable in ``dst`` (its gradient passes through) and in ``table``
    (:func:`sum_slots` of the gradient).
    """
    _check(table, index, "table", table.shape[-1])
    _check_dst(dst, "dst", (*table.shape[:-1], index.shape[-1]))
    shape = _native_shape(table, index)
    if shape is None or not dst.is_contiguous() or dst.dtype != table.dtype or dst.device != table.device:
        return dst.add_(gather_slots(table, index))
    added: torch.Tensor = _GatherAdd.apply(dst, table, index, *shape)
    return added


def attend_with_slots(
    weights: torch.Tensor, values: torch.Tensor, slot_values: torch.Tensor, index: torch.Tensor
) -> torch.Tensor:
    """``out[…, i, :] = Σ_j weights[…, i, j]·(values[…, j, :] + slot_values[index[i, j]])``.

    Shaw et al. (2018), eq. 3: attention output with a learned vector per slot added to every value.
    Computed as ``weights·values + sum_slots(weights)·slot_values``.

    Args:
        weights: ``[…, s_q, s_k]`` attention weights (``[b, h, s_q, s_k]`` with a batched index).
        values: ``[…, s_k, d]``, the same leading dimensions.
        slot_values: ``[n, d]``, one vector per slot.
        index: as :func:`gather_slots`.

    Returns ``[…, s_q, d]``; differentiable in ``weights``, ``values`` and ``slot_values``.
    """
    n, d = slot_values.shape
    _check(weights, index, "weights", n)
    _check_dst(values, "values", (*weights.shape[:-2], index.shape[-1], d))
    shape = _native_shape(weights, index)
    if shape is None or weights.shape[-1] != index.shape[-1]:
        return torch.matmul(weights, values) + sum_slots(weights, index, n) @ slot_values
    out: torch.Tensor = _AttendWithSlots.apply(weights, values, slot_values, index, *shape)
    return out
