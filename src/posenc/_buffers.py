"""The memory of a NumPy array or a torch tensor as a compiled loop addresses it, and the checks that
keep a loop inside it: a pointer, a shape and strides in elements, and the bytes of the storage the
array lives in.

A loop given ``(pointer, shape, strides)`` touches the elements ``pointer + Σ_k i_k·stride_k`` for
``0 ≤ i_k < shape_k``; :meth:`Buffer.require_inside` checks that the lowest and the highest of them
lie in the storage, :meth:`Buffer.require_unaliased` that no two index tuples write the same element,
:func:`require_disjoint` that an output shares no byte range with an input. Torch is never imported:
a tensor is recognised by its methods.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.array_utils import byte_bounds


class Buffer:
    """One argument of a compiled loop: ``name`` (for messages), its first element's address ``ptr``,
    ``shape``, ``strides`` in elements, ``dtype`` (NumPy's name, e.g. ``"float32"``, ``"bfloat16"``),
    ``itemsize`` in bytes, the storage's bytes ``[lo, hi)``; derived: ``numel`` and the bytes
    ``[first, last)`` the elements cover (``(0, 0)`` for an empty view)."""

    __slots__ = ("dtype", "first", "hi", "itemsize", "last", "lo", "name", "numel", "ptr", "shape", "strides")

    def __init__(
        self,
        name: str,
        ptr: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: str,
        itemsize: int,
        lo: int,
        hi: int,
    ) -> None:
        self.name, self.ptr, self.shape, self.strides = name, ptr, shape, strides
        self.dtype, self.itemsize, self.lo, self.hi = dtype, itemsize, lo, hi
        numel, low, high = 1, 0, 0
        for n, st in zip(shape, strides, strict=True):
            numel *= n
            if st < 0:
                low += st * (n - 1)
            else:
                high += st * (n - 1)
        self.numel = numel
        self.first, self.last = (ptr + low * itemsize, ptr + (high + 1) * itemsize) if numel else (0, 0)

    def require_inside(self) -> None:
        """``ValueError`` unless every element of the view lies in the storage's bytes."""
        first, last = self.first, self.last
        if first < last and (first < self.lo or last > self.hi):
            raise ValueError(
                f"{self.name}: shape {self.shape} with strides {self.strides} reaches bytes "
                f"[{first - self.lo}, {last - self.lo}) of a storage of {self.hi - self.lo} bytes"
            )

    def require_unaliased(self) -> None:
        """``ValueError`` if two index tuples of the view address one element (a broadcast or
        overlapping output): sorted by stride, each dimension of size > 1 must step past all the
        smaller ones. An empty view writes nothing."""
        if self.numel == 0:
            return
        reach = 1
        for st, n in sorted((abs(st), n) for n, st in zip(self.shape, self.strides, strict=True) if n > 1):
            if st < reach:
                raise ValueError(
                    f"{self.name}: shape {self.shape} with strides {self.strides} writes some elements "
                    "more than once; an output must not overlap itself"
                )
            reach = st * n

    def require_contiguous(self) -> None:
        """``ValueError`` unless the view is row-major contiguous (dimensions of size 1 may have any stride,
        an empty view is contiguous)."""
        if self.numel == 0:
            return
        expected = 1
        for n, st in zip(reversed(self.shape), reversed(self.strides), strict=True):
            if n > 1 and st != expected:
                raise ValueError(
                    f"{self.name}: shape {self.shape} with strides {self.strides} is not contiguous; "
                    "this loop takes row-major contiguous arrays"
                )
            expected *= n

    def require_shape(self, shape: Sequence[int], meaning: str) -> None:
        """``ValueError`` unless the shape is ``shape`` (``meaning`` says what each size is)."""
        if self.shape != tuple(shape):
            raise ValueError(f"{self.name}: shape {self.shape}, expected {tuple(shape)} ({meaning})")

    def require_ndim(self, ndim: int, meaning: str) -> None:
        """``ValueError`` unless the view has ``ndim`` dimensions (``meaning`` names them)."""
        if len(self.shape) != ndim:
            raise ValueError(f"{self.name}: {len(self.shape)} dimensions {self.shape}, expected {meaning}")

    def require_unit_stride(self) -> None:
        """``ValueError`` unless the last dimension is contiguous (stride 1, size ≤ 1, or an empty view)."""
        if self.numel and self.shape[-1] > 1 and self.strides[-1] != 1:
            raise ValueError(
                f"{self.name}: stride {self.strides[-1]} along the last dimension, expected 1 (contiguous rows)"
            )

    def require_dtype(self, allowed: Sequence[str]) -> None:
        """``TypeError`` unless the dtype is one of ``allowed``."""
        if self.dtype not in allowed:
            raise TypeError(f"{self.name}: dtype {self.dtype}, expected one of {', '.join(allowed)}")


def buffer(name: str, array: Any, *, device: Any = None) -> Buffer:
    """The :class:`Buffer` of ``array``, a torch tensor on ``device`` (default the CPU; the GPU kernels name
    theirs) or a NumPy array; ``TypeError`` for anything else, ``ValueError`` for a tensor on another
    device or strides that are not whole elements. Only metadata is read, never the elements."""
    if hasattr(array, "untyped_storage") and hasattr(array, "data_ptr"):
        torch = sys.modules["torch"]  # loaded: array is one of its tensors
        if array.layout is not torch.strided:
            raise TypeError(f"{name}: a tensor of layout {array.layout}; the kernels take strided tensors")
        if device is None and not array.is_cpu:
            raise ValueError(f"{name}: a tensor on {array.device}; the compiled loops take CPU tensors")
        if device is not None and array.device != device:
            raise ValueError(
                f"{name}: a tensor on {array.device}, expected {device} like the other arguments"
            )
        storage = array.untyped_storage()
        lo = storage.data_ptr()
        dtype = str(array.dtype).removeprefix("torch.")
        return Buffer(
            name, array.data_ptr(), tuple(array.shape), array.stride(), dtype, array.itemsize, lo, lo + storage.nbytes()
        )  # fmt: skip
    if isinstance(array, np.ndarray):
        itemsize = array.itemsize
        if any(st % itemsize for st in array.strides):
            raise ValueError(
                f"{name}: byte strides {array.strides} are not multiples of the item size {itemsize}"
            )
        owner = array
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        lo, hi = byte_bounds(owner)
        strides = tuple(st // itemsize for st in array.strides)
        return Buffer(name, array.ctypes.data, array.shape, strides, array.dtype.name, itemsize, lo, hi)
    raise TypeError(f"{name}: {type(array).__name__}, expected a NumPy array or a torch tensor")


def require_disjoint(out: Buffer, *inputs: Buffer) -> None:
    """``ValueError`` if the bytes ``out`` covers meet those of an input (the loops read their inputs
    while writing ``out``, through pointers declared not to alias)."""
    for other in inputs:
        if (
            out.first < out.last
            and other.first < other.last
            and out.first < other.last
            and other.first < out.last
        ):
            raise ValueError(f"{out.name} overlaps {other.name} in memory; the loop needs them apart")
