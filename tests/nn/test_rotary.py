"""RotaryEmbedding / apply_rotary against reference formulas written out here in float64 (SPEC §7)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from peers import import_peer
from references import reference_rotary

from posenc.nn import RotaryEmbedding, apply_rotary

F64 = torch.float64


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
@pytest.mark.parametrize(
    ("head_dim", "rotary_dim", "r"), [(32, None, 32), (32, 16, 16), (40, 0.25, 10), (9, 6, 6)]
)
@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_matches_reference_formula(layout, head_dim, rotary_dim, r, base):
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 17, head_dim, dtype=F64), torch.randn(2, 3, 17, head_dim, dtype=F64)
    rope = RotaryEmbedding(head_dim, base=base, rotary_dim=rotary_dim, layout=layout).to(F64)
    assert rope.rotary_dim == r
    q_rot, k_rot = rope(q, k)
    pos = torch.arange(17)
    torch.testing.assert_close(
        q_rot, reference_rotary(q, pos, layout=layout, rotary_dim=r, base=base), rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        k_rot, reference_rotary(k, pos, layout=layout, rotary_dim=r, base=base), rtol=0, atol=1e-12
    )
    torch.testing.assert_close(
        q_rot[..., r:], q[..., r:], rtol=0, atol=0
    )  # partial rotary: the rest passes through


def test_noncontiguous_input_and_float32_match_reference():
    torch.manual_seed(1)
    q = torch.randn(2, 11, 4, 16).transpose(1, 2)  # [b, h, s, d_h] seen through a transpose, as in attention
    for layout in ("adjacent", "half_split"):
        out, _ = RotaryEmbedding(16, layout=layout)(q, q)
        assert out.dtype == torch.float32 and out.shape == q.shape
        expected = reference_rotary(q, torch.arange(11), layout=layout, rotary_dim=16, base=10000.0)
        torch.testing.assert_close(out.to(F64), expected, rtol=0, atol=1e-6)


@given(
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    shift=st.integers(-3000, 3000),
    layout=st.sampled_from(["adjacent", "half_split"]),
)
def test_inner_product_depends_on_n_minus_m_only(m, n, shift, layout):
    torch.manual_seed(2)
    rope = RotaryEmbedding(16, layout=layout).to(F64)
    q, k = torch.randn(1, 1, 1, 16, dtype=F64), torch.randn(1, 1, 1, 16, dtype=F64)

    def score(a: int, b: int) -> float:
        qr, kr = rope(q, k, q_positions=torch.tensor([a]), k_positions=torch.tensor([b]))
        return float((qr * kr).sum())

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)
    assert score(m, n) == pytest.approx(score(0, n - m), abs=1e-9)  # ⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩


@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_layouts_agree_after_pair_permutation(rotary_dim):
    """adjacent coordinate 2i ↔ half_split coordinate i, 2i+1 ↔ i + r/2 (the pairs renamed)."""
    torch.manual_seed(3)
    d, r = 12, rotary_dim or 12
    perm = torch.cat(
        [
            torch.stack([torch.arange(r // 2), torch.arange(r // 2) + r // 2], dim=-1).flatten(),
            torch.arange(r, d),
        ]
    )
    x = torch.randn(2, 2, 9, d, dtype=F64)
    half, _ = RotaryEmbedding(d, rotary_dim=rotary_dim, layout="half_split").to(F64)(x, x)
    adj, _ = RotaryEmbedding(d, rotary_dim=rotary_dim, layout="adjacent").to(F64)(x[..., perm], x[..., perm])
    torch.testing.assert_close(adj, half[..., perm], rtol=0, atol=1e-14)
    assert not torch.allclose(adj, half)  # the layouts really differ


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
def test_offset_and_positions_equal_slicing_a_longer_sequence(layout):
    torch.manual_seed(4)
    rope = RotaryEmbedding(16, layout=layout, max_len=16)  # small cache: the offset path must grow it
    q, k = torch.randn(2, 3, 30, 16), torch.randn(2, 3, 30, 16)
    q_full, k_full = rope(q, k)
    q_off, k_off = rope(q[..., 20:27, :], k[..., 20:27, :], offset=20)
    torch.testing.assert_close(q_off, q_full[..., 20:27, :], rtol=0, atol=0)
    torch.testing.assert_close(k_off, k_full[..., 20:27, :], rtol=0, atol=0)
    q_pos, _ = rope(q[..., 20:27, :], k[..., 20:27, :], q_positions=torch.arange(20, 27))
    torch.testing.assert_close(q_pos, q_full[..., 20:27, :], rtol=0, atol=1e-6)
    # cached decoding: one new query after 30 keys sits at position 29
    q_dec, k_dec = rope(q[..., 29:, :], k)
    torch.testing.assert_close(q_dec, q_full[..., 29:, :], rtol=0, atol=0)
    torch.testing.assert_close(k_dec, k_full, rtol=0, atol=0)


def test_float32_at_a_million_matches_float64_reference():
    torch.manual_seed(5)
    pos = torch.arange(10**6, 10**6 + 16)
    x = torch.randn(1, 2, 16, 64)
    for layout in ("adjacent", "half_split"):
        rope = RotaryEmbedding(64, layout=layout)
        out, _ = rope(x, x, q_positions=pos, k_positions=pos)
        expected = reference_rotary(x, pos, layout=layout, rotary_dim=64, base=10000.0)
        assert (out.to(F64) - expected).abs().max() < 1e-5
    # The test can fail: angles formed in float32 are off by far more than the tolerance allows.
    inv_freq32 = 1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=torch.float32) / 64))
    angle32 = (pos.float()[:, None] * inv_freq32[None, :]).to(F64)
    angle64 = pos.to(F64)[:, None] * (1.0 / (10000.0 ** (torch.arange(0, 64, 2, dtype=F64) / 64)))
    assert (angle32 - angle64).abs().max() > 1e-2


def test_linear_interpolation_and_ntk_formulas():
    base, factor, r = 10000.0, 4.0, 32
    i = torch.arange(r // 2, dtype=F64)
    plain = base ** (-2 * i / r)
    linear = RotaryEmbedding(r, scaling="linear", scaling_factor=factor)
    torch.testing.assert_close(linear.frequencies, plain / factor, rtol=1e-14, atol=0)
    ntk = RotaryEmbedding(r, scaling="ntk", scaling_factor=factor)
    torch.testing.assert_close(
        ntk.frequencies, (base * factor ** (r / (r - 2))) ** (-2 * i / r), rtol=1e-13, atol=0
    )
    # NTK keeps the highest frequency and divides the lowest by exactly the factor
    assert ntk.frequencies[0] == 1.0
    assert float(ntk.frequencies[-1]) == pytest.approx(float(plain[-1]) / factor, rel=1e-12)
    # linear interpolation: position t rotates as the unscaled module rotates t / factor
    x = torch.randn(1, 1, 6, r, dtype=F64)
    pos = torch.tensor([0, 3, 7, 100, 4095, 8191])
    out, _ = linear.to(F64)(x, x, q_positions=pos)
    ref, _ = RotaryEmbedding(r).to(F64)(x, x, q_positions=pos.to(F64) / factor)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_tables_are_nonpersistent_and_rebuilt_exactly_per_dtype():
    rope = RotaryEmbedding(16)
    assert rope.state_dict() == {} and {b.dtype for b in rope.buffers()} == {torch.float32}
    rope = rope.double()  # casting the float32 table would keep float32 accuracy; it must be rebuilt
    x = torch.randn(1, 1, 50, 16, dtype=F64)
    out, _ = rope(x, x, offset=10**5)
    ref = reference_rotary(
        x, torch.arange(10**5, 10**5 + 50), layout="half_split", rotary_dim=16, base=10000.0
    )
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
def test_gradient_of_rotation_tables_is_the_inverse_rotation(layout):
    # rotation tables over every dim of a contiguous input: adjacent takes the complex multiply that
    # autograd differentiates itself; the gradient must still be exact and equal R^T g
    cos, sin = RotaryEmbedding(8, layout=layout).cos_sin(5, dtype=F64)
    x = torch.randn(2, 5, 8, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary(t, cos, sin, layout=layout), (x,))
    g = torch.randn(2, 5, 8, dtype=F64)
    (grad,) = torch.autograd.grad(apply_rotary(x, cos, sin, layout=layout), x, g)
    torch.testing.assert_close(grad, apply_rotary(g, cos, -sin, layout=layout), rtol=0, atol=1e-15)


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
def test_gradient_is_the_inverse_rotation(layout):
    cos, sin = (
        torch.randn(5, 8, dtype=F64),
        torch.randn(5, 8, dtype=F64),
    )  # arbitrary tables, not just rotations
    x = torch.randn(2, 5, 10, dtype=F64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: apply_rotary(t, cos, sin, layout=layout), (x,))


def test_rotation_preserves_norm():
    x = torch.randn(2, 4, 33, 64)
    out, _ = RotaryEmbedding(64, layout="adjacent")(x, x)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"head_dim": 15}, "head_dim"),
        ({"head_dim": 10, "rotary_dim": 0.5}, "rotary_dim"),  # leaves 5 dims: odd
        ({"head_dim": 16, "rotary_dim": 7}, "rotary_dim"),
        ({"head_dim": 16, "rotary_dim": 32}, "rotary_dim"),
        ({"head_dim": 16, "layout": "interleaved"}, "layout"),
        ({"head_dim": 16, "scaling": "yarm"}, "scaling"),
        ({"head_dim": 16, "scaling": "yarn"}, "yarn.*needs original_max_position_embeddings"),
        ({"head_dim": 16, "scaling": "linear"}, "linear.*needs factor"),
        ({"head_dim": 16, "scaling_factor": 4.0}, "scaling_factor was given without scaling"),
        (
            {"head_dim": 16, "scaling": "linear", "scaling_factor": 2.0, "scaling_options": {"beta": 1}},
            "unknown beta",
        ),
        ({"head_dim": 16, "xpos_scale_base": 0.0}, "xpos_scale_base"),
        ({"head_dim": 16, "scaling": "linear", "scaling_factor": 0.5}, "scaling_factor"),
        ({"head_dim": 16, "base": -1.0}, "base"),
    ],
)
def test_bad_construction_names_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding(**kwargs)


def test_bad_call_names_the_parameter():
    rope = RotaryEmbedding(16)
    x = torch.randn(1, 1, 4, 16)
    with pytest.raises(ValueError, match="q must be"):
        rope(torch.randn(1, 1, 4, 8), x)
    with pytest.raises(ValueError, match="offset"):
        rope(x, x, offset=-1)
    with pytest.raises(ValueError, match="q_positions"):
        rope(x, x, q_positions=torch.arange(5))
    with pytest.raises(ValueError, match="k_positions"):
        rope(x, torch.randn(1, 1, 6, 16), k_positions=torch.arange(6))
    with pytest.raises(ValueError, match="layout"):
        apply_rotary(x, torch.ones(4, 16), torch.zeros(4, 16), layout="split")
    with pytest.raises(ValueError, match="r even"):
        apply_rotary(x, torch.ones(4, 5), torch.zeros(4, 5), layout="adjacent")


def test_compiles_without_graph_breaks():
    rope = RotaryEmbedding(16, layout="adjacent")
    q = torch.randn(2, 2, 9, 16, requires_grad=True)
    compiled = torch.compile(lambda a: sum(t.sum() for t in rope(a, a)), backend="aot_eager", fullgraph=True)
    compiled(q).backward()
    expected = torch.autograd.grad(sum(t.sum() for t in rope(q, q)), q)[0]
    torch.testing.assert_close(q.grad, expected)
    assert math.isfinite(float(q.grad.abs().sum()))


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
def test_exported_graph_is_real_and_compiled_matches_eager(layout):
    cos, sin = RotaryEmbedding(16, layout=layout).cos_sin(9, dtype=torch.float32)

    class Rotate(torch.nn.Module):
        def forward(self, x):
            return apply_rotary(x, cos, sin, layout=layout)

    x = torch.randn(2, 3, 9, 16)
    graph = torch.export.export(Rotate(), (x,)).graph
    dtypes = {n.meta["val"].dtype for n in graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)}
    assert dtypes and not any(d.is_complex for d in dtypes), dtypes
    compiled = torch.compile(Rotate(), backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), Rotate()(x), rtol=1e-6, atol=1e-6)


def test_pairs_at_an_odd_storage_offset_rotate_like_a_contiguous_copy():
    # view_as_complex cannot read pairs that start at an odd offset: the real arithmetic takes them
    cos, sin = RotaryEmbedding(16, layout="adjacent").cos_sin(9, dtype=torch.float32)
    x = torch.randn(2, 9, 18)[..., 1:17]

    def rotate(t):
        return apply_rotary(t, cos, sin, layout="adjacent")

    expected = rotate(x.contiguous())
    torch.testing.assert_close(rotate(x), expected, rtol=0, atol=1e-6)
    compiled = torch.compile(rotate, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 2.0**53])
def test_refuses_positions_it_cannot_rotate_exactly(bad):
    rope, x = RotaryEmbedding(8), torch.randn(1, 1, 3, 8)
    with pytest.raises(ValueError, match=r"q_positions must be (finite|< 2\^53)"):
        rope(x, x, q_positions=torch.tensor([0.0, bad, 1.0], dtype=F64))
    with pytest.raises(ValueError, match=r"offset"):
        rope(x, x, offset=2**53)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_refuses_half_precision_positions(dtype):
    rope, x = RotaryEmbedding(8), torch.randn(1, 1, 3, 8)
    with pytest.raises(
        TypeError, match=f"q_positions must be an integer dtype, float32 or float64, got {dtype}"
    ):
        rope(x, x, q_positions=torch.arange(3).to(dtype))


def test_refuses_integer_queries_and_keys():
    rope = RotaryEmbedding(8)
    with pytest.raises(TypeError, match="q must be a floating tensor.*int64"):
        rope(torch.ones(1, 1, 3, 8, dtype=torch.int64), torch.ones(1, 1, 3, 8))
    with pytest.raises(TypeError, match="k must be a floating tensor.*int32"):
        rope(torch.ones(1, 1, 3, 8), torch.ones(1, 1, 3, 8, dtype=torch.int32))


@pytest.mark.parametrize("shape", [(0, 2, 5, 8), (2, 2, 0, 8), (2, 0, 5, 8)])
@pytest.mark.parametrize("xpos", [None, 64.0])
def test_empty_batch_or_sequence_gives_empty_result(shape, xpos):
    rope = RotaryEmbedding(8, xpos_scale_base=xpos)
    x = torch.randn(shape)
    q, k = rope(x, x)
    assert q.shape == x.shape and k.shape == x.shape
    q, k = rope(x, x, q_positions=torch.arange(shape[2]))
    assert q.shape == x.shape and k.shape == x.shape


def test_cache_grown_under_inference_mode_still_trains():
    from posenc.nn import TransformerEncoder

    torch.manual_seed(6)
    model = TransformerEncoder(8, 2, 1, encoding="rope", max_len=4)
    x = torch.randn(2, 6, 8)
    with torch.inference_mode():
        model(x)  # grows the rotary cache past max_len inside inference mode
    loss = model(x).square().mean()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
@pytest.mark.parametrize("xpos", [None, 32.0])
def test_batched_positions_equal_a_loop_over_rows(layout, xpos):
    """Left-padded rows and packed sequences (positions restarting at 0) in one [b, s] call."""
    torch.manual_seed(7)
    rope = RotaryEmbedding(16, layout=layout, rotary_dim=12, xpos_scale_base=xpos).to(F64)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [0, 0, 0, 0, 1, 2, 3], [0, 1, 2, 0, 1, 0, 1]])
    qkv = torch.randn(3, 7, 3, 2, 16, dtype=F64)  # [b, s, 3, h, d]: q, k as views, as attention makes them
    q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
    q_rot, k_rot = rope(q, k, q_positions=positions, k_positions=positions)
    for row in range(3):
        q_alone, k_alone = rope(q[row : row + 1], k[row : row + 1], q_positions=positions[row])
        torch.testing.assert_close(q_rot[row : row + 1], q_alone, rtol=0, atol=1e-13)
        torch.testing.assert_close(k_rot[row : row + 1], k_alone, rtol=0, atol=1e-13)
    q_tail, k_tail = rope(q[1:2, :, 3:], k[1:2, :, 3:])  # the padded row's tokens alone, unpadded
    torch.testing.assert_close(  # scores: xPos's centre moves with the row, and cancels in every score
        q_tail @ k_tail.transpose(-1, -2),
        q_rot[1:2, :, 3:] @ k_rot[1:2, :, 3:].transpose(-1, -2),
        rtol=0,
        atol=1e-12,
    )
    # cross-attention: [b, s_q] queries against [b, s_k] keys, and [1, s] broadcast over the batch
    q_part, _ = rope(q[:, :, -2:], k, q_positions=positions[:, -2:], k_positions=positions)
    torch.testing.assert_close(q_part, q_rot[:, :, -2:], rtol=0, atol=1e-13)
    shared, _ = rope(q, k, q_positions=positions[:1])
    torch.testing.assert_close(shared[2], rope(q[2:], k[2:])[0][0], rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match=r"q must be \[b=3, h, s, d_h\]"):
        rope(q[:2], k[:2], q_positions=positions)


def test_batched_rotary_gradients_flow_to_q_and_k():
    rope = RotaryEmbedding(8)
    q = torch.randn(2, 1, 5, 8, dtype=F64, requires_grad=True)
    positions = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 2, 3]])
    assert torch.autograd.gradcheck(lambda t: rope.to(F64)(t, t, q_positions=positions)[0], (q,))


rotary_embedding_torch = import_peer("rotary_embedding_torch", "the xPos peer compared against")


@pytest.mark.parametrize(("dim", "length", "scale_base"), [(16, 20, 512), (32, 9, 64), (8, 33, 16)])
def test_xpos_matches_rotary_embedding_torch(dim, length, scale_base):
    torch.manual_seed(8)
    peer = rotary_embedding_torch.RotaryEmbedding(
        dim=dim, use_xpos=True, xpos_scale_base=scale_base, cache_if_possible=False
    )
    ours = RotaryEmbedding(dim, layout="adjacent", xpos_scale_base=scale_base)
    q, k = torch.randn(2, 3, length, dim), torch.randn(2, 3, length, dim)
    q_peer, k_peer = peer.rotate_queries_and_keys(q, k)
    q_ours, k_ours = ours(q, k)
    torch.testing.assert_close(q_ours, q_peer, rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(k_ours, k_peer, rtol=2e-5, atol=2e-6)
    plain, _ = RotaryEmbedding(dim, layout="adjacent")(q, k)
    assert not torch.allclose(plain, q_peer, rtol=1e-3, atol=1e-3)  # xPos really rescales
    # scores depend on n − m only: shifting every position changes no score
    shifted_q, shifted_k = ours(q, k, offset=1000)
    torch.testing.assert_close(
        shifted_q @ shifted_k.transpose(-1, -2), q_ours @ k_ours.transpose(-1, -2), rtol=1e-4, atol=1e-4
    )


def meta_to_hf(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Hugging Face's LLaMA conversion ``permute`` (convert_llama_weights_to_hf.py), written out here:
    the script is not shipped in the installed transformers package."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


@pytest.mark.parametrize(("src", "dst"), [("adjacent", "half_split"), ("half_split", "adjacent")])
@pytest.mark.parametrize("rotary_dim", [None, 8])
def test_permuted_projections_give_the_same_attention_scores(src, dst, rotary_dim):
    from posenc.nn import permute_rotary_weights

    torch.manual_seed(9)
    n_heads, d_h, d_in, s = 3, 12, 10, 9
    w_q, w_k = torch.randn(n_heads * d_h, d_in, dtype=F64), torch.randn(n_heads * d_h, d_in, dtype=F64)
    b_q = torch.randn(n_heads * d_h, dtype=F64)
    x = torch.randn(2, s, d_in, dtype=F64)

    def scores(wq, bq, wk, layout):
        q = (x @ wq.T + bq).view(2, s, n_heads, d_h).transpose(1, 2)
        k = (x @ wk.T).view(2, s, n_heads, d_h).transpose(1, 2)
        q, k = RotaryEmbedding(d_h, rotary_dim=rotary_dim, layout=layout).to(F64)(q, k, offset=1000)
        return q @ k.transpose(-1, -2)

    def move(w):
        return permute_rotary_weights(w, n_heads=n_heads, src=src, dst=dst, rotary_dim=rotary_dim)

    before = scores(w_q, b_q, w_k, src)
    after = scores(move(w_q), move(b_q), move(w_k), dst)
    torch.testing.assert_close(after, before, rtol=1e-12, atol=1e-10)
    assert not torch.allclose(scores(w_q, b_q, w_k, dst), before)  # without the permutation: different scores
    back = permute_rotary_weights(move(w_q), n_heads=n_heads, src=dst, dst=src, rotary_dim=rotary_dim)
    torch.testing.assert_close(back, w_q, rtol=0, atol=0)
    if src == "adjacent" and rotary_dim is None:
        torch.testing.assert_close(move(w_q), meta_to_hf(w_q, n_heads), rtol=0, atol=0)


def test_permute_rotary_weights_refuses_bad_shapes():
    from posenc.nn import permute_rotary_weights

    with pytest.raises(ValueError, match="not a multiple of n_heads=4"):
        permute_rotary_weights(torch.zeros(10, 3), n_heads=4, src="adjacent", dst="half_split")
    with pytest.raises(ValueError, match="src must be one of"):
        permute_rotary_weights(torch.zeros(8, 3), n_heads=2, src="meta", dst="half_split")
    with pytest.raises(ValueError, match="weight must be"):
        permute_rotary_weights(torch.zeros(2, 2, 2), n_heads=1, src="adjacent", dst="half_split")


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "shaw"])
def test_encoder_refuses_non_finite_positions(encoding):
    from posenc.nn import TransformerEncoder

    model = TransformerEncoder(8, 2, 1, encoding=encoding)
    with pytest.raises(ValueError, match="positions must be finite"):
        model(torch.randn(1, 3, 8), positions=torch.tensor([0.0, float("nan"), 2.0]))


@pytest.mark.parametrize("encoding", ["rope", "alibi", "t5", "shaw"])
def test_encoder_with_batched_positions_equals_a_loop_over_rows(encoding):
    from posenc.nn import TransformerEncoder

    torch.manual_seed(10)
    model = TransformerEncoder(8, 2, 2, encoding=encoding).to(F64)
    x = torch.randn(3, 5, 8, dtype=F64)
    positions = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 0, 1, 2], [0, 1, 0, 1, 2]])
    batched = model(x, positions=positions)
    for row in range(3):
        alone = model(x[row : row + 1], positions=positions[row])
        torch.testing.assert_close(batched[row : row + 1], alone, rtol=0, atol=1e-12)


def test_rotation_tables_changed_in_place_or_replaced_are_never_served_stale():
    cos, sin = RotaryEmbedding(8, layout="adjacent").cos_sin(5, dtype=F64)
    x = torch.randn(2, 5, 8, dtype=F64)
    first = apply_rotary(x, cos, sin, layout="adjacent")
    torch.testing.assert_close(apply_rotary(x, cos, sin, layout="adjacent"), first, rtol=0, atol=0)
    sin.neg_()  # in place: the inverse rotation now
    torch.testing.assert_close(apply_rotary(first, cos, sin, layout="adjacent"), x, rtol=0, atol=1e-12)
    for _ in range(3):  # fresh tables (possibly at a freed table's address) each time
        c, s = torch.ones(5, 8, dtype=F64), torch.zeros(5, 8, dtype=F64)
        torch.testing.assert_close(apply_rotary(x, c, s, layout="adjacent"), x, rtol=0, atol=0)


def test_inference_mode_tables_rotate_like_ordinary_ones():
    # inference tensors keep no version counter: their derived tables are not cached, never an error
    x = torch.randn(1, 2, 64, 16, dtype=F64)
    expected = RotaryEmbedding(16, layout="half_split", max_len=128)(x, x)
    with torch.inference_mode():
        q, k = RotaryEmbedding(16, layout="half_split", max_len=16)(x, x)  # 64 > 2·16: computed, not cached
        c, s = RotaryEmbedding(16, layout="half_split").cos_sin(64, dtype=F64)
        c, s = c.clone(), s.clone()
        assert c.is_inference()
        by_tables = apply_rotary(x, c, s, layout="half_split")
    torch.testing.assert_close(q, expected[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(k, expected[1], rtol=0, atol=1e-12)
    torch.testing.assert_close(by_tables, expected[0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_xpos_refuses_scales_its_dtype_cannot_hold_and_stays_finite_inside(dtype):
    rope = RotaryEmbedding(8, xpos_scale_base=512.0)
    q = torch.randn(1, 1, 2, 8, dtype=dtype)
    with pytest.raises(ValueError, match=r"xPos scales overflow .* beyond \|t − c\| = 18130 positions"):
        rope(q, q, q_positions=torch.tensor([0, 100000]))
    with pytest.raises(ValueError, match="xPos scales overflow"):
        rope(torch.randn(1, 1, 80000, 8, dtype=dtype), torch.randn(1, 1, 80000, 8, dtype=dtype))
    # the largest span inside the range: scores finite, and equal to the float64 ones' decay
    positions = torch.tensor([0, 18000, 36000])  # the centre key is the middle one: |t − c| <= 18000
    q = torch.randn(1, 1, 3, 8, dtype=torch.float64)
    qr, kr = rope(q.to(dtype), q.to(dtype), q_positions=positions)
    assert torch.isfinite(qr @ kr.transpose(-1, -2)).all()
    qr64, kr64 = rope(q, q, q_positions=positions)
    torch.testing.assert_close(
        (qr.double() @ kr.double().transpose(-1, -2)).diagonal(dim1=-2, dim2=-1),
        (qr64 @ kr64.transpose(-1, -2)).diagonal(dim1=-2, dim2=-1),
        rtol=2e-2 if dtype == torch.bfloat16 else 1e-5,
        atol=1e-3,
    )


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
@pytest.mark.parametrize("form", ["default", "positions"])
def test_a_module_called_under_inference_mode_still_trains(layout, form):
    # the tables a call under inference mode leaves in the module must serve autograd later
    rope = RotaryEmbedding(8, layout=layout)
    q = torch.randn(1, 2, 5, 8, dtype=F64)
    options = {} if form == "default" else {"q_positions": torch.arange(5)}
    with torch.inference_mode():
        rope(q, q, **options)
    trained = q.clone().requires_grad_()
    rope(trained, trained, **options)[0].sum().backward()
    want = q.clone().requires_grad_()
    RotaryEmbedding(8, layout=layout)(want, want, **options)[0].sum().backward()
    torch.testing.assert_close(trained.grad, want.grad, rtol=0, atol=0)
