"""Sinusoidal rows on the CPU with and without the compiled loop, against :func:`posenc.sinusoidal`.
A backend test: it switches ``posenc._native.kernels`` off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import posenc
from posenc import _native
from posenc.nn import SinusoidalEncoding


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled loop", "pure torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("offset", [0, 10**7 - 3000])
def test_cpu_rows_equal_the_numpy_table_bit_for_bit(monkeypatch, compiled, dtype, offset):
    """On the CPU the torch rows and posenc.sinusoidal share their float64 factors (one mechanism)."""
    if not compiled:
        monkeypatch.setattr(_native, "kernels", None)
    elif _native.kernels is None:
        pytest.skip("posenc._kernels is not built here")
    m = SinusoidalEncoding(64)
    got = m(torch.zeros(1, 3000, 64, dtype=dtype), offset=offset)[0]
    want = posenc.sinusoidal(np.arange(offset, offset + 3000), 64, dtype=str(dtype).removeprefix("torch."))
    if compiled or dtype == torch.float32:  # the same loop, or float64 products rounding to one float32
        np.testing.assert_array_equal(got.numpy(), want)
    else:  # torch's and NumPy's complex multiplies may differ by a fused multiply-add: one rounding
        assert np.abs(got.numpy() - want).max() <= 2**-52
