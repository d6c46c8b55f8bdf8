"""Attention with a score term: every backend through ``select()``'s seam against a float64 reference.

FlexAttention's backends run here on the CPU through FlexAttention's own eager path (its dense forward and
its dense backward, which differentiates the ``score_mod`` and returns the captured tables' gradients): the
public wrapper refuses a backward on the CPU in torch 2.13, so these tests lift that one check. The CUDA
kernels the compiler generates from the same ``score_mod`` are not run here.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from posenc.backends import Environment, scores, select
from posenc.backends.scores import BACKENDS, ScoreCall
from posenc.nn import ShawRelativeBias, T5RelativeBias, TransformerEncoder
from posenc.nn.contracts import ScoreTerm

flex_attention = pytest.importorskip("torch.nn.attention.flex_attention")
F64 = torch.float64
B, H, S, D, K = 2, 3, 12, 16, 3


@pytest.fixture
def flex_on_cpu(monkeypatch):
    """FlexAttention's eager path on the CPU, gradients included, and scores' ``flex`` calling it."""
    monkeypatch.setattr(flex_attention, "_validate_device", lambda q, k, v: None)
    monkeypatch.setattr(scores, "_compiled_flex", lambda: scores.flex_attend)


def as_cuda(call: ScoreCall, dtype: torch.dtype = torch.float32) -> scores.Backend[ScoreCall]:
    """The backend ``select`` picks for ``call`` where the tensors were on CUDA in ``dtype`` (the float64
    tensors here keep the comparison exact)."""
    return select(BACKENDS, call, dataclasses.replace(Environment.of(call.q), device="cuda", dtype=dtype))


def reference(q, k, v, *, diagonals=None, slots=None, pad=None, causal=False):
    """``softmax(q·kᵀ + bias + term + mask)·v`` from the formulas, float64 (``q`` already scaled): the
    bias ``diagonals[h, s − 1 + j − i]``, the term ``slots[b, h, i, clip(j − i, −K, K) + K]``; a row whose
    keys are all hidden outputs zeros."""
    b, h, s, _ = q.shape
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    scores_ = q @ k.transpose(-1, -2)
    if diagonals is not None:
        scores_ = scores_ + diagonals[:, s - 1 + j - i][None]
    if slots is not None:
        slot = ((j - i).clamp(-K, K) + K).expand(b, h, s, s)
        scores_ = scores_ + slots.gather(-1, slot)
    hidden = torch.zeros(b, 1, s, s, dtype=torch.bool)
    if causal:
        hidden = hidden | (j > i)
    if pad is not None:
        hidden = hidden | pad[:, None, None, :]
    scores_ = scores_.masked_fill(hidden, -math.inf)
    all_hidden = hidden.all(-1, keepdim=True)
    weights = torch.softmax(scores_.masked_fill(all_hidden, 0.0), -1).masked_fill(all_hidden, 0.0)
    return weights @ v


def tensors(seed: int):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, H, S, D, generator=g, dtype=F64) for _ in range(3))
    diagonals = torch.randn(H, 2 * S - 1, generator=g, dtype=F64)
    slots = torch.randn(B, H, S, 2 * K + 1, generator=g, dtype=F64)
    return [t.requires_grad_() for t in (q, k, v, diagonals, slots)]


def padding(kind: str) -> torch.Tensor | None:
    if kind == "none":
        return None
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[0, -4:] = True
    if kind == "a row all padding":
        pad[1] = True
    return pad


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("pad_kind", ["none", "padded", "a row all padding"])
@pytest.mark.parametrize("terms", ["t5", "shaw", "both"])
def test_flex_reads_the_small_tables_and_returns_their_gradients(flex_on_cpu, causal, pad_kind, terms):
    q, k, v, diagonals, slots = tensors(1)
    pad = padding(pad_kind)
    use_diagonals = diagonals if terms in ("t5", "both") else None
    use_slots = slots if terms in ("shaw", "both") else None
    term = (
        None if use_slots is None else ScoreTerm(slots=use_slots, index=torch.zeros(S, S).long(), band=(K, 0))
    )
    call = ScoreCall(
        q,
        k,
        v,
        q_scaled=True,
        bias=None if use_diagonals is None else torch.zeros(1),  # the dense form is not read by flex
        diagonals=use_diagonals,
        term=term,
        key_padding_mask=pad,
        causal=causal,
        may_hide=True,
    )
    assert as_cuda(call).name == "flex"
    got = scores.flex(call)
    want = reference(q, k, v, diagonals=use_diagonals, slots=use_slots, pad=pad, causal=causal)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    grad = torch.randn_like(got)
    inputs = [t for t in (q, k, v, use_diagonals, use_slots) if t is not None]
    for d_got, d_want in zip(
        torch.autograd.grad(got, inputs, grad), torch.autograd.grad(want, inputs, grad), strict=True
    ):
        torch.testing.assert_close(d_got, d_want, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["t5", "shaw", "alibi", "kerple"])
@pytest.mark.parametrize("causal", [False, True])
def test_an_encoder_on_flex_equals_the_written_out_reference(flex_on_cpu, monkeypatch, name, causal):
    """The encoder wired to FlexAttention as on CUDA (the per-offset table and Shaw's slots from the
    encoding's hooks) gives the outputs and every parameter's gradient of the CPU model (written out)."""
    torch.manual_seed(2)
    model = TransformerEncoder(32, 2, 2, encoding=name, max_len=S).double()
    x = torch.randn(2, S, 32, dtype=F64)
    pad = torch.zeros(2, S, dtype=torch.bool)
    pad[1, -5:] = True
    want = model(x, causal=causal, key_padding_mask=pad)
    want_grads = torch.autograd.grad(want.square().sum(), list(model.parameters()))
    chosen: list[str] = []

    def choose(call: ScoreCall) -> scores.Backend[ScoreCall]:
        backend = as_cuda(call)
        chosen.append(backend.name)
        return backend

    monkeypatch.setattr(scores, "choose", choose)
    got = model(x, causal=causal, key_padding_mask=pad)
    got_grads = torch.autograd.grad(got.square().sum(), list(model.parameters()))
    # a learned table (T5, Shaw, Kerple) takes FlexAttention; ALiBi's fixed bias stays on SDPA
    assert chosen == (["sdpa"] if name == "alibi" else ["flex"]) * 2
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)
    for (pname, _), d_got, d_want in zip(model.named_parameters(), got_grads, want_grads, strict=True):
        torch.testing.assert_close(d_got, d_want, rtol=1e-8, atol=1e-10, msg=pname)


def test_select_keeps_sdpa_or_the_written_out_form_where_flex_cannot_serve():
    """Flex needs a table with a gradient, no weights, no dropout, and a band; else SDPA (CUDA; the CPU
    without a gradient) or the reference."""
    torch.manual_seed(3)
    t5 = T5RelativeBias(H).double()
    shaw = ShawRelativeBias(D, max_distance=K, on_values=True).double()
    q, k, v = (torch.randn(B, H, S, D, dtype=F64) for _ in range(3))
    context = t5.context(S, positions=None, dtype=F64, device=torch.device("cpu"))
    learned = ScoreCall(q, k, v, bias=context.attn_bias, diagonals=context.diagonals)
    cpu = Environment.of(q)
    assert as_cuda(learned).name == "flex"
    assert select(BACKENDS, learned, cpu).name == "explicit"  # a learned mask on the CPU: written out
    assert as_cuda(dataclasses.replace(learned, dropout=0.1)).name == "sdpa"
    assert as_cuda(dataclasses.replace(learned, diagonals=None)).name == "sdpa"  # [b, s] positions
    with torch.no_grad():
        frozen = ScoreCall(q, k, v, bias=context.attn_bias, diagonals=context.diagonals)
        assert as_cuda(frozen).name == "sdpa" and select(BACKENDS, frozen, cpu).name == "sdpa"
    assert as_cuda(learned, torch.float64).name == "sdpa"  # FlexAttention in float16/bfloat16/float32
    narrow = ScoreCall(
        q[..., :8], k[..., :8], v[..., :8], bias=context.attn_bias, diagonals=context.diagonals
    )
    assert as_cuda(narrow).name == "sdpa"  # CUDA's FlexAttention kernels need heads >= 16 wide
    shaw_context = shaw.context(S, positions=None, dtype=F64, device=torch.device("cpu"))
    shaw_call = ScoreCall(
        q, k, v, q_scaled=True, term=shaw.score_term(q, k, shaw_context), needs_weights=shaw.needs_weights
    )
    assert as_cuda(shaw_call).name == "explicit"  # the value term needs the weights
    contextual = ScoreCall(q, k, v, q_scaled=True, term=ScoreTerm(from_scores=lambda s: s))
    assert as_cuda(contextual).name == "explicit" and select(BACKENDS, contextual, cpu).name == "explicit"


def test_a_score_term_is_slots_or_a_function_of_the_scores():
    with pytest.raises(ValueError, match="either slots and their index, or from_scores"):
        ScoreTerm()
    with pytest.raises(ValueError, match="either slots and their index, or from_scores"):
        ScoreTerm(slots=torch.zeros(1, 1, 2, 3), index=torch.zeros(2, 2).long(), from_scores=lambda s: s)


def test_flex_is_compiled_once_eagerly_and_inlined_while_tracing():
    """The compile state is read by ``select()`` alone: eagerly the ``flex`` entry runs FlexAttention compiled
    once (with the kept causal mask); while ``torch.compile`` traces, the entry that inlines it."""
    torch.manual_seed(4)
    t5 = T5RelativeBias(H).double()
    q, k, v = (torch.randn(B, H, S, D, dtype=F64) for _ in range(3))
    context = t5.context(S, positions=None, dtype=F64, device=torch.device("cpu"))
    call = ScoreCall(q, k, v, bias=context.attn_bias, diagonals=context.diagonals, causal=True)
    eager = dataclasses.replace(Environment.of(q), device="cuda", dtype=torch.float32)
    tracing = dataclasses.replace(eager, compiling=True)
    assert select(BACKENDS, call, eager).apply is scores.flex
    assert select(BACKENDS, call, tracing).apply is scores.flex_traced


def test_flex_traced_builds_its_own_block_mask(flex_on_cpu, monkeypatch):
    """The traced form runs :func:`flex_attend` itself and never reads the eager cache of causal masks."""
    q, k, v, diagonals, _ = tensors(5)
    call = ScoreCall(
        q, k, v, q_scaled=True, bias=torch.zeros(1), diagonals=diagonals, causal=True, may_hide=True
    )

    def no_cache(s: int, device: torch.device) -> None:
        raise AssertionError("the traced form read the eager mask cache")

    monkeypatch.setattr(scores, "_causal_block_mask", no_cache)
    monkeypatch.setattr(
        scores, "_compiled_flex", lambda: pytest.fail("the traced form compiled FlexAttention")
    )
    got = scores.flex_traced(call)
    want = reference(q, k, v, diagonals=diagonals, causal=True)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
