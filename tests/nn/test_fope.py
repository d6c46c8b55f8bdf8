"""FoPE (posenc.nn.FourierRotary) against an independent float64 NumPy transcription of its definition.

The reference follows vLLM's ``FourierRotaryEmbedding`` as read (``vllm/model_executor/layers/rotary_embedding/
fope.py``): tables ``einsum(cos(t⊗θ), cos_coef)``, padded with cos 1 / sin 0 to ``head_dim/2`` columns, doubled
(``cat(c, c)``) and applied as ``x·cos + rotate_neox(x)·sin``, queries grouped onto KV heads as ``repeat_kv``
does. vLLM itself is not installed here (and needs a CUDA device to build), so it is not run.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.nn import FourierRotary, RotaryEmbedding
from posenc.nn.fope import kept_frequencies


def reference_theta(rotary_dim: int, base: float, length: int, num_inv_freq: int | None) -> np.ndarray:
    theta = np.array([base ** (-(2 * j) / rotary_dim) for j in range(rotary_dim // 2)], dtype=np.float64)
    if num_inv_freq is not None:
        return theta[:num_inv_freq]
    return np.array([t for t in theta if t > 2 * math.pi / length])


def reference(
    x: np.ndarray, positions: np.ndarray, theta: np.ndarray, cos_coef: np.ndarray, sin_coef: np.ndarray
) -> np.ndarray:
    """vLLM's full-width form: ``x·cat(C, C) + rotate_neox(x)·cat(S, S)``, query head i on table i // group."""
    b, heads, s, d = x.shape
    tables = cos_coef.shape[0]
    rows = positions if positions.ndim == 2 else np.broadcast_to(positions, (b, s))
    out = np.empty_like(x)
    for n in range(b):
        angles = np.einsum("t,D->tD", rows[n].astype(np.float64), theta)
        cos = np.ones((tables, s, d // 2))
        sin = np.zeros((tables, s, d // 2))
        cos[..., : theta.size] = np.einsum("tD,hDd->htd", np.cos(angles), cos_coef)
        sin[..., : theta.size] = np.einsum("tD,hDd->htd", np.sin(angles), sin_coef)
        for i in range(heads):
            h = i // (heads // tables)
            c, sn = np.concatenate([cos[h], cos[h]], -1), np.concatenate([sin[h], sin[h]], -1)
            v = x[n, i]
            rotated = np.concatenate([-v[:, d // 2 :], v[:, : d // 2]], -1)
            out[n, i] = v * c + rotated * sn
    return out


@pytest.mark.parametrize("num_inv_freq", [None, 2])
@pytest.mark.parametrize(
    ("rotary_dim", "base", "length"), [(16, 10000.0, 64), (12, 500.0, 300), (8, 1e6, 10**5)]
)
def test_kept_frequencies_are_the_clipping_rule(rotary_dim, base, length, num_inv_freq):
    got = kept_frequencies(rotary_dim, base, length, num_inv_freq)
    np.testing.assert_allclose(got, reference_theta(rotary_dim, base, length, num_inv_freq), rtol=1e-15)


@pytest.mark.parametrize(
    ("separate", "kv_heads", "q_heads", "rotary_dim", "num_inv_freq", "batched"),
    [
        (True, 2, 4, None, None, False),
        (False, 2, 6, None, None, True),
        (True, 3, 3, 10, None, True),
        (True, 1, 2, None, 3, False),
    ],
)
def test_fope_matches_the_reference(separate, kv_heads, q_heads, rotary_dim, num_inv_freq, batched):
    torch.manual_seed(0)
    head_dim, b, s = 16, 2, 7
    module = FourierRotary(
        head_dim, max_position_embeddings=40, base=100.0, rotary_dim=rotary_dim, kv_heads=kv_heads,
        num_inv_freq=num_inv_freq, separate_heads=separate, init_factor=0.7,
    ).double()  # fmt: skip
    q = torch.randn(b, q_heads, s, head_dim, dtype=torch.float64)
    k = torch.randn(b, kv_heads, s, head_dim, dtype=torch.float64)
    positions = torch.randint(0, 5000, (b, s) if batched else (s,))
    q_out, k_out = module(q, k, q_positions=positions, k_positions=positions)
    theta = reference_theta(rotary_dim or head_dim, 100.0, 40, num_inv_freq)
    assert module.cos_coef.shape == (kv_heads if separate else 1, theta.size, theta.size)
    coefs = module.cos_coef.detach().numpy(), module.sin_coef.detach().numpy()
    for got, x in ((q_out, q), (k_out, k)):
        want = reference(x.numpy(), positions.numpy(), theta, *coefs)
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=1e-12)


def test_default_positions_and_float32():
    """Default positions are ``offset + 0 …`` (queries at the end); float32 inputs get float32 outputs."""
    torch.manual_seed(1)
    module = FourierRotary(8, max_position_embeddings=30, kv_heads=1, init_factor=0.5)
    q, k = torch.randn(1, 2, 3, 8), torch.randn(1, 1, 5, 8)
    q_out, k_out = module(q, k, offset=100)
    assert q_out.dtype == k_out.dtype == torch.float32
    theta = module.frequencies.numpy()
    coefs = module.cos_coef.detach().double().numpy(), module.sin_coef.detach().double().numpy()
    want_q = reference(q.double().numpy(), np.arange(102, 105), theta, *coefs)
    want_k = reference(k.double().numpy(), np.arange(100, 105), theta, *coefs)
    np.testing.assert_allclose(q_out.detach().numpy(), want_q, atol=2e-6)
    np.testing.assert_allclose(k_out.detach().numpy(), want_k, atol=2e-6)


@given(
    half=st.integers(2, 12),
    base=st.floats(2.0, 1e6),
    length=st.integers(7, 10**6),
    positions=st.lists(st.integers(0, 10**7), min_size=1, max_size=6),
)
def test_identity_coefficients_are_rotary_on_the_kept_frequencies(half, base, length, positions):
    """With identity coefficients FoPE rotates pairs ``(j, j + d/2)``, ``j < F``, exactly as RotaryEmbedding
    (half-split) does, and leaves the other pairs unchanged."""
    head_dim = 2 * half
    try:
        fope = FourierRotary(head_dim, base=base, max_position_embeddings=length, init_factor=0.0).double()
    except ValueError as error:  # nothing kept: only when θ_0 = 1 <= 2π/L, i.e. never for L >= 7
        raise AssertionError(error) from None
    rope = RotaryEmbedding(head_dim, base=base)
    pos = torch.tensor(positions)
    x = torch.randn(1, 1, len(positions), head_dim, dtype=torch.float64)
    got, _ = fope(x, x, q_positions=pos, k_positions=pos)
    want, _ = rope(x, x, q_positions=pos, k_positions=pos)
    f = fope.frequencies.shape[0]
    kept = [*range(f), *range(half, half + f)]
    rest = [*range(f, half), *range(half + f, head_dim)]
    torch.testing.assert_close(got[..., kept], want[..., kept], rtol=0, atol=1e-12)
    torch.testing.assert_close(got[..., rest], x[..., rest], rtol=0, atol=0)


def test_gradients_reach_the_coefficients():
    torch.manual_seed(2)
    module = FourierRotary(8, max_position_embeddings=50, kv_heads=2, separate_heads=True).double()
    q = torch.randn(1, 4, 5, 8, dtype=torch.float64)
    k = torch.randn(1, 2, 5, 8, dtype=torch.float64)
    q_out, k_out = module(q, k)
    (q_out.square().sum() + k_out.sum()).backward()
    for coef in (module.cos_coef, module.sin_coef):
        assert coef.grad is not None and coef.grad.abs().amax() > 0 and torch.isfinite(coef.grad).all()

    def f(cos_coef: torch.Tensor, sin_coef: torch.Tensor) -> torch.Tensor:
        params = {"cos_coef": cos_coef, "sin_coef": sin_coef}
        return torch.func.functional_call(module, params, (q, k))[0]

    assert torch.autograd.gradcheck(f, (module.cos_coef.detach().clone().requires_grad_(),
                                        module.sin_coef.detach().clone().requires_grad_()))  # fmt: skip


def test_frequencies_stay_float64_and_state_dict_holds_the_coefficients():
    module = FourierRotary(8, max_position_embeddings=50).float()
    assert module.frequencies.dtype == torch.float64
    assert sorted(module.state_dict()) == ["cos_coef", "sin_coef"]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"head_dim": 7}, ValueError, "head_dim must be even.*got 7"),
        ({"max_position_embeddings": 6}, ValueError, "max_position_embeddings=6 keeps no frequency.*allowed"),
        ({"max_position_embeddings": 0}, ValueError, "max_position_embeddings must be a positive int, got 0"),
        ({"num_inv_freq": 5}, ValueError, r"num_inv_freq must be in 1…4 .*got 5"),
        ({"num_inv_freq": 1.5}, TypeError, "num_inv_freq must be an int or None, got 1.5"),
        ({"kv_heads": 0}, ValueError, "kv_heads must be a positive int, got 0"),
        ({"init_factor": -1.0}, ValueError, "init_factor must be a finite real number >= 0, got -1.0"),
        ({"init_factor": float("inf")}, ValueError, "init_factor must be a finite real number >= 0, got inf"),
        ({"separate_heads": 1}, TypeError, "separate_heads must be True or False, got 1"),
        ({"rotary_dim": 3}, ValueError, "rotary_dim=3 of head_dim=8 leaves 3"),
    ],
)
def test_bad_settings_are_refused_naming_them(kwargs, error, message):
    settings = {"head_dim": 8, "max_position_embeddings": 64, **kwargs}
    with pytest.raises(error, match=message):
        FourierRotary(**settings)


def test_bad_inputs_are_refused_naming_them():
    module = FourierRotary(8, max_position_embeddings=64, kv_heads=2)
    q, k = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8)
    with pytest.raises(ValueError, match=r"k must be \[b, kv_heads=2, s, head_dim=8\], got \[1, 4, 3, 8\]"):
        module(q, q)
    with pytest.raises(ValueError, match="q has 3 heads, not a multiple of kv_heads=2"):
        module(q[:, :3], k)
    with pytest.raises(ValueError, match=r"q must be \[b, H, s, head_dim=8\], got \[4, 3, 8\]"):
        module(q[0], k)
    with pytest.raises(TypeError, match="q must be a floating-point tensor"):
        module(q.long(), k)
    with pytest.raises(ValueError, match="q_positions"):
        module(q, k, q_positions=torch.tensor([0.0, float("nan"), 1.0]))
