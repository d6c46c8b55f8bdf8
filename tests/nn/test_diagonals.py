"""Offset-dependent score terms (T5/ALiBi biases spread along diagonals, Shaw's banded slots): the
skewed view, the Toeplitz spread and the band gather and sum against formulas written out in the test
in float64, their gradients by finite differences, and the biases against the general path."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from posenc.backends import Environment, select  # noqa: E402
from posenc.backends import slots as slot_backends  # noqa: E402
from posenc.nn import ALiBiBias, ShawRelativeBias, T5RelativeBias, TransformerEncoder  # noqa: E402
from posenc.nn._diagonals import band_gather, band_sum, skew, toeplitz  # noqa: E402

sizes = st.integers(1, 7)


@settings(max_examples=40, deadline=None)
@given(s_q=sizes, s_k=sizes, lead=st.sampled_from([(), (2,), (2, 3)]))
def test_skew_puts_each_offset_in_one_column(s_q, s_k, lead):
    g = torch.randn(*lead, s_q, s_k, dtype=torch.float64)
    got = skew(g)
    want = torch.zeros(*lead, s_q, s_q + s_k - 1, dtype=torch.float64)
    for i in range(s_q):
        for j in range(s_k):
            want[..., i, s_q - 1 + j - i] = g[..., i, j]
    assert torch.equal(got, want)


@settings(max_examples=30, deadline=None)
@given(s_q=sizes, s_k=sizes)
def test_toeplitz_spreads_diagonals_and_its_gradient_sums_them(s_q, s_k):
    d = torch.randn(3, s_q + s_k - 1, dtype=torch.float64, requires_grad=True)
    got = toeplitz(d, s_q, s_k)
    want = torch.stack([torch.stack([d[:, s_q - 1 + j - i] for j in range(s_k)], -1) for i in range(s_q)], -2)
    assert torch.equal(got, want)
    g = torch.randn_like(got)
    (d_got,) = torch.autograd.grad(got, d, g)
    (d_want,) = torch.autograd.grad(want, d, g)
    torch.testing.assert_close(d_got, d_want, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(lambda t: toeplitz(t, s_q, s_k), (d,))


def _band_index(s_q: int, s_k: int, k: int, shift: int) -> torch.Tensor:
    return (torch.arange(s_k)[None] - torch.arange(s_q)[:, None] + shift).clamp(-k, k) + k


@settings(max_examples=40, deadline=None)
@given(s_q=sizes, s_k=sizes, k=st.integers(1, 4), shift=st.integers(-8, 8))
def test_band_gather_and_sum_against_written_out_sums(s_q, s_k, k, shift):
    index = _band_index(s_q, s_k, k, shift)
    slots = torch.randn(2, 3, s_q, 2 * k + 1, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 3, s_q, s_k, dtype=torch.float64, requires_grad=True)
    gathered = torch.empty(2, 3, s_q, s_k, dtype=torch.float64)
    summed = torch.zeros(2, 3, s_q, 2 * k + 1, dtype=torch.float64)
    for i in range(s_q):
        for j in range(s_k):
            t = min(max(j - i + shift, -k), k) + k
            gathered[..., i, j] = slots[..., i, t]
            summed[..., i, t] += weights[..., i, j]
    assert torch.equal(band_gather(slots, index, k, shift), gathered)
    torch.testing.assert_close(band_sum(weights, index, k, shift), summed, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shift", [-5, -1, 0, 3])
@pytest.mark.parametrize(("s_q", "s_k"), [(1, 1), (4, 6), (6, 4), (9, 9)])
def test_band_gather_and_sum_gradients(s_q, s_k, shift):
    k = 2
    index = _band_index(s_q, s_k, k, shift)
    slots = torch.randn(2, s_q, 2 * k + 1, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, s_q, s_k, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: band_gather(t, index, k, shift), (slots,))
    assert torch.autograd.gradcheck(lambda w: band_sum(w, index, k, shift), (weights,))
    assert torch.autograd.gradgradcheck(lambda t: band_gather(t, index, k, shift), (slots,))


def test_bad_shapes_are_explained():
    with pytest.raises(ValueError, match="diagonals must be"):
        toeplitz(torch.zeros(2, 5), 3, 4)
    with pytest.raises(ValueError, match="index must be"):
        band_gather(torch.zeros(2, 3, 5), torch.zeros(4, 4, dtype=torch.long), 2)
    with pytest.raises(ValueError, match="k must be"):
        band_sum(torch.zeros(3, 4), torch.zeros(3, 4, dtype=torch.long), 0)


@pytest.mark.parametrize(
    "module",
    [
        lambda: T5RelativeBias(4, num_buckets=8, max_distance=16),
        lambda: T5RelativeBias(4, num_buckets=8, max_distance=16, bidirectional=False),
        lambda: ALiBiBias(4),
    ],
)
@pytest.mark.parametrize(("s_q", "s_k", "offset"), [(5, 5, 0), (3, 7, 0), (4, 9, 11), (1, 1, 3)])
def test_default_positions_bias_equals_the_bias_at_those_positions(module, s_q, s_k, offset):
    """Formed on the offsets and spread along diagonals, the bias (and a learned table's gradient) equals
    the per-pair lookup at the explicit positions of the default alignment."""
    torch.manual_seed(0)
    enc = module().double()
    start = offset + s_k - s_q
    q_pos, k_pos = torch.arange(start, start + s_q), torch.arange(offset, offset + s_k)
    fast = enc.bias(s_q, s_k, offset=offset, dtype=torch.float64)
    plain = enc.bias(s_q, s_k, q_positions=q_pos, k_positions=k_pos, dtype=torch.float64)
    assert torch.equal(fast, plain)
    params = list(enc.parameters())
    if params:
        g = torch.randn_like(fast)
        (d_fast,) = torch.autograd.grad(fast, params, g)
        (d_plain,) = torch.autograd.grad(plain, params, g)
        torch.testing.assert_close(d_fast, d_plain, rtol=1e-12, atol=1e-12)


def test_shaw_context_marks_the_band_only_for_default_positions():
    shaw = ShawRelativeBias(8, max_distance=2)
    device = torch.device("cpu")
    assert shaw.context(5, positions=None, dtype=torch.float32, device=device).state == 0
    assert shaw.context(5, positions=torch.arange(5) * 2, dtype=torch.float32, device=device).state is None


@pytest.mark.parametrize("on_values", [False, True])
def test_shaw_band_terms_in_the_encoder_equal_the_slot_terms(on_values, monkeypatch):
    """The banded key and value terms (the GPU's path, forced here on the CPU) give the encoder's outputs
    and gradients of the compiled slot loops, in float64."""
    torch.manual_seed(1)
    model = TransformerEncoder(16, 2, 2, encoding="shaw", encoding_options={"on_values": on_values}).double()
    x = torch.randn(2, 12, 16, dtype=torch.float64)

    def run():
        out = model(x, causal=True)
        return out, torch.autograd.grad(out.square().sum(), list(model.parameters()))

    want, want_grads = run()
    calls: list[str] = []

    def off_cpu(table, call):  # posenc.backends.slots choosing as on a GPU
        backend = select(table, call, dataclasses.replace(Environment.of(call.src), device="cuda"))
        calls.extend(["band"] if backend.name == "band" else [])
        return backend

    monkeypatch.setattr(slot_backends, "_choose", off_cpu)
    got, got_grads = run()
    assert calls
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
