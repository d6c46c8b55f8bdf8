"""Each row of docs/conventions.md: the peer's own code against the posenc call the table gives.

Rows covered elsewhere: Hugging Face rope types (tests/nn/test_rotary_hf.py), the Llama client
(tests/test_integrations_hf.py), xPos (tests/nn/test_rotary.py), BLOOM/MPT ALiBi
(tests/nn/test_bias.py), tensor2tensor (tests/test_tables.py, tests/test_spectrum.py).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from peers import import_peer

from posenc import spectrum, tables
from posenc.nn import ALiBiBias, RotaryEmbedding
from posenc.nn.bias import t5_bucket

F64 = torch.float64
EPS32 = 2.0**-24


def close_to_float32_peer(ours: torch.Tensor, theirs: torch.Tensor, max_position: int) -> None:
    """A float32 peer forms its angles in float32: allow its round-off, ~t·2^−24 per unit-scale entry."""
    assert (ours.to(F64) - theirs.to(F64)).abs().max() <= 8 * EPS32 * (max_position + 1) + 1e-6


def test_gpt_j_rotate_every_two_is_adjacent():
    gptj = import_peer("transformers.models.gptj.modeling_gptj", "GPT-J is the peer")
    torch.manual_seed(0)
    b, s, h, d, r = 2, 30, 3, 16, 8  # GPT-J's rotary_dim: the first r dims of each head rotate
    q = torch.randn(b, s, h, d)
    sincos = gptj.create_sinusoidal_positions(s, r)[None].expand(b, s, r)
    sin, cos = torch.split(sincos, r // 2, dim=-1)
    theirs = torch.cat([gptj.apply_rotary_pos_emb(q[..., :r], sin, cos), q[..., r:]], dim=-1)
    ours, _ = RotaryEmbedding(d, rotary_dim=r, layout="adjacent")(q.transpose(1, 2), q.transpose(1, 2))
    close_to_float32_peer(ours.transpose(1, 2), theirs, s)


def test_gpt_neox_partial_rotary_is_half_split():
    neox = import_peer("transformers.models.gpt_neox.modeling_gpt_neox", "GPT-NeoX is the peer")
    from transformers import GPTNeoXConfig

    config = GPTNeoXConfig(
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=10,
        rotary_pct=0.25,
        rotary_emb_base=10000,
    )
    torch.manual_seed(1)
    q = torch.randn(1, 4, 20, 16)
    cos, sin = neox.GPTNeoXRotaryEmbedding(config)(q, torch.arange(20)[None])
    theirs, _ = neox.apply_rotary_pos_emb(q, q, cos, sin)
    ours, _ = RotaryEmbedding(16, rotary_dim=0.25, layout="half_split")(q, q)
    close_to_float32_peer(ours, theirs, 20)


def test_roformer_is_adjacent_with_the_geometric_schedule():
    roformer = import_peer("transformers.models.roformer.modeling_roformer", "RoFormer is the peer")
    torch.manual_seed(2)
    s, d = 25, 16
    table = roformer.RoFormerSinusoidalPositionalEmbedding(s, d).create_weight()[None, None]
    q, k = torch.randn(1, 2, s, d), torch.randn(1, 2, s, d)
    q_theirs, k_theirs = roformer.RoFormerSelfAttention.apply_rotary_position_embeddings(table, q, k)
    q_ours, k_ours = RotaryEmbedding(d, layout="adjacent")(q, k)
    torch.testing.assert_close(q_ours, q_theirs, rtol=0, atol=2e-6)  # RoFormer's table is float64-made
    torch.testing.assert_close(k_ours, k_theirs, rtol=0, atol=2e-6)


@pytest.mark.parametrize("dim", [16, 15])
def test_marian_table_is_split_with_the_paper_schedule(dim):
    marian = import_peer("transformers.models.marian.modeling_marian", "Marian is the peer")
    theirs = marian.MarianSinusoidalPositionalEmbedding(40, dim).create_weight().double().numpy()
    np.testing.assert_allclose(tables.sinusoidal(40, dim, layout="split"), theirs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (8, 20)])
def test_t5_buckets_equal_transformers(bidirectional, num_buckets, max_distance):
    t5 = import_peer("transformers.models.t5.modeling_t5", "T5 is the peer")
    relative = torch.arange(-400, 401)
    theirs = t5.T5Attention._relative_position_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    ours = t5_bucket(
        relative, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    assert torch.equal(ours, theirs)


def test_fairseq_recipe_left_padded_batch_through_m2m100():
    """fairseq: split layout, t2t grid, positions from padding_idx + 1, padding rows zero."""
    m2m = import_peer("transformers.models.m2m_100.modeling_m2m_100", "fairseq's table via M2M100")
    padding_idx, dim = 1, 10
    ids = torch.tensor([[5, 6, 7, 8, 9], [padding_idx, padding_idx, 7, 8, 9]])
    theirs = m2m.M2M100SinusoidalPositionalEmbedding(16, dim, padding_idx)(ids).double().numpy()
    token = (ids != padding_idx).numpy()
    positions = (np.cumsum(token, axis=1) * token + padding_idx).reshape(-1)
    ours = tables.tensor2tensor(positions, dim).reshape(2, 5, dim) * token[..., None]
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-6)


def test_positional_encodings_1d_is_interleaved_and_rounds_odd_d_up():
    pe = import_peer("positional_encodings.torch_encodings", "positional-encodings is the peer")
    for dim in (16, 15):
        theirs = pe.PositionalEncoding1D(dim)(torch.zeros(1, 30, dim))[0].double().numpy()
        frequencies = spectrum.geometric(dim + dim % 2)  # odd d: the schedule of d + 1 (its channel count)
        ours = tables.sinusoidal(30, dim, frequencies=frequencies)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=4e-6)


def test_x_transformers_rotary_is_adjacent_and_takes_batched_positions():
    xt = import_peer("x_transformers.x_transformers", "x-transformers is the peer")
    torch.manual_seed(3)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
    q = torch.randn(2, 2, 6, 16)
    freqs, _ = xt.RotaryEmbedding(8)(positions)  # rotary over the first 8 of 16 dims
    theirs = xt.apply_rotary_pos_emb(q, freqs)
    ours, _ = RotaryEmbedding(16, rotary_dim=8, layout="adjacent")(q, q, q_positions=positions)
    close_to_float32_peer(ours, theirs, 6)


def test_x_transformers_alibi_takes_batched_positions():
    xt = import_peer("x_transformers.x_transformers", "x-transformers is the peer")
    positions = torch.tensor([[0, 1, 2, 3, 4], [0, 0, 1, 2, 3]])
    theirs = xt.AlibiPositionalBias(heads=6, total_heads=6).forward_custom_pos(positions, positions)
    ours = ALiBiBias(6).bias(5, 5, q_positions=positions, k_positions=positions)
    torch.testing.assert_close(ours, theirs.float(), rtol=1e-6, atol=1e-6)


def test_rotary_embedding_torch_plain_is_adjacent():
    ret = import_peer("rotary_embedding_torch", "rotary-embedding-torch is the peer")
    torch.manual_seed(4)
    q = torch.randn(2, 3, 40, 32)
    theirs = ret.RotaryEmbedding(dim=16).rotate_queries_or_keys(q)  # rotates the first 16 of 32 dims
    ours, _ = RotaryEmbedding(32, rotary_dim=16, layout="adjacent")(q, q)
    close_to_float32_peer(ours, theirs, 40)
