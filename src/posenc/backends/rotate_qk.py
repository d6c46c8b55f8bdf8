"""The rotation of queries and keys in one launch: ``(R q, R k)`` by a module's cached tables, gathered by
position, with float64 angles beyond the cache (Su et al. 2021, RoFormer, eq. 34).

``q [b, h, s_q, d]`` and ``k [b, h_k, s_k, d]`` at positions ``[b or 1, s]`` (integers; a batch of 1
broadcasts), or at ``q_offset + 0 …`` and ``k_offset + 0 …``; ``cos``/``sin`` the cached per-pair values
``[n, r/2]`` in the work dtype; ``theta`` float64 ``[r/2 + 1]``, the frequencies and then the attention
factor, for positions outside the cache (``t < 0`` or ``t ≥ n``): there ``c = a·cos(t·θ)``, ``s = a·sin(t·θ)``.

:func:`reference` is the definition. Backends (:data:`BACKENDS`), each as the operator ``posenc::rotate_qk``
where autograd needs it (its backward is the inverse rotation, one call for both gradients): on the CPU the
compiled loop of :mod:`posenc._native` for small calls (``s_q, s_k ≤`` :data:`LOOP_TOKENS`: decoding and
speculative steps; longer ones rotate faster by the tables of :mod:`posenc.backends.rotate`, which prefetch and
use AVX512-BF16), at int64 positions or offsets, eagerly for :meth:`posenc.nn.RotaryEmbedding.forward`; the
Triton kernel on CUDA (eagerly for :meth:`posenc.nn.RotaryEmbedding.forward`, and, while ``torch.compile``
traces, for the tables of a :class:`posenc.nn.contracts.PositionContext` too: eagerly the one launch costs
more host time there than the two table rotations); else ``tables``: the caller rotates ``q`` and ``k``
by tables at their positions (:mod:`posenc.backends.rotate`), whose ``apply`` is :func:`reference`.
Each one-launch backend reads the cache in its own dtype (:func:`table_dtype`); both refuse positions of
magnitude ``≥ 2^53`` themselves, so their caller checks none.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch

from posenc import _gpu, _native
from posenc.backends import Backend, Environment, select
from posenc.backends.rotate import CPU, CUDA, LOOP_DTYPES, layout_table, rotation_reference


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
    """``(R q, R k)`` (``Rᵀ`` when ``inverse``) as the module docstring defines it: the table values rounded
    to the tables' dtype, the rotation worked in float64 beside float64 tables, else in float32 (bfloat16
    tables widened exactly), rounded once to ``q``'s dtype."""
    n, half = cos.shape[0], cos.shape[1]
    work = torch.float64 if cos.dtype == torch.float64 else torch.float32
    out = []
    for x, pos, offset in ((q, q_pos, q_offset), (k, k_pos, k_offset)):
        p = torch.arange(offset, offset + x.shape[-2], device=x.device)[None] if pos is None else pos.long()
        inside = ((p >= 0) & (p < n))[..., None]
        angles = p.to(torch.float64)[..., None] * theta[:half]
        rows = p.clamp(0, max(n - 1, 0))
        c = torch.where(inside, cos[rows].double(), angles.cos() * theta[half])
        s = torch.where(inside, sin[rows].double(), angles.sin() * theta[half])
        c, s = (layout_table(t, layout)[:, None].to(cos.dtype).to(work) for t in (c, s))  # [b or 1, 1, s, r]
        out.append(rotation_reference(x.to(work), c, s, layout, inverse).to(x.dtype))
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


LOOP_TOKENS = 16
"""The CPU loop serves calls of at most this many queries and keys per sequence (module docstring)."""


def _loop_ok(call: QK) -> bool:
    q, k, qp, kp = call.q, call.k, call.q_positions, call.k_positions
    return (
        q.dim() == k.dim() == 4
        and q.shape[2] <= LOOP_TOKENS
        and k.shape[2] <= LOOP_TOKENS
        and k.dtype == q.dtype
        and k.device == q.device
        and q.stride(-1) == k.stride(-1) == 1
        and not call.xpos
        and call.static
        and not call.context  # a context's tables were made for the call already: rotating by them is less
        and (
            (qp is None and kp is None)
            or (
                isinstance(qp, torch.Tensor)
                and isinstance(kp, torch.Tensor)
                and qp.dtype == kp.dtype == torch.int64
                and qp.is_cpu
                and kp.is_cpu  # beside q: the loop runs on the CPU only
            )
        )
    )


