"""Attention that any encoding can join: a contextual encoding written here, outside the package, registers
with one call and runs in the encoder through the hooks, against an independent float64 reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from posenc import registry
from posenc.nn import ContextualContract, MultiHeadAttention, PositionContext, TransformerEncoder
from posenc.registry import EncodingView

F64 = torch.float64


class GatedCount(ContextualContract):
    """A CoPE-like encoding (Golovneva et al. 2024, eqs. 3–5) written as a user would: gates
    ``g_ij = σ(q_i·k_j)`` counted back from the query, ``p_ij = Σ_{t=j}^{i} g_it``, and the score term
    ``q_i·e(p_ij)`` with ``e`` linearly interpolated between learned integer-position vectors."""

    def __init__(self, head_dim: int, *, n_positions: int = 16) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.embedding = torch.nn.Parameter(torch.randn(n_positions, head_dim) * 0.5)

    def add_scores_(
        self, scores: torch.Tensor, q: torch.Tensor, k: torch.Tensor, context: PositionContext
    ) -> torch.Tensor:
        gates = torch.sigmoid(scores)  # hidden keys hold −inf: gate 0, they count nothing
        positions = gates.flip(-1).cumsum(-1).flip(-1).clamp(max=self.embedding.shape[0] - 1)
        low = positions.floor().long()
        high = (low + 1).clamp(max=self.embedding.shape[0] - 1)
        frac = positions - low
        logits = q @ self.embedding.to(q.dtype).T  # [b, h, s, n_positions]
        term = (1 - frac) * logits.gather(-1, low) + frac * logits.gather(-1, high)
        return scores + term

    def analysis_view(self, *, name: str, dim: int, seed: int) -> EncodingView:
        return EncodingView(name, self.family, dim)


def reference(x, attention, encoding, causal):
    """The same attention written from the formulas alone, in float64, one (batch, head) at a time."""
    b, s, d = x.shape
    h, dh = attention.n_heads, attention.head_dim
    qkv = x @ attention.qkv.weight.T + attention.qkv.bias
    q, k, v = qkv.view(b, s, 3, h, dh).permute(2, 0, 3, 1, 4)
    out = torch.zeros(b, h, s, dh, dtype=F64)
    n = encoding.embedding.shape[0]
    for bi in range(b):
        for hi in range(h):
            qs = q[bi, hi] / math.sqrt(dh)
            raw = qs @ k[bi, hi].T
            if causal:
                raw = raw.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), -math.inf)
            scores = torch.empty(s, s, dtype=F64)
            for i in range(s):
                for j in range(s):
                    if causal and j > i:
                        scores[i, j] = -math.inf
                        continue
                    p = min(sum(torch.sigmoid(raw[i, t]) for t in range(j, s)).item(), n - 1)
                    lo = math.floor(p)
                    hi_ = min(lo + 1, n - 1)
                    e = (1 - (p - lo)) * encoding.embedding[lo] + (p - lo) * encoding.embedding[hi_]
                    scores[i, j] = raw[i, j] + qs[i] @ e
            out[bi, hi] = torch.softmax(scores, -1) @ v[bi, hi]
    return out.transpose(1, 2).reshape(b, s, d) @ attention.out.weight.T + attention.out.bias


@pytest.fixture
def gated():
    info = registry.register("gated_count", GatedCount, summary="CoPE-like test encoding", source="a test")
    yield info
    registry.unregister("gated_count")


@pytest.mark.parametrize("causal", [False, True])
def test_a_contextual_encoding_from_outside_joins_attention_through_its_hooks(gated, causal):
    torch.manual_seed(0)
    assert gated.family == "contextual"
    model = TransformerEncoder(8, 2, 1, encoding="gated_count", encoding_options={"n_positions": 6}).double()
    attention = model.layers[0].attention
    x = torch.randn(2, 5, 8, dtype=F64)
    got = attention(x, causal=causal)
    want = reference(x, attention, model.encoding, causal)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    # learned: its gradient flows from the encoder's output
    model(x, causal=causal).sum().backward()
    assert model.encoding.embedding.grad is not None and model.encoding.embedding.grad.abs().sum() > 0


def test_a_contextual_encoding_is_never_given_to_the_fused_kernel(gated, monkeypatch):
    """Without a gradient a fused kernel would serve every other family; q·kᵀ must be written out here."""
    torch.manual_seed(1)
    attention = MultiHeadAttention(8, 2, encoding=GatedCount(4)).double().eval()
    calls = []
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1))
    with torch.no_grad():
        attention(torch.randn(1, 4, 8, dtype=F64))
    assert calls == []


def test_the_hooks_default_to_plain_attention():
    """An encoding that overrides no hook leaves attention exactly as without one."""

    class Nothing(ContextualContract):
        scores_qk = False

        def __init__(self, head_dim: int) -> None:
            super().__init__()
            self.head_dim = head_dim

        def add_scores_(self, scores, q, k, context):  # never called: scores_qk is False
            raise AssertionError

        def analysis_view(self, *, name, dim, seed):
            return EncodingView(name, self.family, dim)

    torch.manual_seed(2)
    plain = MultiHeadAttention(8, 2).double()
    hooked = MultiHeadAttention(8, 2, encoding=Nothing(4)).double()
    hooked.load_state_dict(plain.state_dict(), strict=False)
    x = torch.randn(2, 3, 8, dtype=F64)
    torch.testing.assert_close(hooked(x, causal=True), plain(x, causal=True), rtol=0, atol=1e-14)
