"""RotaryEmbedding on packed sequences (``cu_seqlens``) and in place (``inplace=True``; also apply_rotary).

Packed: rotating the sequences packed one after another equals rotating each alone (float64), and both
equal the independent formula of ``references.reference_rotary`` at each token's index within its sequence.
In place: the same values as out of place, in the inputs' own memory, refused where it would be wrong."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from references import reference_rotary

from posenc.nn import RotaryEmbedding, apply_rotary

F64 = torch.float64
LAYOUTS = ["adjacent", "half_split"]


def cumulative(lengths: list[int], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor([0, *torch.tensor(lengths, dtype=torch.int64).cumsum(0).tolist()], dtype=dtype)


@given(
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    layout=st.sampled_from(LAYOUTS),
    offset=st.sampled_from([0, 5]),
    dtype=st.sampled_from([torch.int32, torch.int64]),
    leading=st.sampled_from([(), (1,), (2, 1)]),
)
def test_packed_sequences_rotate_as_each_sequence_alone(lengths, layout, offset, dtype, leading):
    torch.manual_seed(0)
    total = sum(lengths)
    rope = RotaryEmbedding(12, rotary_dim=8, layout=layout, max_len=4).to(F64)  # grows past max_len
    q, k = torch.randn(*leading, 3, total, 12, dtype=F64), torch.randn(*leading, 3, total, 12, dtype=F64)
    q_rot, k_rot = rope(q, k, cu_seqlens=cumulative(lengths, dtype), offset=offset)
    starts = cumulative(lengths).tolist()
    for start, end in zip(starts[:-1], starts[1:]):
        alone_q, alone_k = rope(q[..., start:end, :], k[..., start:end, :], offset=offset)
        torch.testing.assert_close(q_rot[..., start:end, :], alone_q, rtol=0, atol=0)
        torch.testing.assert_close(k_rot[..., start:end, :], alone_k, rtol=0, atol=0)
    within = torch.cat([torch.arange(n) for n in lengths]) + offset
    want = reference_rotary(q, within, layout=layout, rotary_dim=8, base=10000.0)
    torch.testing.assert_close(q_rot, want, rtol=1e-12, atol=1e-12)


def test_packed_positions_are_explicit_positions_also_with_xpos():
    """Packed sequences rotate exactly as the same positions given as ``q_positions`` (xPos included)."""
    torch.manual_seed(0)
    rope = RotaryEmbedding(8, xpos_scale_base=64.0).to(F64)
    q = torch.randn(1, 2, 7, 8, dtype=F64)
    positions = torch.tensor([0, 1, 2, 0, 1, 2, 3])
    got = rope(q, q, cu_seqlens=torch.tensor([0, 3, 7]))
    for a, b in zip(got, rope(q, q, q_positions=positions)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("cu_seqlens", "error", "message"),
    [
        ([0, 3, 7], TypeError, r"^cu_seqlens must be a 1-D int32/int64 tensor.*got list"),
        (torch.tensor([0.0, 3.0, 7.0]), TypeError, r"^cu_seqlens must .*got dtype torch.float32"),
        (torch.tensor([[0, 3, 7]]), ValueError, r"^cu_seqlens must .*got shape \[1, 3\]"),
        (torch.tensor([], dtype=torch.int64), ValueError, r"^cu_seqlens must .*got shape \[0\]"),
        (torch.tensor([1, 3, 7]), ValueError, r"0 first, nondecreasing, 7 .* last, got \[1, 3, 7\]$"),
        (torch.tensor([0, 5, 3, 7]), ValueError, r"nondecreasing.*got \[0, 5, 3, 7\]$"),
        (torch.tensor([0, 3, 6], dtype=torch.int32), ValueError, r"7 \(the packed length.*got \[0, 3, 6\]$"),
        (torch.tensor([0, 3, 8]), ValueError, r"got \[0, 3, 8\]$"),
    ],
)
def test_bad_cu_seqlens_are_refused_with_the_value(cu_seqlens, error, message):
    q = torch.randn(1, 2, 7, 8)
    with pytest.raises(error, match=message):
        RotaryEmbedding(8)(q, q, cu_seqlens=cu_seqlens)


def test_cu_seqlens_with_positions_or_unequal_lengths_is_refused():
    q, cu = torch.randn(1, 2, 7, 8), torch.tensor([0, 3, 7])
    with pytest.raises(ValueError, match="cu_seqlens or q_positions/k_positions, not both"):
        RotaryEmbedding(8)(q, q, cu_seqlens=cu, q_positions=torch.arange(7))
    with pytest.raises(ValueError, match=r"same packed tokens, got s_q=3 != s_k=7"):
        RotaryEmbedding(8)(q[:, :, :3], q, cu_seqlens=cu)


def hf_view(b: int, s: int, h: int, d: int) -> torch.Tensor:
    """``[b, h, s, d]`` as a view of ``[b, s, h, d]`` (the Hugging Face layout after the projection)."""
    return torch.randn(b, s, h, d, dtype=F64).transpose(1, 2)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [F64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("form", ["contiguous", "hf view", "qkv split", "packed"])
def test_inplace_equals_out_of_place_in_the_inputs_memory(layout, dtype, form):
    torch.manual_seed(0)
    rope = RotaryEmbedding(16, rotary_dim=12, layout=layout)
    options = {}
    if form == "contiguous":
        q, k = torch.randn(2, 3, 9, 16, dtype=F64).to(dtype), torch.randn(2, 3, 9, 16, dtype=F64).to(dtype)
    elif form == "hf view":
        q, k = hf_view(2, 9, 3, 16).to(dtype), hf_view(2, 9, 3, 16).to(dtype)
    elif form == "qkv split":  # [b, s, 3, h, d] → q, k [b, h, s, d]: neither dense nor contiguous
        qkv = torch.randn(2, 9, 3, 3, 16, dtype=F64).to(dtype)
        q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
    else:
        q, k = torch.randn(1, 3, 9, 16, dtype=F64).to(dtype), torch.randn(1, 3, 9, 16, dtype=F64).to(dtype)
        options = {"cu_seqlens": torch.tensor([0, 4, 4, 9], dtype=torch.int32)}
    want_q, want_k = rope(q, k, **options)
    pointers = (q.data_ptr(), k.data_ptr(), q.stride(), k.stride())
    got_q, got_k = rope(q, k, inplace=True, **options)
    assert got_q is q and got_k is k
    assert (q.data_ptr(), k.data_ptr(), q.stride(), k.stride()) == pointers
    torch.testing.assert_close(q, want_q, rtol=0, atol=0)
    torch.testing.assert_close(k, want_k, rtol=0, atol=0)
    cos, sin = rope.cos_sin(9, dtype=dtype)
    x = q.clone()
    want = apply_rotary(x, cos, sin, layout=layout)
    assert apply_rotary(x, cos, sin, layout=layout, inplace=True) is x
    torch.testing.assert_close(x, want, rtol=0, atol=0)


def test_inplace_works_without_grad_and_is_refused_where_autograd_needs_the_inputs():
    rope = RotaryEmbedding(8)
    q = torch.randn(1, 2, 5, 8, requires_grad=True)
    k = q.detach().clone().requires_grad_()
    with pytest.raises(ValueError, match="inplace=True cannot rotate q: it requires grad"):
        rope(q * 1, k.detach(), inplace=True)
    with pytest.raises(ValueError, match="inplace=True cannot rotate k: it requires grad"):
        rope(q.detach().clone(), k * 1, inplace=True)
    cos, sin = rope.cos_sin(5, dtype=torch.float32)
    with pytest.raises(ValueError, match="inplace=True cannot rotate x: it requires grad"):
        apply_rotary(q * 1, cos, sin, layout="half_split", inplace=True)
    with torch.no_grad():
        x = q * 1
        want = rope(x, x)[0]
        assert rope(x, x.clone(), inplace=True)[0] is x
    torch.testing.assert_close(x, want, rtol=0, atol=0)


def test_inplace_is_refused_on_shared_memory():
    rope = RotaryEmbedding(8)
    expanded = torch.randn(1, 1, 5, 8).expand(2, 3, 5, 8)  # one element at six indices
    with pytest.raises(
        ValueError, match=r"cannot rotate q of shape \[2, 3, 5, 8\] and strides \[0, 0, 8, 1\]"
    ):
        rope(expanded, expanded.clone(), inplace=True)
    q = torch.randn(1, 2, 5, 8)
    with pytest.raises(ValueError, match="q and k that overlap in memory"):
        rope(q, q, q_positions=torch.arange(5), k_positions=torch.arange(5) + 3, inplace=True)
    before = q.clone()
    with pytest.raises(ValueError, match="cannot rotate x"):
        cos, sin = rope.cos_sin(5, dtype=torch.float32)
        apply_rotary(expanded, cos, sin, layout="half_split", inplace=True)
    torch.testing.assert_close(q, before, rtol=0, atol=0)  # nothing written by a refused call


def test_inplace_is_refused_where_q_and_k_overlap_and_served_where_they_interleave():
    # overlapping views that start at different addresses: writing one rotation back would overwrite the
    # other's input; views of one fused qkv buffer share a storage but no element, and are served
    rope = RotaryEmbedding(6)
    buf = torch.randn(1, 1, 2, 9)
    before = buf.clone()
    with pytest.raises(ValueError, match="q and k that overlap in memory"):
        rope(buf[..., 0:6], buf[..., 3:9], inplace=True)
    torch.testing.assert_close(buf, before, rtol=0, atol=0)  # nothing written by a refused call
    qkv = torch.randn(2, 5, 3, 4, 6)  # [b, s, q/k/v, h, d]
    q, k = (qkv[:, :, i].transpose(1, 2) for i in (0, 1))  # [b, h, s, d] views, interleaved in memory
    want = rope(q, k)
    got = rope(q, k, inplace=True)
    assert got[0] is q and got[1] is k
    torch.testing.assert_close(got, want, rtol=0, atol=0)
