"""Input encodings under casts and inference mode: no silent precision loss, no broken training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from posenc.nn import (
    DFTEncoding,
    LearnableFrequencyEncoding,
    LearnedEncoding,
    SinusoidalEncoding,
    TransformerEncoder,
)

D = 8
FACTORIES = {
    "sinusoidal": lambda **kw: SinusoidalEncoding(D, **kw),
    "dft": lambda **kw: DFTEncoding(D, **kw),
    "learned": lambda **kw: LearnedEncoding(D, max_len=8, **kw),
    "learnable_frequency": lambda **kw: LearnableFrequencyEncoding(D, **kw),
}
OPTIONS = [
    {},
    {"learn_scale": True},
    {"unit_norm": True, "learn_scale": True},
    {"scale": 2.0},
    {"mode": "concat", "dim": 6, "learn_scale": True},
]


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_cache_built_under_inference_mode_does_not_break_training(name, options):
    enc = FACTORIES[name](**options)
    with torch.inference_mode():
        enc(torch.randn(2, 6, D))  # builds (and caches) rows for 6 positions as inference tensors
    x = torch.randn(2, 4, D, requires_grad=True)
    out = enc(x)
    out.square().sum().backward()  # a product: the rows are saved for backward
    assert x.grad is not None and torch.isfinite(x.grad).all()
    with torch.inference_mode():  # and back again: inference still works from the same cache
        assert torch.equal(enc(x.detach()), out.detach())


@pytest.mark.parametrize("encoding", ["sinusoidal", "dft", "learnable_frequency"])
def test_encoder_run_under_inference_mode_then_trained(encoding):
    torch.manual_seed(0)
    model = TransformerEncoder(D, 2, 1, encoding=encoding, max_len=8)
    with torch.inference_mode():
        model(torch.randn(1, 6, D))
    model(torch.randn(3, 5, D)).square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def _reference(positions: np.ndarray, d: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al. (2017) §3.5 in float64, written out independently: sin at even, cos at odd columns."""
    i = np.arange(d // 2, dtype=np.float64)
    angles = positions[:, None].astype(np.float64) * base ** (-2 * i / d)
    out = np.empty((len(positions), d))
    out[:, 0::2], out[:, 1::2] = np.sin(angles), np.cos(angles)
    return out


@pytest.mark.parametrize("cast", ["bfloat16", "half", "double_then_bfloat16"])
def test_casting_a_learnable_frequency_encoding_keeps_float64_frequencies(cast):
    d = 64
    enc = LearnableFrequencyEncoding(d)
    if cast == "half":
        enc.half()
    elif cast == "bfloat16":
        enc.to(torch.bfloat16)
    else:
        enc.double().to(torch.bfloat16)
    assert enc.frequencies.dtype == torch.float64 and isinstance(enc.frequencies, torch.nn.Parameter)
    positions = np.arange(1024, 4096)
    rows = enc(torch.zeros(1, 4096, d))[0, 1024:].detach().double().numpy()
    assert np.abs(rows - _reference(positions, d)).max() < 1e-6  # float32 output of float64 angles
    low = enc(torch.zeros(1, 4, d, dtype=torch.bfloat16))
    assert low.dtype == torch.bfloat16
    low.float().sum().backward()
    assert enc.frequencies.grad.dtype == torch.float64 and torch.isfinite(enc.frequencies.grad).all()
    torch.optim.AdamW(enc.parameters(), lr=1e-3).step()  # mixed dtypes train


def test_cast_keeps_training_state_of_the_frequencies():
    enc = LearnableFrequencyEncoding(8)
    enc(torch.zeros(1, 3, 8)).sum().backward()
    grad = enc.frequencies.grad.clone()
    before = enc.frequencies.detach().clone()
    enc.half()
    assert torch.equal(enc.frequencies.detach(), before) and torch.equal(enc.frequencies.grad, grad)
    assert enc.frequencies.requires_grad
