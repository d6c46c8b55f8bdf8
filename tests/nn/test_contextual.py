"""CoPE against Golovneva et al.'s equations written out in float64, and the per-layer NoPE schedule."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import analysis, registry
from posenc.nn import CoPE, PositionContext, TransformerEncoder, build_encoding

F64 = torch.float64


def cope_reference(scores: torch.Tensor, q: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
    """Eqs. 3–5 one entry at a time: p_ij = Σ_{t=j}^{s−1} σ(scores_it), clamped to P − 1; e[p] linear
    between ⌊p⌋ and ⌈p⌉; the score plus q_i·e[p_ij]."""
    s_q, s_k = scores.shape
    out = scores.clone()
    top = e.shape[0] - 1
    for i in range(s_q):
        for j in range(s_k):
            if math.isinf(float(scores[i, j])):
                continue
            p = min(sum(1.0 / (1.0 + math.exp(-float(scores[i, t]))) for t in range(j, s_k)), top)
            lo, hi = math.floor(p), math.ceil(p)
            emb = (p - lo) * e[hi] + (1 - (p - lo)) * e[lo] if hi != lo else e[lo]
            out[i, j] = scores[i, j] + float(q[i] @ emb)
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_cope_follows_the_paper(causal):
    torch.manual_seed(0)
    cope = CoPE(4, max_len=5, init_std=0.7).double()
    q, k = torch.randn(1, 2, 7, 4, dtype=F64), torch.randn(1, 2, 7, 4, dtype=F64)
    scores = q @ k.transpose(-1, -2)
    if causal:
        scores = scores.masked_fill(torch.ones(7, 7, dtype=torch.bool).triu(1), -math.inf)
    got = cope.add_scores_(scores.clone(), q, k, PositionContext())
    e = cope.embeddings.detach()
    for h in range(2):
        want = cope_reference(scores[0, h], q[0, h], e)
        torch.testing.assert_close(got[0, h].detach(), want, rtol=1e-12, atol=1e-12)
    assert cope.family == "contextual" and cope.scores_qk


def test_cope_counts_tokens_when_every_gate_is_open():
    cope = CoPE(2, max_len=16, init_std=1.0).double()
    scores = torch.full((1, 1, 5, 5), 50.0, dtype=F64).masked_fill(
        torch.ones(5, 5, dtype=torch.bool).triu(1), -math.inf
    )
    q = torch.randn(1, 1, 5, 2, dtype=F64)
    term = (cope.add_scores_(scores.clone(), q, q, PositionContext()) - scores).detach()
    e = cope.embeddings.detach()
    for i in range(5):
        for j in range(i + 1):
            assert float(term[0, 0, i, j]) == pytest.approx(float(q[0, 0, i] @ e[i - j + 1]), abs=1e-9)


def test_cope_in_the_encoder_trains_and_compiles():
    torch.manual_seed(0)
    model = TransformerEncoder(16, 2, 2, encoding="cope", max_len=8)
    x = torch.randn(2, 12, 16, requires_grad=True)
    model(x, causal=True).square().sum().backward()
    grad = model.encoding.embeddings.grad
    assert grad is not None and float(grad.abs().sum()) > 0 and torch.isfinite(x.grad).all()
    cope = build_encoding("cope", d_model=16, n_heads=2, max_len=8)
    q, k = torch.randn(1, 2, 6, 8), torch.randn(1, 2, 6, 8)

    def add(scores, q, k):
        return cope.add_scores_(scores, q, k, PositionContext())

    compiled = torch.compile(add, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(q @ k.transpose(-1, -2), q, k), add(q @ k.transpose(-1, -2), q, k))
    assert registry.get("cope").family == "contextual"
    assert analysis.scorecard("cope", length=16, dim=16, n_heads=2).encoding == "cope"


def test_no_rope_layers_leave_those_layers_without_the_encoding():
    torch.manual_seed(0)
    partial = TransformerEncoder(16, 2, 3, encoding="rope", no_rope_layers=[0, 2], max_len=8)
    assert [layer.attention.encoding is None for layer in partial.layers] == [True, False, True]
    x = torch.randn(1, 6, 16)
    all_off = TransformerEncoder(16, 2, 3, encoding="rope", no_rope_layers=[0, 1, 2], max_len=8)
    nope = TransformerEncoder(16, 2, 3, encoding=None, max_len=8)
    all_off.load_state_dict(partial.state_dict())
    nope.load_state_dict(partial.state_dict())
    torch.testing.assert_close(all_off(x, causal=True), nope(x, causal=True))
    assert not torch.allclose(partial(x, causal=True), nope(x, causal=True))
    with pytest.raises(ValueError, match=r"no_rope_layers must hold layer indices in 0…2, got \[3\]"):
        TransformerEncoder(16, 2, 3, encoding="rope", no_rope_layers=[3])
    with pytest.raises(ValueError, match="inside attention"):
        TransformerEncoder(16, 2, 3, encoding="sinusoidal", no_rope_layers=[0])


@pytest.mark.parametrize("init_std", [float("nan"), float("inf"), -1.0])
def test_cope_refuses_an_init_std_that_is_not_finite_and_non_negative(init_std):
    with pytest.raises(ValueError, match=rf"init_std must be a finite number >= 0, got {init_std!r}"):
        CoPE(8, init_std=init_std)


@pytest.mark.parametrize("init_std", ["0.02", True, None])
def test_cope_refuses_an_init_std_that_is_not_a_real_number(init_std):
    with pytest.raises(TypeError, match="init_std must be a real number >= 0"):
        CoPE(8, init_std=init_std)
