"""The rotation of queries and keys in one launch: ``(R q, R k)`` by a module's cached tables, gathered by
position, with float64 angles beyond the cache (Su et al. 2021, RoFormer, eq. 34).

``q [b, h, s_q, d]`` and ``k [b, h_k, s_k, d]`` at positions ``[b or 1, s]`` (integers; a batch of 1
broadcasts), or at ``q_offset + 0 …`` and ``k_offset + 0 …``; ``cos``/``sin`` the cached per-pair values
``[n, r/2]`` in the work dtype; ``theta`` float64 ``[r/2 + 1]``, the frequencies and then the attention
factor, for positions outside the cache (``t < 0`` or ``t ≥ n``): there ``c = a·cos(t·θ)``, ``s = a·sin(t·θ)``.

:func:`reference` is the definition. Backends (:data:`BACKENDS`): the Triton kernel on CUDA as the operator
``posenc::rotate_qk`` (eagerly for :meth:`posenc.nn.RotaryEmbedding.forward`, and, while ``torch.compile``
traces, for the tables of a :class:`posenc.nn.contracts.PositionContext` too: eagerly the one launch costs
more host time there than the two table rotations); else ``tables``: the caller rotates ``q`` and ``k``
by tables at their positions (:mod:`posenc.backends.rotate`), whose ``apply`` is :func:`reference`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from posenc import _gpu
from posenc.backends import Backend, Environment, select
from posenc.backends.rotate import CUDA, layout_table, rotation_reference


class QK(NamedTuple):
    """What decides the backend of one call: the tensors, their positions (``None``: offsets), whether the
    tables carry xPos amplitudes, whether the frequencies are fixed (``static``), and whether the call comes
    from a precomputed :class:`~posenc.nn.contracts.PositionContext`."""

    q: torch.Tensor
    k: torch.Tensor
    q_positions: object
    k_positions: object
    xpos: bool
    static: bool
    context: bool


def _kernel_ok(call: QK) -> bool:
    q, k = call.q, call.k
    return (
        k.device == q.device
        and k.dtype == q.dtype
        and q.dim() == k.dim() == 4
        and q.stride(-1) == k.stride(-1) == 1
        and not call.xpos
        and call.static
        and all(
            p is None or (isinstance(p, torch.Tensor) and not p.is_floating_point() and p.dtype != torch.bool)
            for p in (call.q_positions, call.k_positions)
        )
    )


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor | None,
    k_pos: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    theta: torch.Tensor,
    q_offset: int,
    k_offset: int,
    layout: str,
    inverse: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(R q, R k)`` (``Rᵀ`` when ``inverse``) as the module docstring defines it."""
    n, half = cos.shape[0], cos.shape[1]
    out = []
    for x, pos, offset in ((q, q_pos, q_offset), (k, k_pos, k_offset)):
        p = torch.arange(offset, offset + x.shape[-2], device=x.device)[None] if pos is None else pos.long()
        inside = ((p >= 0) & (p < n))[..., None]
        angles = p.to(torch.float64)[..., None] * theta[:half]
        rows = p.clamp(0, max(n - 1, 0))
        c = torch.where(inside, cos[rows].double(), angles.cos() * theta[half])
        s = torch.where(inside, sin[rows].double(), angles.sin() * theta[half])
        c, s = (layout_table(t, layout)[:, None].to(cos.dtype) for t in (c, s))  # [b or 1, 1, s, r]
        out.append(rotation_reference(x.to(cos.dtype), c, s, layout, inverse).to(x.dtype))
    return out[0], out[1]


def launch(
    q: torch.Tensor,
    k: torch.Tensor,
    q_pos: torch.Tensor | None,
    k_pos: torch.Tensor | None,
    cos: torch.Tensor,
    sin: torch.Tensor,
    theta: torch.Tensor,
    q_offset: int,
    k_offset: int,
    layout: str,
    inverse: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``posenc::rotate_qk`` on CUDA: one launch of :func:`posenc._gpu_kernels.rotate_qk`."""
    gpu = _gpu.kernels(q.device.type, q.dtype)
    assert gpu is not None, "posenc::rotate_qk runs on CUDA tensors with Triton"
    q = q if q.stride(-1) == 1 else q.contiguous()
    k = k if k.stride(-1) == 1 else k.contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    if q.numel() or k.numel():
        positions = None if q_pos is None or k_pos is None else (q_pos, k_pos)
        gpu.rotate_qk(
            q, k, q_out, k_out, positions, (q_offset, k_offset), (cos, sin), theta, layout, 2 * cos.shape[-1],
            inverse, checks="signature",
        )  # fmt: skip  # fresh outputs: the signature's checks suffice
    return q_out, k_out


_LIBRARY = torch.library.Library("posenc", "FRAGMENT")
_LIBRARY.define(
    "rotate_qk(Tensor q, Tensor k, Tensor? q_pos, Tensor? k_pos, Tensor cos, Tensor sin, Tensor theta, "
    "int q_offset, int k_offset, str layout, bool inverse) -> (Tensor, Tensor)"
)
_LIBRARY.impl("rotate_qk", launch, "CUDA")


@torch.library.register_fake("posenc::rotate_qk")
def _(q, k, q_pos, k_pos, cos, sin, theta, q_offset, k_offset, layout, inverse):  # type: ignore[no-untyped-def]
    return torch.empty_like(q), torch.empty_like(k)


def _setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
    q, k, q_pos, k_pos, cos, sin, theta, q_offset, k_offset, layout, inverse = inputs
    ctx.save_for_backward(q_pos, k_pos, cos, sin, theta)
    ctx.args = (q_offset, k_offset, layout, not inverse)
    ctx.like = tuple((t.shape, t.dtype, t.device) for t in (q, k))


def _backward(ctx: Any, grad_q: torch.Tensor | None, grad_k: torch.Tensor | None) -> tuple[Any, ...]:
    """The adjoint of a rotation is the rotation by the opposite angle: one launch for both gradients."""
    q_pos, k_pos, cos, sin, theta = ctx.saved_tensors
    (q_shape, dtype, device), (k_shape, _, _) = ctx.like
    grad_q = torch.zeros(q_shape, dtype=dtype, device=device) if grad_q is None else grad_q
    grad_k = torch.zeros(k_shape, dtype=dtype, device=device) if grad_k is None else grad_k
    dq, dk = torch.ops.posenc.rotate_qk(grad_q, grad_k, q_pos, k_pos, cos, sin, theta, *ctx.args)
    return dq, dk, None, None, None, None, None, None, None, None, None


torch.library.register_autograd("posenc::rotate_qk", _backward, setup_context=_setup)


def _operator(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    out: tuple[torch.Tensor, torch.Tensor] = torch.ops.posenc.rotate_qk(*args)
    return out


BACKENDS: tuple[Backend[QK], ...] = (
    Backend("triton", _operator, devices=CUDA, needs="triton", compiled=True,
            supports=lambda call: not call.context and _kernel_ok(call)),
    Backend("triton, context", _operator, devices=CUDA, needs="triton", eager=False, compiled=True,
            supports=_kernel_ok),
    Backend("tables", reference, compiled=True, exported=True, differentiable=True),
)  # fmt: skip
"""The backends of the q+k rotation, in order of preference (module docstring)."""


def one_launch(call: QK) -> bool:
    """Whether the one-launch operator serves ``call`` (else the caller rotates by tables)."""
    return select(BACKENDS, call, Environment.of(call.q)).name != "tables"
