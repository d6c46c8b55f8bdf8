"""posenc's optional GPU kernels (Triton: :mod:`posenc._gpu_kernels`), loaded at first use, or ``None``.

Three launchers, each one pass over its output:

* ``rotate``: rotary pairs (Su et al. 2021, eq. 34) for :func:`posenc.nn.apply_rotary`, the GPU twin
  of the CPU loop in :mod:`posenc._native` (same arguments: tables in the work dtype, per pair or in
  the layout with signed sines), one launch;
* ``rotate_qk``: queries and keys of one attention call rotated by the cached tables gathered at their
  positions, one launch, and a second small one for rows whose positions lie beyond the cache (float64
  angles) where the host cannot rule them out;
* ``waves``: sinusoidal tables (``(sin, cos)`` pairs, ``(cos, sin)`` pairs or split) over a range of
  positions for :func:`posenc.nn.functional.waves`, by the angle addition formulas in float64, one launch.

They are used for CUDA tensors when Triton is installed (it comes with PyTorch's CUDA wheels on
Linux). Without Triton, or with the environment variable ``POSENC_TRITON=0``, :func:`kernels` is
``None`` and posenc runs its pure PyTorch code, which computes the same values (the CUDA tests compare
both with float64 references). Importing this module imports neither Triton nor the kernels.
"""

from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType


@functools.cache
def _load() -> ModuleType | None:
    if os.environ.get("POSENC_TRITON", "1").strip() == "0":
        return None
    try:
        return importlib.import_module("posenc._gpu_kernels")
    except ImportError:  # no Triton (a CPU build of PyTorch, or a platform without it)
        return None


DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})
"""The dtypes the kernels read and write (names, so this module needs no torch)."""


def kernels(device_type: str, dtype: object) -> ModuleType | None:
    """The kernel module for tensors of ``dtype`` (a torch dtype) on ``device_type``: CUDA and a dtype of
    :data:`DTYPES`, with Triton installed; else ``None``."""
    if device_type != "cuda" or str(dtype).removeprefix("torch.") not in DTYPES:
        return None
    return _load()
