"""MultiHeadAttention / TransformerEncoder with every registered encoding (issue 4)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import registry
from posenc.nn import (
    ALiBiBias,
    MultiHeadAttention,
    RotaryEmbedding,
    ShawRelativeBias,
    SinusoidalEncoding,
    T5RelativeBias,
    TransformerEncoder,
    available_encodings,
)

F64 = torch.float64
NAMES = available_encodings()
# dfstrans_dft decays its table on every call (a reproduction of published code), so tests that compare
# two forward calls of one model cannot apply to it; tests/nn/test_dfstrans.py covers it.
STATELESS = [n for n in NAMES if n != "dfstrans_dft"]
POSITIONAL = [n for n in NAMES if n != "none"]
D, H, S = 16, 2, 8  # DFT needs positions < d_model


def encoder(name, *, n_layers: int = 2, options: dict | None = None, seed: int = 0) -> TransformerEncoder:
    torch.manual_seed(seed)
    return TransformerEncoder(D, H, n_layers, encoding=name, encoding_options=options, max_len=32).to(F64)


def test_every_required_encoding_is_registered():
    assert {
        "none",
        "sinusoidal",
        "dft",
        "learned",
        "learnable_frequency",
        "rope",
        "alibi",
        "t5",
        "shaw",
    } <= set(NAMES)


def test_without_encoding_the_encoder_is_permutation_equivariant():
    model = encoder("none")
    x = torch.randn(3, S, D, dtype=F64)
    perm = torch.randperm(S)
    torch.testing.assert_close(model(x[:, perm]), model(x)[:, perm], rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", POSITIONAL)
def test_with_an_encoding_the_encoder_is_not_permutation_equivariant(name):
    model = encoder(name)
    x = torch.randn(3, S, D, dtype=F64)
    perm = torch.roll(torch.arange(S), 3)
    assert (model(x[:, perm]) - model(x)[:, perm]).abs().max() > 1e-6


@pytest.mark.parametrize("name", STATELESS + ["shaw_values"])
def test_causal_masking_hides_the_future(name):
    model = encoder("shaw", options={"on_values": True}) if name == "shaw_values" else encoder(name)
    x = torch.randn(2, S, D, dtype=F64)
    changed = x.clone()
    changed[:, 5:] = torch.randn(2, S - 5, D, dtype=F64)
    a, b = model(x, causal=True), model(changed, causal=True)
    torch.testing.assert_close(a[:, :5], b[:, :5], rtol=0, atol=1e-12)
    assert (a[:, 5:] - b[:, 5:]).abs().max() > 1e-6
    # and without the mask the future is seen
    assert (model(x)[:, :5] - model(changed)[:, :5]).abs().max() > 1e-6


@pytest.mark.parametrize("name", STATELESS + ["shaw_values"])
def test_padding_is_ignored(name):
    """Right-padded tokens change nothing for the real ones: same as running the shorter sequence."""
    model = encoder("shaw", options={"on_values": True}) if name == "shaw_values" else encoder(name)
    x = torch.randn(2, S, D, dtype=F64)
    pad = torch.zeros(2, S, dtype=torch.bool)
    pad[:, 6:] = True
    padded = x.clone()
    padded[:, 6:] = 100.0
    torch.testing.assert_close(
        model(padded, key_padding_mask=pad)[:, :6], model(x[:, :6]), rtol=0, atol=1e-10
    )
    pad[1] = True  # a sequence that is all padding gives finite outputs, never NaN
    assert torch.isfinite(model(padded, key_padding_mask=pad, causal=True)).all()


def test_attention_with_alibi_equals_the_written_out_formula():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H, encoding=ALiBiBias(H)).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    got = mha(x, causal=True)
    q, k, v = mha.qkv(x).view(2, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    slopes = [2.0**-4, 2.0**-8]  # Press et al. for 2 heads
    i = torch.arange(S)
    dist = (i[:, None] - i[None, :]).double()
    bias = torch.stack([-m * dist.abs() for m in slopes])
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // H) + bias
    scores = scores.masked_fill(dist < 0, float("-inf"))
    ref = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(2, S, D)
    torch.testing.assert_close(got, mha.out(ref), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["alibi", "t5"])
def test_encoder_computes_a_bias_once_per_forward_and_every_layer_uses_it(name, monkeypatch):
    """A bias encoding's [h, s, s] tensor is the same in every layer: built once, not per layer."""
    model = encoder(name, n_layers=3)
    x = torch.randn(2, S, D, dtype=F64)
    reference = model(x)
    calls = []
    original = type(model.encoding).bias
    monkeypatch.setattr(
        type(model.encoding), "bias", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    torch.testing.assert_close(model(x), reference, rtol=0, atol=0)
    assert len(calls) == 1


def test_attn_bias_is_added_to_the_scores_as_written_out():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    extra = torch.randn(H, S, S, dtype=F64)
    got = mha(x, attn_bias=extra)
    q, k, v = mha.qkv(x).view(2, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // H) + extra
    ref = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(2, S, D)
    torch.testing.assert_close(got, mha.out(ref), rtol=0, atol=1e-12)


def test_attn_bias_that_does_not_broadcast_names_the_parameter_and_shapes():
    mha = MultiHeadAttention(D, H).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    with pytest.raises(
        ValueError, match=r"attn_bias must broadcast to \[b=2, h=2, s=8, s=8\], got \[3, 8, 8\]"
    ):
        mha(x, attn_bias=torch.zeros(3, S, S, dtype=F64))
    with pytest.raises(TypeError, match="attn_bias must be a float tensor"):
        mha(x, attn_bias=torch.zeros(H, S, S, dtype=torch.bool))


@pytest.mark.parametrize("padded", [False, True])
def test_a_learned_bias_gives_the_written_out_attention_and_gradients(padded):
    # T5's bias requires grad, so attention is computed explicitly (not by the fused kernel): outputs and
    # the gradients of every input, the bias included, must equal the textbook formula's
    torch.manual_seed(0)
    t5 = T5RelativeBias(H, num_buckets=8, max_distance=16)
    mha = MultiHeadAttention(D, H, encoding=t5).to(F64)
    x = torch.randn(2, S, D, dtype=F64, requires_grad=True)
    pad = torch.zeros(2, S, dtype=torch.bool)
    if padded:
        pad[1, 5:] = True
    got = mha(x, key_padding_mask=pad if padded else None)
    grad = torch.randn_like(got)
    got_grads = torch.autograd.grad(got, (x, t5.relative_attention_bias.weight), grad)

    q, k, v = mha.qkv(x).view(2, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    scores = q @ k.transpose(-1, -2) / math.sqrt(D // H) + t5.bias(S, S, dtype=F64)
    scores = scores.masked_fill(pad[:, None, None, :], float("-inf"))
    ref = mha.out((torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(2, S, D))
    ref_grads = torch.autograd.grad(ref, (x, t5.relative_attention_bias.weight), grad)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    for g, r in zip(got_grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_shaw_with_values_equals_the_written_out_formula():
    torch.manual_seed(0)
    shaw = ShawRelativeBias(D // H, max_distance=2, on_values=True)
    mha = MultiHeadAttention(D, H, encoding=shaw).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    got = mha(x)
    q, k, v = mha.qkv(x).view(2, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    clip = lambda i, j: min(max(j - i, -2), 2) + 2
    a_k = torch.stack(
        [torch.stack([shaw.keys[clip(i, j)] for j in range(S)]) for i in range(S)]
    )  # [s, s, d_h]
    a_v = torch.stack([torch.stack([shaw.values[clip(i, j)] for j in range(S)]) for i in range(S)])
    scores = (q @ k.transpose(-1, -2) + torch.einsum("bhid,ijd->bhij", q, a_k)) / math.sqrt(D // H)
    w = torch.softmax(scores, -1)
    out = w @ v + torch.einsum("bhij,ijd->bhid", w, a_v)
    torch.testing.assert_close(got, mha.out(out.transpose(1, 2).reshape(2, S, D)), rtol=0, atol=1e-12)


def test_rotary_in_attention_rotates_queries_and_keys_only():
    torch.manual_seed(0)
    rope = RotaryEmbedding(D // H, layout="adjacent")
    mha = MultiHeadAttention(D, H, encoding=rope).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    q, k, v = mha.qkv(x).view(2, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    qr, kr = rope(q, k)
    ref = torch.softmax(qr @ kr.transpose(-1, -2) / math.sqrt(D // H), -1) @ v
    torch.testing.assert_close(mha(x), mha.out(ref.transpose(1, 2).reshape(2, S, D)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", [n for n in NAMES if registry.get(n).learned] + ["shaw_values"])
def test_gradients_reach_every_learned_parameter(name):
    model = encoder("shaw", options={"on_values": True}) if name == "shaw_values" else encoder(name)
    model(torch.randn(2, S, D, dtype=F64), causal=True).square().sum().backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), pname
        assert p.grad.abs().sum() > 0, pname
    assert any(pname.startswith("encoding.") for pname, _ in model.named_parameters())


def test_concat_input_encoding_is_projected_back():
    model = TransformerEncoder(D, H, 1, encoding="sinusoidal", encoding_options={"mode": "concat", "dim": 8})
    assert model.input_projection is not None and model.input_projection.in_features == D + 8
    assert model(torch.randn(2, S, D)).shape == (2, S, D)


@pytest.mark.parametrize(
    ("name", "options"),
    [(n, None) for n in ("none", "sinusoidal", "rope", "alibi", "t5", "shaw")]
    + [("shaw", {"on_values": True})],
)
def test_torch_compile_runs_the_encoder(name, options):
    model = TransformerEncoder(D, H, 2, encoding=name, encoding_options=options, max_len=32)
    fullgraph = name in ("none", "rope", "alibi", "t5", "shaw")  # this module's encodings: no graph breaks
    compiled = torch.compile(model, backend="aot_eager", fullgraph=fullgraph)
    x = torch.randn(2, S, D)
    pad = torch.zeros(2, S, dtype=torch.bool)
    pad[0, -2:] = True
    out = compiled(x, key_padding_mask=pad, causal=True)
    torch.testing.assert_close(out, model(x, key_padding_mask=pad, causal=True), rtol=1e-5, atol=1e-5)
    out.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.slow
def test_torch_compile_with_inductor():
    model = TransformerEncoder(D, H, 1, encoding="rope", max_len=32)
    x = torch.randn(2, S, D)
    torch.testing.assert_close(
        torch.compile(model)(x, causal=True), model(x, causal=True), rtol=1e-5, atol=1e-5
    )


def _train(name: str, steps: int, options: dict | None = None) -> list[float]:
    """Toy order-dependent task: predict the previous token's first feature (0 at position 0)."""
    torch.manual_seed(0)
    model = TransformerEncoder(32, 2, 1, encoding=name, encoding_options=options, max_len=32)
    head = torch.nn.Linear(32, 1)
    opt = torch.optim.Adam([*model.parameters(), *head.parameters()], lr=1e-2)
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 16, 32, generator=g)
        y = torch.cat([torch.zeros(32, 1), x[:, :-1, 0]], dim=1)
        loss = (head(model(x)).squeeze(-1) - y).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", NAMES)
def test_every_encoding_trains(name):
    losses = _train(name, 30)
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) / 5 < 0.9 * sum(losses[:5]) / 5


@pytest.mark.parametrize(
    ("name", "options"), [("rope", None), ("t5", None), ("shaw", None), ("shaw", {"on_values": True})]
)
def test_relative_encodings_learn_to_attend_to_the_previous_token(name, options):
    """Below the position-blind floor Var(y) = 15/16 by an order of magnitude (``none`` stays at ~0.87)."""
    assert sum(_train(name, 150, options)[-5:]) / 5 < 0.2


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: TransformerEncoder(30, 4, 1), ValueError, "d_model=30 must be divisible by n_heads=4"),
        (
            lambda: TransformerEncoder(16, 2, 1, encoding="xpos"),
            ValueError,
            "registered encodings: none, sinusoidal",
        ),
        (lambda: TransformerEncoder(16, 2, 1, encoding=RotaryEmbedding(4)), ValueError, "head_dim=4"),
        (lambda: TransformerEncoder(16, 2, 1, encoding=ALiBiBias(4)), ValueError, "n_heads=4"),
        (
            lambda: TransformerEncoder(16, 2, 1, encoding="rope", encoding_options={"fraction": 0.5}),
            TypeError,
            "no option 'fraction'",
        ),
        (
            lambda: TransformerEncoder(12, 2, 1, encoding="rope", encoding_options={"rotary_dim": 0.5}),
            ValueError,
            "rotary_dim",
        ),
        (lambda: TransformerEncoder(14, 2, 1, encoding="rope"), ValueError, "head_dim must be even"),
    ],
)
def test_bad_construction_is_explained(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_bad_masks_and_inputs_are_explained():
    model = TransformerEncoder(D, H, 1, encoding="alibi")
    x = torch.randn(2, S, D)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \[b=2 or 1, s=8\]"):
        model(x, key_padding_mask=torch.zeros(2, S + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="key_padding_mask"):
        model(x, key_padding_mask=torch.zeros(3, S, dtype=torch.bool))
    with pytest.raises(TypeError, match="key_padding_mask must be a bool"):
        model(x, key_padding_mask=torch.zeros(2, S))
    with pytest.raises(ValueError, match="x must be"):
        model(torch.randn(2, S, D + 1))
    with pytest.raises(ValueError, match="q_positions"):
        model(x, positions=torch.arange(S + 1))
    with pytest.raises(TypeError, match="acts on the input tokens; give it to TransformerEncoder"):
        MultiHeadAttention(D, H, encoding=SinusoidalEncoding(D))
    with pytest.raises(TypeError, match="encoding must be a positional-encoding module"):
        MultiHeadAttention(D, H, encoding=model.layers[0])


def test_a_six_layer_rope_encoder_builds_its_tables_once_per_forward(monkeypatch):
    """Explicit positions: one cos/sin build per forward, shared by all six layers (not one per layer)."""
    model = TransformerEncoder(D, H, 6, encoding="rope", max_len=32).to(F64)
    x = torch.randn(2, S, D, dtype=F64)
    positions = torch.arange(S) * 3 + 5
    reference = model(x, positions=positions)
    calls = []
    original = RotaryEmbedding._scaled_tables  # every table build (and its per-pair values) goes through it
    monkeypatch.setattr(
        RotaryEmbedding, "_scaled_tables", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    torch.testing.assert_close(model(x, positions=positions), reference, rtol=0, atol=0)
    assert len(calls) == 1
    model(x, positions=positions)
    assert len(calls) == 2


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "shaw"])
def test_each_layer_uses_the_context_the_encoder_computed(name, monkeypatch):
    """The encoding's position work runs once per forward whatever the depth, and layers receive it."""
    model = encoder(name, n_layers=4)
    x = torch.randn(2, S, D, dtype=F64)
    calls = []
    original = type(model.encoding).context
    monkeypatch.setattr(
        type(model.encoding), "context", lambda self, *a, **k: calls.append(1) or original(self, *a, **k)
    )
    model(x, positions=torch.arange(S))
    assert len(calls) == 1


def test_the_encoding_is_bound_once_and_stored_once():
    model = encoder("t5", n_layers=3)
    assert all(layer.attention.encoding is model.encoding for layer in model.layers)
    keys = [k for k in model.state_dict() if "relative_attention_bias" in k]
    assert keys == ["encoding.relative_attention_bias.weight"]
    standalone = MultiHeadAttention(D, H, encoding=ALiBiBias(H))
    assert isinstance(standalone.encoding, ALiBiBias) and "encoding" in dict(standalone.named_children())


def _layer_written_out(layer: torch.nn.Module, x: torch.Tensor, rotate) -> torch.Tensor:
    """One pre-LN layer with queries and keys rotated by ``rotate(q, k)``, attention written out."""
    mha = layer.attention
    b, s, d = x.shape
    q, k, v = mha.qkv(layer.norm1(x)).view(b, s, 3, H, D // H).permute(2, 0, 3, 1, 4)
    q, k = rotate(q, k)
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D // H), -1)
    x = x + mha.out((weights @ v).transpose(1, 2).reshape(b, s, d))
    return x + layer.feedforward(layer.norm2(x))


def test_xpos_in_the_encoder_equals_the_module_applied_to_queries_and_keys():
    """xPos scales queries and keys inversely: the context carries both tables, computed once."""
    model = encoder("rope", n_layers=2, options={"xpos_scale_base": 16.0})
    x = torch.randn(2, S, D, dtype=F64)
    want = x
    for layer in model.layers:
        want = _layer_written_out(layer, want, lambda q, k: model.encoding(q, k))
    torch.testing.assert_close(model(x), model.norm(want), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["rope", "alibi", "t5", "shaw", "shaw_values"])
def test_a_left_padded_batch_with_per_sequence_positions_equals_each_sequence_alone(name):
    """Positions ``[b, s]``: sequence 0 is left-padded by 2 (its positions start after the padding)."""
    model = encoder("shaw", options={"on_values": True}) if name == "shaw_values" else encoder(name)
    short, full = torch.randn(1, S - 2, D, dtype=F64), torch.randn(1, S, D, dtype=F64)
    x = torch.cat([torch.cat([torch.full((1, 2, D), 100.0, dtype=F64), short], 1), full])
    positions = torch.stack([torch.tensor([0, 0, *range(S - 2)]), torch.arange(S)])
    pad = torch.zeros(2, S, dtype=torch.bool)
    pad[0, :2] = True
    out = model(x, key_padding_mask=pad, positions=positions)
    torch.testing.assert_close(out[0, 2:], model(short)[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(out[1], model(full)[0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", ["rope", "alibi", "shaw"])
def test_packed_sequences_with_restarting_positions_match_each_sequence_alone(name):
    """Two sequences packed in one row, positions restarting at 0, attention kept inside each by a bias."""
    model = encoder(name)
    first, second = torch.randn(1, 3, D, dtype=F64), torch.randn(1, S - 3, D, dtype=F64)
    x = torch.cat([first, second], 1)
    positions = torch.cat([torch.arange(3), torch.arange(S - 3)])[None]  # [1, s]
    segment = torch.tensor([0] * 3 + [1] * (S - 3))
    block = torch.zeros(S, S, dtype=F64).masked_fill(segment[:, None] != segment[None, :], float("-inf"))
    got = x
    context = model.layers[0].attention.context(x, positions=positions)
    for layer in model.layers:
        got = layer(got, context=context, attn_bias=block)
    got = model.norm(got)
    torch.testing.assert_close(got[0, :3], model(first)[0], rtol=0, atol=1e-10)
    torch.testing.assert_close(got[0, 3:], model(second)[0], rtol=0, atol=1e-10)
