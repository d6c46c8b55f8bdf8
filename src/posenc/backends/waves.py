"""Sinusoid waves ``out[r, c] = amplitude[c] · [sin(t_r·w) | cos(t_r·w)][columns[c]]`` (Vaswani et al. 2017,
§3.5, for any frequencies): the backends of :func:`posenc.nn.functional.waves`.

The reference forms every angle ``t ⊗ w`` directly in float64 (:func:`posenc.nn.functional._direct`): exact,
differentiable, and what compiled and exported graphs hold. Over a range of positions ``offset … offset +
n − 1`` (an int ``positions``) the others build the rows by the angle addition formulas from ``√n`` fine and
``√n`` coarse rows in float64, one rounding per entry (:mod:`posenc.nn.functional`'s docstring). In order
(:data:`BACKENDS`):

=========  ==========================================================================================
triton     CUDA, the sinusoidal layouts without amplitudes: one kernel over the whole table
loop       CPU, the interleaved ``(sin, cos)`` layout without amplitudes: the compiled loop of
           :mod:`posenc._native` (``expi_rows``), bit for bit :func:`posenc.sinusoidal`'s rows
range      any layout and amplitudes: the shift identity in torch operations, block by block
reference  every angle formed directly; also ranges of at most 64 rows, explicit positions (never read on
           the host to find out whether they form a range) and gradients to the frequencies
=========  ==========================================================================================
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from posenc import _gpu, _native, tables
from posenc.backends import Backend, Environment, select
from posenc.backends.rotate import CPU, CUDA
from posenc.nn import functional as F


class Waves(NamedTuple):
    """One call: ``positions`` (an int ``n``: the range from ``offset``), float64 frequencies ``w`` ``[f]``,
    ``columns`` ``[c]`` on ``w``'s device (``given``: as the caller gave them, read on the host where they
    are a CPU tensor), float64 ``amp`` ``[c]`` or ``None``, the output ``dtype``, and whether gradients must
    reach the frequencies or amplitudes (``differentiable``)."""

    positions: torch.Tensor | int
    w: torch.Tensor
    columns: torch.Tensor
    given: torch.Tensor
    amp: torch.Tensor | None
    dtype: torch.dtype
    offset: int
    differentiable: bool

    @property
    def rows(self) -> int:
        """The rows of a range (``0`` for explicit positions)."""
        return self.positions if isinstance(self.positions, int) else 0


def _ranged(call: Waves) -> bool:
    return call.rows > F._DIRECT_ROWS and not call.differentiable


def _triton_ok(call: Waves) -> bool:
    return _ranged(call) and call.amp is None and F._gpu_layout(call.given, call.w.shape[0]) is not None


def _triton(call: Waves) -> torch.Tensor:
    gpu = _gpu.kernels(call.w.device.type, call.dtype)
    assert gpu is not None
    out = torch.empty(call.rows, call.columns.shape[0], dtype=call.dtype, device=call.w.device)
    layout = F._gpu_layout(call.given, call.w.shape[0])
    gpu.waves(out, *F._fine_coarse(float(call.offset), call.rows, call.w), layout, checks="signature")
    return out


def _loop_ok(call: Waves) -> bool:
    c = call.columns.shape[0]
    return (
        _ranged(call)
        and call.amp is None
        and c == 2 * call.w.shape[0]
        and F._same_columns(call.given, F._interleaved_columns(c))
    )


def _loop(call: Waves) -> torch.Tensor:
    f = call.w.shape[0]
    out = torch.empty(call.rows, 2 * f, dtype=call.dtype)
    w, start, block = call.w.detach().numpy(), float(call.offset), tables._shift_block(call.rows)
    _native.expi_rows(out, "interleaved", w, start, 1.0, block)
    return out


def _range(call: Waves) -> torch.Tensor:
    return F._range(float(call.offset), 1.0, call.rows, call.w, call.columns, call.amp, call.dtype)


def _reference(call: Waves) -> torch.Tensor:
    if isinstance(call.positions, int):
        t = call.offset + torch.arange(call.positions, dtype=torch.float64, device=call.w.device)
    else:
        t = call.positions.to(device=call.w.device, dtype=torch.float64)
    return F._direct(t, call.w, call.columns, call.amp).to(call.dtype)


BACKENDS: tuple[Backend[Waves], ...] = (
    Backend("triton", _triton, devices=CUDA, needs="triton", supports=_triton_ok),
    Backend("loop", _loop, devices=CPU, dtypes=frozenset({torch.float32, torch.float64}), needs="native",
            supports=_loop_ok),
    Backend("range", _range, supports=_ranged),
    Backend("reference", _reference, compiled=True, exported=True, differentiable=True),
)  # fmt: skip
"""The backends of :func:`waves`, in order of preference (module docstring)."""


def waves(call: Waves) -> torch.Tensor:
    """The table of ``call`` by the first of :data:`BACKENDS` that serves it."""
    return select(BACKENDS, call, Environment.at(call.w.device, call.dtype)).apply(call)  # type: ignore[return-value]