def _loop(
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
    """``posenc::rotate_qk`` on the CPU: :func:`posenc._native.rotate_qk`, whose checks run once per
    signature of the arguments (shapes, strides, dtypes, storage offsets and sizes: everything they read
    but the addresses; the outputs are made here, apart from the inputs), as in
    :func:`posenc.backends.rotate._loop`."""
    q = q if q.stride(-1) == 1 else q.contiguous()  # a gradient may come expanded
    k = k if k.stride(-1) == 1 else k.contiguous()
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)
    positions = None if q_pos is None or k_pos is None else (q_pos, k_pos)
    inputs = (q, k, cos, sin, theta, *(positions or ()))  # the outputs: fresh, as q and k, their strides
    key = (
        layout, q_out.stride(), k_out.stride(),
        *[(t.shape, t.stride(), t.dtype, t.storage_offset(), t.untyped_storage().nbytes()) for t in inputs],
    )  # fmt: skip
    if key in _CHECKED:
        _native.rotate_qk_trusted(
            q, k, q_out, k_out, positions, (q_offset, k_offset), cos, sin, theta, layout, inverse
        )
        return q_out, k_out
    _native.rotate_qk(q, k, q_out, k_out, positions, (q_offset, k_offset), cos, sin, theta, layout, inverse)
    if len(_CHECKED) >= _CHECKED_SIZE:
        _CHECKED.clear()
    _CHECKED.add(key)
    return q_out, k_out


_CHECKED: set[tuple[Any, ...]] = set()
"""Signatures of :func:`_loop`'s calls of :func:`posenc._native.rotate_qk` that passed its checks."""

_CHECKED_SIZE = 4096
"""At most this many signatures are kept (then the set starts afresh)."""


def _loop_backend(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """The loop directly, or as the operator where autograd records it (the operator's dispatch measured
    ~15 µs a call on the CPU: a decoding step's whole budget for the positions)."""
    q, k = args[0], args[1]
    if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad):
        return _operator(*args)
    return _loop(*args)


_LIBRARY = torch.library.Library("posenc", "FRAGMENT")
_LIBRARY.define(
    "rotate_qk(Tensor q, Tensor k, Tensor? q_pos, Tensor? k_pos, Tensor cos, Tensor sin, Tensor theta, "
    "int q_offset, int k_offset, str layout, bool inverse) -> (Tensor, Tensor)"
)
_LIBRARY.impl("rotate_qk", launch, "CUDA")
_LIBRARY.impl("rotate_qk", _loop, "CPU")


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
    Backend("loop", _loop_backend, devices=CPU, dtypes=LOOP_DTYPES, needs="native", supports=_loop_ok),
    Backend("triton", _operator, devices=CUDA, needs="triton", compiled=True,
            supports=lambda call: not call.context and _kernel_ok(call)),
    Backend("triton, context", _operator, devices=CUDA, needs="triton", eager=False, compiled=True,
            supports=_kernel_ok),
    Backend("tables", reference, compiled=True, exported=True, differentiable=True),
)  # fmt: skip
"""The backends of the q+k rotation, in order of preference (module docstring)."""


def one_launch(call: QK) -> Backend[QK] | None:
    """The one-launch backend that serves ``call`` (its ``apply`` takes the operator's arguments), or
    ``None`` where the caller rotates by tables."""
    backend = select(BACKENDS, call, Environment.of(call.q))
    return None if backend.name == "tables" else backend


def table_dtype(backend: Backend[QK], dtype: torch.dtype) -> torch.dtype:
    """The dtype of the cached tables ``backend`` reads for queries and keys of ``dtype``: the work dtype
    (float64 beside float64, else float32), but bfloat16 beside bfloat16 for the CPU loop, which widens
    them exactly as it reads them (half the table traffic) and so rotates as the CPU table path does."""
    if dtype == torch.bfloat16 and backend.name == "loop":
        return dtype
    return torch.float64 if dtype == torch.float64 else torch.float32
