"""Input encodings take ``[b, s]`` positions: one row of positions per sequence (a left-padded batch,
packed sequences restarting at 0). Row ``r`` of the output is the 1-D result for ``positions[r]`` and
equals the papers' formulas, computed here in float64 with NumPy.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc.nn import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding

D = 8
MAX_LEN = 40


def sinusoidal_rows(t: np.ndarray, d: int, base: float = 10000.0) -> np.ndarray:
    """Vaswani et al. 2017, §3.5: PE[t, 2i] = sin(t·ρ^(−2i/d)), PE[t, 2i+1] = cos(…)."""
    out = np.empty((*t.shape, d))
    for i in range((d + 1) // 2):
        w = base ** (-2 * i / d)
        out[..., 2 * i] = np.sin(t * w)
        if 2 * i + 1 < d:
            out[..., 2 * i + 1] = np.cos(t * w)
    return out


def dft_rows(t: np.ndarray, d: int) -> np.ndarray:
    """Idé, Labaien & Chen 2024, eq. 21: (a_0, a_1 … a_K, b_1 … b_K, b_0)."""
    k = np.arange(1, (d - 1) // 2 + 1)
    w = 2 * np.pi * k / d
    parts = [np.full((*t.shape, 1), 1 / math.sqrt(d))]
    parts += [math.sqrt(2 / d) * np.cos(t[..., None] * w), math.sqrt(2 / d) * np.sin(t[..., None] * w)]
    if d % 2 == 0:
        parts.append((np.cos(np.pi * t) / math.sqrt(d))[..., None])
    return np.concatenate(parts, axis=-1)


def make(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return {
        "sinusoidal": lambda: SinusoidalEncoding(D),
        "dft": lambda: DFTEncoding(D),
        "learned": lambda: LearnedEncoding(D, max_len=MAX_LEN),
        "learnable_frequency": lambda: LearnableFrequencyEncoding(D),
    }[name]()


def formula(name: str, module: torch.nn.Module, t: np.ndarray) -> np.ndarray:
    if name == "learned":
        return module.weight.detach().double().numpy()[t]
    if name == "dft":
        return dft_rows(t.astype(np.float64), D)
    return sinusoidal_rows(t.astype(np.float64), D)


NAMES = ["sinusoidal", "dft", "learned", "learnable_frequency"]


@st.composite
def batches(draw, limit: int) -> np.ndarray:
    b = draw(st.integers(1, 4))
    s = draw(st.integers(1, 6))
    return np.array(
        draw(st.lists(st.lists(st.integers(0, limit - 1), min_size=s, max_size=s), min_size=b, max_size=b))
    )


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", ["add", "concat"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_each_row_of_positions_gives_its_own_rows(name, mode, data):
    t = data.draw(batches(D if name == "dft" else MAX_LEN))
    module = make(name) if mode == "add" else _concat(name)
    x = torch.randn(t.shape[0], t.shape[1], D, dtype=torch.float64)
    got = module(x, positions=torch.from_numpy(t))
    for r in range(t.shape[0]):
        one = module(x[r : r + 1], positions=torch.from_numpy(t[r]))
        torch.testing.assert_close(got[r : r + 1], one, rtol=0, atol=0)
    rows = got[..., -D:] - (0 if mode == "concat" else x)
    np.testing.assert_allclose(rows.detach().numpy(), formula(name, module, t), rtol=0, atol=1e-12)
    if mode == "concat":
        torch.testing.assert_close(got[..., :D], x, rtol=0, atol=0)


def _concat(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return {
        "sinusoidal": lambda: SinusoidalEncoding(D, mode="concat"),
        "dft": lambda: DFTEncoding(D, mode="concat"),
        "learned": lambda: LearnedEncoding(D, mode="concat", max_len=MAX_LEN),
        "learnable_frequency": lambda: LearnableFrequencyEncoding(D, mode="concat"),
    }[name]()


@pytest.mark.parametrize("name", NAMES)
def test_left_padded_and_packed_rows_and_one_shared_row(name):
    module = make(name)
    x = torch.zeros(3, 4, D, dtype=torch.float64)
    packed = torch.tensor([[0, 1, 2, 3], [0, 1, 0, 1], [0, 0, 0, 1]])  # full, two packed, left-padded
    got = module(x, positions=packed)
    np.testing.assert_allclose(
        got.detach().numpy(), formula(name, module, packed.numpy()), rtol=0, atol=1e-12
    )
    shared = module(x, positions=torch.arange(4)[None])  # [1, s] serves every row
    torch.testing.assert_close(shared, module(x, positions=torch.arange(4)), rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_unit_norm_and_learned_scale_apply_per_row(name):
    torch.manual_seed(0)
    cls = {
        "sinusoidal": SinusoidalEncoding,
        "dft": DFTEncoding,
        "learnable_frequency": LearnableFrequencyEncoding,
    }
    kw = {"unit_norm": True, "learn_scale": True, "scale": 2.0}
    module = LearnedEncoding(D, max_len=MAX_LEN, **kw) if name == "learned" else cls[name](D, **kw)
    t = torch.tensor([[3, 1], [0, 5]])
    got = module(torch.zeros(2, 2, D), positions=t)
    torch.testing.assert_close(torch.linalg.vector_norm(got, dim=-1), torch.full((2, 2), 2.0))
    got.sum().backward()
    assert module.scale.grad is not None


def test_gradients_reach_learned_rows_of_each_sequence():
    module = LearnedEncoding(D, max_len=MAX_LEN)
    module(torch.zeros(2, 2, D), positions=torch.tensor([[1, 2], [2, 7]])).sum().backward()
    assert module.weight.grad[[1, 7]].eq(1).all() and module.weight.grad[2].eq(2).all()
    assert module.weight.grad[[0, 3]].eq(0).all()


def test_dft_refuses_each_position_beyond_its_dim_unless_aliased():
    t = torch.tensor([[0, 1, 2], [5, D, 1]])
    with pytest.raises(
        ValueError,
        match=rf"positions must lie in 0…dim-1 = 0…{D - 1}.*got {D} at index 1.*\(in row 1 of the \[b, s\]",
    ):
        DFTEncoding(D)(torch.zeros(2, 3, D), positions=t)
    got = DFTEncoding(D, alias=True)(torch.zeros(2, 3, D, dtype=torch.float64), positions=t)
    np.testing.assert_allclose(got.numpy(), dft_rows(t.numpy() % D, D), rtol=0, atol=1e-12)


def test_learned_refuses_each_position_beyond_max_len():
    with pytest.raises(
        ValueError, match=rf"0…max_len-1 = 0…{MAX_LEN - 1}.*got {MAX_LEN} at index 0 \(in row 1"
    ):
        make("learned")(torch.zeros(2, 2, D), positions=torch.tensor([[0, 1], [MAX_LEN, 0]]))


@pytest.mark.parametrize("name", NAMES)
def test_positions_of_another_batch_or_rank_are_refused(name):
    module = make(name)
    with pytest.raises(
        ValueError, match=r"positions must have shape \[3\] or \[b, 3\] with b = 2 or 1.*\[3, 3\]"
    ):
        module(torch.zeros(2, 3, D), positions=torch.zeros(3, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"positions must have shape .*\[2, 1, 3\]"):
        module(torch.zeros(2, 3, D), positions=torch.zeros(2, 1, 3, dtype=torch.long))
