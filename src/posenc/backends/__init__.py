"""posenc's fast paths: for each hot operation, one readable reference and an ordered table of backends.

Each hot operation (a rotation, the one-launch rotation of queries and keys, sinusoid waves, Shaw's slots)
lives in its own module of this package with

* its *reference*: the definition, short enough to read, tested against the papers' formulas;
* its *backends*: :class:`Backend` objects in order of preference (the compiled CPU loop of
  :mod:`posenc._native`, the Triton kernels of :mod:`posenc._gpu`, a form for the compiler, …), each
  declaring where it may run and saying, for a call's arguments, whether it supports them;
* one :func:`select` call, the only code that looks at the device, the dtype, the compile/export state and
  the ``POSENC_NATIVE`` / ``POSENC_TRITON`` switches.

Every backend is tested against its operation's reference through :func:`select`'s seam
(``tests/backends``). The forward path reads no tensor values on the host, so it runs inside CUDA graphs
and under ``torch.compile(fullgraph=True)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

import torch

from posenc import _gpu, _native

Call = TypeVar("Call")
"""The arguments of one call of an operation, as that operation's backends read them."""

Needs = Literal["native", "triton"]


@dataclasses.dataclass(frozen=True)
class Environment:
    """What :func:`select` knows about a call's setting: the tensor's device type and dtype, whether
    ``torch.compile`` is tracing or ``torch.export`` exporting, and which compiled kernels are loaded and
    switched on (``POSENC_NATIVE=0`` / ``POSENC_TRITON=0`` switch them off)."""

    device: str
    dtype: torch.dtype
    compiling: bool
    exporting: bool
    native: bool
    triton: bool

    @classmethod
    def of(cls, x: torch.Tensor) -> Environment:
        """The setting of a call on ``x``."""
        return cls.at(x.device, x.dtype)

    @classmethod
    def at(cls, device: torch.device, dtype: torch.dtype) -> Environment:
        """The setting of a call that makes tensors of ``dtype`` on ``device``."""
        exporting = torch.compiler.is_exporting()
        return cls(
            device=device.type,
            dtype=dtype,
            compiling=exporting or torch.compiler.is_compiling(),
            exporting=exporting,
            native=_native.kernels is not None,
            triton=device.type == "cuda" and _triton_loaded(str(dtype)),
        )


@torch.compiler.assume_constant_result
def _triton_loaded(dtype: str) -> bool:
    """Whether :mod:`posenc._gpu` has Triton kernels for CUDA tensors of ``dtype``: a constant while
    ``torch.compile`` traces (the import behind it is not traceable)."""
    return _gpu.kernels("cuda", dtype) is not None


@dataclasses.dataclass(frozen=True)
class Backend(Generic[Call]):
    """One way to compute an operation.

    ``devices``/``dtypes``: where it may run (``None``: any, the meta device included); ``needs``: the compiled kernels it
    calls; ``eager``/``compiled``/``exported``: whether it may run eagerly, while ``torch.compile`` traces,
    and while ``torch.export`` exports; ``supports(call)``: the call-specific conditions (layouts, strides,
    shapes), read from tensor metadata only; ``apply``: the computation itself (its signature is the
    operation's); ``differentiable``: ``apply`` records its own autograd graph (torch operations), so the
    operation needs no backward of its own around it."""

    name: str
    apply: Callable[..., object]
    devices: frozenset[str] | None = None
    dtypes: frozenset[torch.dtype] | None = None
    needs: Needs | None = None
    eager: bool = True
    compiled: bool = False
    exported: bool = False
    supports: Callable[[Call], bool] = lambda call: True
    differentiable: bool = False

    def admits(self, env: Environment) -> bool:
        """Whether the setting ``env`` allows this backend, before its call-specific conditions."""
        if env.exporting:
            allowed = self.exported
        elif env.compiling:
            allowed = self.compiled
        else:
            allowed = self.eager
        return (
            allowed
            and (self.devices is None or env.device in self.devices)
            and (self.dtypes is None or env.dtype in self.dtypes)
            and (self.needs is None or getattr(env, self.needs))
        )


def select(backends: Sequence[Backend[Call]], call: Call, env: Environment) -> Backend[Call]:
    """The first of ``backends`` that ``env`` admits and that supports ``call``.

    The last backend of every operation's table is its reference, admitted everywhere and supporting every
    call, so a choice always exists; a table without one is a programming error (``LookupError``)."""
    for backend in backends:
        if backend.admits(env) and backend.supports(call):
            return backend
    raise LookupError(f"no backend of {[b.name for b in backends]} serves this call in {env}")
