"""Kerple, Sandwich, FIRE and p-RoPE against their papers' formulas written out here in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import analysis, registry
from posenc.nn import (
    FIREBias,
    KerpleBias,
    PartialRotary,
    RandomizedPositions,
    RotaryEmbedding,
    SandwichBias,
    TransformerEncoder,
    build_encoding,
    randomized_positions,
)

NEW = ("kerple", "kerple_power", "sandwich", "fire", "p_rope", "cope")


def test_kerple_log_and_power_follow_chi_et_al():
    for form in ("log", "power"):
        kerple = KerpleBias(3, form=form).double()
        r1 = kerple.r1.detach().clamp(min=kerple.eps).numpy()
        r2 = kerple.r2.detach().clamp(min=kerple.eps).numpy()
        got = kerple.bias(4, 6, dtype=torch.float64).detach().numpy()  # queries at 2…5, keys 0…5
        assert got.shape == (3, 4, 6)
        for h in range(3):
            for i in range(4):
                for j in range(6):
                    gap = abs(i + 2 - j)
                    want = -r1[h] * (math.log(1 + r2[h] * gap) if form == "log" else gap ** r2[h])
                    assert got[h, i, j] == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_kerple_power_exponent_is_clamped_to_two():
    kerple = KerpleBias(2, form="power")
    with torch.no_grad():
        kerple.r2.fill_(5.0)
        kerple.r1.fill_(-1.0)
    r1, r2 = kerple.coefficients()
    assert r2.tolist() == [2.0, 2.0] and r1.tolist() == pytest.approx([kerple.eps] * 2)
    with pytest.raises(ValueError, match="form"):
        KerpleBias(2, form="cubic")


def test_sandwich_is_the_sinusoidal_kernel_with_head_factors():
    sandwich = SandwichBias(4, 16)
    got = sandwich.bias(5, 5, dtype=torch.float64).numpy()
    omega = 10000.0 ** (-2.0 * np.arange(1, 9) / 16)
    for h in range(4):
        for i in range(5):
            for j in range(5):
                kernel = np.cos((i - j) * omega).sum()
                assert got[h, i, j] == pytest.approx((kernel - 8.0) / (8.0 * (h + 1) / 4), abs=1e-12)
    assert np.all(got[:, range(5), range(5)] == 0.0) and np.all(got <= 1e-12)
    # the kernel is the inner product of sinusoidal embeddings with frequencies k = 1 … d'/2
    t = np.arange(5)[:, None] * omega
    emb = np.concatenate([np.sin(t), np.cos(t)], axis=1)
    np.testing.assert_allclose(got[3] * 8.0, emb @ emb.T - 8.0, atol=1e-12)
    assert sandwich.state_dict() == {}
    with pytest.raises(ValueError, match="dim must be even"):
        SandwichBias(2, 16, dim=7)


def fire_reference(fire: FIREBias, i: int, j: int) -> np.ndarray:
    """Li et al. 2023, eq. 3: f(ψ(|i−j|)/(ψ(max(i, L)) + ε)), ψ(x) = log(c·x + 1), MLP written out."""
    c = abs(float(fire.c.detach()))
    big_l = abs(float(fire.l_multiplier.detach()) * fire.init_l)
    x = math.log(c * abs(i - j) + 1) / (math.log(c * max(i, big_l) + 1) + fire.eps)
    w1, b1 = fire.mlp[0].weight.detach().double().numpy(), fire.mlp[0].bias.detach().double().numpy()
    w2, b2 = fire.mlp[2].weight.detach().double().numpy(), fire.mlp[2].bias.detach().double().numpy()
    hidden = np.maximum(w1[:, 0] * x + b1, 0.0)
    return w2 @ hidden + b2


def test_fire_matches_its_formula_inside_and_beyond_the_threshold():
    torch.manual_seed(0)
    fire = FIREBias(3, max_len=4, width=8).double()
    got = fire.bias(9, 9, dtype=torch.float64).detach().numpy()
    assert got.shape == (3, 9, 9)
    for i in range(9):  # i < L = 4 and i > L: the normaliser switches from ψ(L) to ψ(i)
        for j in range(9):
            np.testing.assert_allclose(got[:, i, j], fire_reference(fire, i, j), rtol=1e-12, atol=1e-12)


def test_fire_maps_every_distance_into_the_unit_interval_beyond_l():
    fire = FIREBias(2, max_len=8)
    query = torch.arange(64.0)[:, None]
    x = fire.normalized_distance(torch.arange(64.0)[None, :] - query, query)
    causal = x[torch.ones(64, 64, dtype=torch.bool).tril()]
    causal = causal.detach()
    assert float(causal.max()) <= 1.0 and float(causal.min()) >= 0.0


def test_fire_batched_positions_give_one_bias_per_row():
    fire = FIREBias(2, max_len=4)
    pos = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    got = fire.bias(4, 4, q_positions=pos)
    assert got.shape == (2, 2, 4, 4)
    torch.testing.assert_close(got[1], fire.bias(4, 4, offset=5))


def test_p_rope_keeps_the_highest_frequencies():
    full = RotaryEmbedding(16).frequencies.numpy()
    part = PartialRotary(16, p=0.5)
    np.testing.assert_allclose(part.frequencies.numpy(), full[:4], rtol=1e-13)
    assert part.rotary_dim == 8
    q = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    cos, sin = part.cos_sin(5, dtype=torch.float64)
    out = part.rotate(q, cos, sin)
    torch.testing.assert_close(out[..., 8:], q[..., 8:])  # the dropped (lowest) frequencies do not rotate
    # the rotated pairs turn by t·θ_i of the full rotary: scores depend on the distance only
    k = torch.randn(1, 1, 5, 16, dtype=torch.float64)
    s = out @ part.rotate(k, cos, sin).transpose(-1, -2)
    shifted = part.rotate(q, *part.cos_sin(5, positions=torch.arange(3, 8), dtype=torch.float64))
    ks = part.rotate(k, *part.cos_sin(5, positions=torch.arange(3, 8), dtype=torch.float64))
    torch.testing.assert_close(s, shifted @ ks.transpose(-1, -2))
    torch.testing.assert_close(PartialRotary(16, p=1.0).frequencies, RotaryEmbedding(16).frequencies)
    for bad in (0.0, 1.5, 0.05):
        with pytest.raises(ValueError, match="p"):
            PartialRotary(16, p=bad)


def test_randomized_positions_are_ordered_distinct_and_drawn_in_evaluation_unless_told_not_to():
    g = torch.Generator().manual_seed(0)
    pos = randomized_positions(10, 40, generator=g)
    assert pos.shape == (10,) and bool((pos.diff() > 0).all()) and int(pos.max()) < 40
    with pytest.raises(ValueError, match="max_position"):
        randomized_positions(10, 5)
    seen = []

    class Probe(torch.nn.Module):
        def forward(self, x, positions=None):
            seen.append(positions)
            return x

    wrapped = RandomizedPositions(Probe(), 100)
    wrapped.train()(torch.zeros(1, 7, 2))
    wrapped.eval()(torch.zeros(1, 7, 2))  # Ruoss et al.'s code draws at every call, evaluation included
    assert all(p is not None and p.shape == (7,) and bool((p.diff() > 0).all()) for p in seen)
    assert not torch.equal(seen[0], seen[1])
    seen.clear()
    fixed = RandomizedPositions(Probe(), 100, draw_in_eval=False)
    fixed.train()(torch.zeros(1, 7, 2))
    fixed.eval()(torch.zeros(1, 7, 2))
    assert seen[0] is not None and seen[1] is None


@pytest.mark.parametrize("name", NEW)
def test_registered_everywhere_with_gradients(name):
    info = registry.get(name)
    module = build_encoding(name, d_model=32, n_heads=4, max_len=16)
    assert module is not None and module.family == info.family
    torch.manual_seed(0)
    model = TransformerEncoder(32, 4, 2, encoding=name, max_len=16)
    x = torch.randn(2, 24, 32, requires_grad=True)  # beyond max_len
    out = model(x, causal=True)
    assert out.shape == (2, 24, 32)
    out.square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    if info.learned:
        grads = [p.grad for p in model.encoding.parameters()]
        assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
        assert any(float(g.abs().sum()) > 0 for g in grads)
    card = analysis.scorecard(name, length=24, dim=32, n_heads=4)
    assert card.encoding == name


@pytest.mark.parametrize("name", ("kerple", "sandwich", "fire"))
def test_biases_compile_without_graph_breaks(name):
    torch.manual_seed(0)
    module = build_encoding(name, d_model=16, n_heads=2, max_len=8)
    compiled = torch.compile(module.bias, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(12, 12), module.bias(12, 12))


@given(
    heads=st.integers(1, 6),
    q_len=st.integers(1, 12),
    extra=st.integers(0, 6),
    offset=st.integers(0, 50),
    form=st.sampled_from(["kerple", "kerple_power", "sandwich"]),
)
def test_distance_biases_depend_on_the_distance_only_and_never_reward(heads, q_len, extra, offset, form):
    torch.manual_seed(heads)
    module = build_encoding(form, d_model=4 * heads, n_heads=heads, max_len=8)
    k_len = q_len + extra
    got = module.bias(q_len, k_len, offset=offset, dtype=torch.float64).detach()
    assert got.shape == (heads, q_len, k_len)
    i = torch.arange(offset + extra, offset + k_len)[:, None]  # end-aligned query positions
    j = torch.arange(offset, offset + k_len)[None, :]
    by_distance = module.bias(
        1,
        2 * k_len + 1,
        q_positions=torch.tensor([k_len]),
        k_positions=torch.arange(2 * k_len + 1),
        dtype=torch.float64,
    )
    want = by_distance.detach()[:, 0, (j - i + k_len)]
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert float(got.max()) <= 1e-12
    assert by_distance.detach()[:, 0, k_len].abs().max() < 1e-12  # distance 0: no penalty


@pytest.mark.parametrize(("form", "r1_high", "r2_high"), [("log", 2.0, 1.0), ("power", 1.0, 2.0)])
def test_kerple_initialises_as_the_authors_code(form, r1_high, r2_high):
    """Chi et al.'s code (``ParallelKerpleLog``/``ParallelKerplePower``) draws the multiplier of the log form
    and the exponent of the power form as ``2·U[0, 1)``, the other parameter as ``U[0, 1)``: over 512 heads
    each range is filled up to its top and never exceeded."""
    torch.manual_seed(0)
    kerple = KerpleBias(512, form=form)
    for value, high in ((kerple.r1, r1_high), (kerple.r2, r2_high)):
        value = value.detach()
        assert float(value.min()) > 0 and float(value.max()) <= high
        assert float(value.max()) > 0.95 * high and float(value.min()) < 0.05 * high
