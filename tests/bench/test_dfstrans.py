"""DFStransDFTEncoding against an independent float64 transcription of the published DFStrans module."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc import registry
from posenc.nn import build_encoding
from posenc_bench.dfstrans import DFStransDFTEncoding


def published_rows(s: int, d: int, calls: int) -> np.ndarray:
    """Rows added by call number ``calls`` (1-based) of the published module for a sequence of ``s`` steps.

    Transcribed from the formulas: column 2k = cos(2πk t/d), column 2k+1 = sin(2πk t/d),
    k = 0 … d/2−1, positions t = 1 … s; each call scales row 1 and row s by sqrt(1/d) and the
    others by sqrt(2/d), and keeps the result.
    """
    table = np.zeros((s, d))
    for i in range(s):
        t = i + 1
        for k in range(d // 2):
            table[i, 2 * k] = math.cos(2 * math.pi * k * t / d)
            table[i, 2 * k + 1] = math.sin(2 * math.pi * k * t / d)
    factor = np.full(s, math.sqrt(2 / d))
    factor[0] = math.sqrt(1 / d)
    factor[-1] = factor[-1] * math.sqrt(1 / d) / math.sqrt(2 / d) if s > 1 else 1 / d
    return table * factor[:, None] ** calls


def test_registered_as_an_input_encoding():
    info = registry.get("dfstrans_dft")
    assert info.family == "input" and not info.learned
    assert info.module_class() is DFStransDFTEncoding


@pytest.mark.parametrize(("s", "d"), [(7, 12), (1, 8), (2, 6), (30, 16)])
def test_first_three_calls_match_the_transcription(s, d):
    enc = DFStransDFTEncoding(d, max_len=40).double()
    x = torch.zeros(3, s, d, dtype=torch.float64)
    for n in (1, 2, 3):
        out = enc(x)
        np.testing.assert_allclose(out[1].numpy(), published_rows(s, d, n), rtol=1e-12, atol=1e-14)
        assert int(enc.calls) == n


def test_table_layout_zero_sin_column_and_no_nyquist():
    d = 10
    table = DFStransDFTEncoding.initial_table(6, d).numpy()
    np.testing.assert_array_equal(table[:, 1], 0.0)  # sin(0·t)
    np.testing.assert_array_equal(table[:, 0], 1.0)  # cos(0·t)
    # highest frequency is 2π(d/2−1)/d: column d−2 is cos of it, not the Nyquist cos(πt)
    t = np.arange(6)
    np.testing.assert_allclose(table[:, d - 2], np.cos(2 * np.pi * (d // 2 - 1) * t / d), atol=1e-15)
    assert not np.allclose(table[:, d - 2], np.cos(np.pi * t))


def test_decay_sequence_of_the_published_measurement():
    """d = 240, their input (80 windows, 4 instances, 240, 20 sensors) is ours [4·20, 80, 240]; five calls."""
    d, T = 240, 80
    enc = build_encoding("dfstrans_dft", d_model=d, n_heads=10, max_len=100)
    x = torch.zeros(4 * 20, T, d)
    norms, middles = [], []
    for _ in range(5):
        added = enc(x)[0].double()
        norms.append(float(added.norm(dim=-1).mean()))
        middles.append(added[1:-1].norm(dim=-1))
    expected = [0.99, 0.090, 0.0082, 0.00075, 6.8e-5]
    np.testing.assert_allclose(norms, expected, rtol=0.012)
    for before, after in itertools.pairwise(middles):
        np.testing.assert_allclose((after / before).numpy(), math.sqrt(2 / d), rtol=1e-5)
    np.testing.assert_allclose(middles[0].numpy(), 1.0, rtol=1e-5)  # sqrt(2/d)·sqrt(d/2)
    assert int(enc.calls) == 5


def test_evaluation_calls_decay_too_and_table_does_not():
    enc = DFStransDFTEncoding(8)
    x = torch.zeros(1, 5, 8)
    enc.eval()
    with torch.inference_mode():
        enc(x)
    before = enc.table(5).clone()
    np.testing.assert_allclose(enc.table(5).numpy(), before.numpy())  # table() reads, does not decay
    assert int(enc.calls) == 1
    enc(x)
    np.testing.assert_allclose(enc.table(5)[1:-1].numpy(), (before[1:-1] * 0.5).numpy(), rtol=1e-6)


def test_decayed_state_travels_in_the_state_dict():
    a, b = DFStransDFTEncoding(8), DFStransDFTEncoding(8)
    x = torch.randn(2, 4, 8)
    a(x)
    a(x)
    b.load_state_dict(a.state_dict())
    assert int(b.calls) == 2
    torch.testing.assert_close(b(x), a(x))
    a.reset_parameters()
    assert int(a.calls) == 0
    torch.testing.assert_close(a.stored, DFStransDFTEncoding.initial_table(a.max_len + 1, 8))


@settings(max_examples=20, deadline=None)
@given(half=st.integers(1, 12), s=st.integers(1, 20), scale=st.floats(0.1, 10))
def test_scale_multiplies_what_is_added(half, s, scale):
    d = 2 * half
    plain, scaled = (
        DFStransDFTEncoding(d, max_len=20),
        DFStransDFTEncoding(d, max_len=20, scale=scale, unit_norm=True),
    )
    x = torch.zeros(1, s, d, dtype=torch.float64)
    torch.testing.assert_close(scaled.double()(x), scale * plain.double()(x))


def test_gradients_reach_the_input_and_a_learned_scale():
    enc = DFStransDFTEncoding(8, learn_scale=True)
    x = torch.randn(2, 5, 8, requires_grad=True)
    enc(x).square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert enc.scale.grad is not None and enc.scale.grad != 0


def test_compiled_forward_decays_like_eager():
    eager, compiled = DFStransDFTEncoding(16, max_len=32), DFStransDFTEncoding(16, max_len=32)
    fn = torch.compile(compiled, fullgraph=True, backend="eager")
    x = torch.randn(3, 10, 16)
    for _ in range(3):
        torch.testing.assert_close(fn(x), eager(x))
    assert int(compiled.calls) == 3
    torch.testing.assert_close(compiled.stored, eager.stored)


def test_concat_mode_appends_the_decayed_rows():
    enc = DFStransDFTEncoding(4, mode="concat", dim=6)
    out = enc(torch.zeros(2, 3, 4))
    assert out.shape == (2, 3, 10)
    np.testing.assert_allclose(out[0, :, 4:].double().numpy(), published_rows(3, 6, 1), atol=1e-7)


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="dim must be even"):
        DFStransDFTEncoding(7)
    enc = DFStransDFTEncoding(8, max_len=4)
    with pytest.raises(ValueError, match="max_len=4"):
        enc(torch.zeros(1, 5, 8))
    with pytest.raises(ValueError, match="offset=2"):
        enc(torch.zeros(1, 3, 8), offset=2)
    with pytest.raises(ValueError, match="positions"):
        enc(torch.zeros(1, 3, 8), positions=torch.arange(3))
    assert int(enc.calls) == 0  # refused calls do not decay the table
