"""Every CPU backend of the sinusoid waves (:data:`posenc.backends.waves.BACKENDS`), chosen through
:func:`posenc.backends.select`'s seam, against the reference (every angle formed directly in float64), and
which backend each kind of call gets. The Triton kernel's twin is in tests/test_cuda.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posenc import _native, spectrum
from posenc.backends import Environment, select, waves
from posenc.nn import functional

LAYOUTS = ["interleaved", "split", "interleaved_cos_first"]


def call(
    layout: str, dtype: torch.dtype, *, n: int = 300, offset: int = 977, amp: bool = False
) -> waves.Waves:
    w = torch.from_numpy(spectrum.geometric(64, 10000.0))
    columns = functional.layout_index(64, layout)
    amplitude = torch.linspace(0.5, 2.0, 64, dtype=torch.float64) if amp else None
    return waves.Waves(n, w, columns, columns, amplitude, dtype, offset, False)


@pytest.mark.parametrize("name", [b.name for b in waves.BACKENDS if b.devices is None or "cpu" in b.devices])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("amp", [False, True], ids=["", "amplitudes"])
def test_every_backend_equals_the_reference(name, layout, dtype, amp):
    index = [b.name for b in waves.BACKENDS].index(name)
    backend = waves.BACKENDS[index]
    if backend.needs == "native" and _native.kernels is None:
        pytest.skip("the compiled loops are not built here")
    c = call(layout, dtype, amp=amp)
    chosen = select(waves.BACKENDS[index:], c, Environment.at(c.w.device, dtype))
    if chosen is not backend:
        assert not backend.supports(c)
        assert name == "loop" and (layout != "interleaved" or amp)  # it serves the sinusoidal encoding only
        return
    want = waves.BACKENDS[-1].apply(c)
    tol = 1e-7 if dtype == torch.float32 else 1e-12  # each rounded once from float64; float64: a few ulps
    torch.testing.assert_close(backend.apply(c), want, rtol=0, atol=tol)


def test_each_kind_of_call_gets_its_backend():
    env = Environment.at(torch.device("cpu"), torch.float32)
    native = "loop" if _native.kernels is not None else "range"
    assert select(waves.BACKENDS, call("interleaved", torch.float32), env).name == native
    assert select(waves.BACKENDS, call("split", torch.float32), env).name == "range"
    assert select(waves.BACKENDS, call("split", torch.float32, n=64), env).name == "reference"  # few rows
    explicit = call("split", torch.float32)._replace(positions=torch.arange(300))
    assert select(waves.BACKENDS, explicit, env).name == "reference"  # positions never read to find a range
    learnt = call("split", torch.float32)._replace(differentiable=True)
    assert select(waves.BACKENDS, learnt, env).name == "reference"
    compiling = dataclasses.replace(env, compiling=True)
    assert select(waves.BACKENDS, call("interleaved", torch.float32), compiling).name == "reference"
    cuda = dataclasses.replace(env, device="cuda", triton=True)
    assert select(waves.BACKENDS, call("split", torch.float32), cuda).name == "triton"
    assert select(waves.BACKENDS, call("split", torch.float32, amp=True), cuda).name == "range"
