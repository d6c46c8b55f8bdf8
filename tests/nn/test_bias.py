"""ALiBi, T5 and Shaw relative biases against values computed independently in the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from peers import import_peer

from posenc.nn import ALiBiBias, ShawRelativeBias, T5RelativeBias, alibi_slopes
from posenc.nn.bias import t5_bucket


def press_slopes(n: int) -> list[float]:
    """Press et al.'s rule: start = 2^(−8/p), slopes start^1 … start^p for p = n a power of two;
    otherwise the p = 2^⌊log2 n⌋ slopes, then every other slope of 2p heads, the first n − p of them."""

    def geometric(p: int) -> list[float]:
        start = 2.0 ** (-8.0 / p)
        return [start ** (h + 1) for h in range(p)]

    p = 2 ** int(math.floor(math.log2(n)))
    if p == n:
        return geometric(n)
    return geometric(p) + press_slopes(2 * p)[0::2][: n - p]


def test_alibi_slopes_for_eight_heads_are_powers_of_one_half():
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    assert alibi_slopes(8).dtype == torch.float64


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 16, 20, 24, 40])
def test_alibi_slopes_follow_press_et_al_for_any_head_count(n):
    np.testing.assert_allclose(alibi_slopes(n).numpy(), press_slopes(n), rtol=1e-13, atol=0)


def test_alibi_bias_is_minus_slope_times_distance():
    alibi = ALiBiBias(3)
    got = alibi.bias(5, 7, dtype=torch.float64)  # queries at 2…6 (end-aligned), keys at 0…6
    assert got.shape == (3, 5, 7) and got.dtype == torch.float64
    m = press_slopes(3)
    for h in range(3):
        for i in range(5):
            for j in range(7):
                assert float(got[h, i, j]) == pytest.approx(-m[h] * abs((i + 2) - j), rel=1e-14)
    torch.testing.assert_close(alibi.bias(1, 7, dtype=torch.float64)[:, 0], got[:, -1])  # decoding step
    pos = torch.tensor([0, 10, 30])
    torch.testing.assert_close(
        alibi.bias(3, 3, q_positions=pos, dtype=torch.float64)[0],
        -m[0] * (pos[:, None] - pos[None, :]).abs().double(),
    )
    assert alibi.state_dict() == {}


def t5_reference_bucket(d: int, *, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """Scalar T5 bucketing of relative position d = j − i (float32 logarithm as Mesh TF / Hugging Face)."""
    bucket, n = 0, num_buckets
    if bidirectional:
        n //= 2
        if d > 0:
            bucket = n
        d = abs(d)
    else:
        d = max(-d, 0)
    exact = n // 2
    if d < exact:
        return bucket + d
    ratio = np.log(np.float32(d) / np.float32(exact)) / np.float32(math.log(max_distance / exact))
    return bucket + min(exact + int(np.float32(ratio) * np.float32(n - exact)), n - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20), (64, 1000)])
def test_t5_buckets_equal_reference_on_a_grid(bidirectional, num_buckets, max_distance):
    d = torch.arange(-1500, 1501)
    got = t5_bucket(d, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    expected = [
        t5_reference_bucket(
            int(v), bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
        )
        for v in d
    ]
    assert got.tolist() == expected
    assert int(got.min()) >= 0 and int(got.max()) == num_buckets - 1


def test_t5_buckets_pinned_values():
    """Hand-checked values for T5's defaults (32 buckets, max_distance 128)."""

    def b(d: int, bidirectional: bool = True) -> int:
        return int(t5_bucket(torch.tensor(d), bidirectional=bidirectional))

    # bidirectional: keys before the query in buckets 0–15, after it in 16–31; exact below 8
    assert [b(0), b(-1), b(-7), b(1), b(7)] == [0, 1, 7, 17, 23]
    assert b(-8) == 8 and b(-127) == 15 and b(-128) == 15 and b(-(10**6)) == 15
    assert b(8) == 24 and b(10**6) == 31
    # causal: later keys all in bucket 0; exact below 16; log buckets 16–31 up to distance 128
    assert [b(5, False), b(0, False), b(-5, False), b(-15, False), b(-16, False), b(-(10**6), False)] == [
        0,
        0,
        5,
        15,
        16,
        31,
    ]


def test_t5_bias_looks_up_learned_scalars():
    torch.manual_seed(0)
    t5 = T5RelativeBias(4, num_buckets=8, max_distance=16, bidirectional=False)
    weight = t5.relative_attention_bias.weight
    assert weight.shape == (8, 4) and list(dict(t5.named_parameters())) == ["relative_attention_bias.weight"]
    got = t5.bias(6, 6)
    for i in range(6):
        for j in range(6):
            bucket = t5_reference_bucket(j - i, bidirectional=False, num_buckets=8, max_distance=16)
            torch.testing.assert_close(got[:, i, j], weight[bucket])
    got.sum().backward()
    assert weight.grad is not None and weight.grad.abs().sum() > 0


def test_shaw_clips_relative_distance():
    shaw = ShawRelativeBias(8, max_distance=3)
    index = shaw.index(4, 9)  # queries at 5…8, keys at 0…8
    for i in range(4):
        for j in range(9):
            assert int(index[i, j]) == min(max(j - (i + 5), -3), 3) + 3
    assert shaw.keys.shape == (7, 8) and shaw.values is None


def test_shaw_key_and_value_terms_equal_explicit_sums():
    torch.manual_seed(1)
    shaw = ShawRelativeBias(4, max_distance=2, on_values=True).double()
    q = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    weights = torch.softmax(torch.randn(2, 3, 5, 5, dtype=torch.float64), dim=-1)
    v = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    base = torch.randn(2, 3, 5, 5, dtype=torch.float64)
    index = shaw.index(5, 5)
    scores, out = shaw.key_scores(q, index), shaw.attend(weights, v, index)
    added = shaw.add_key_scores_(base.clone(), q, index)
    for i in range(5):
        for j in range(5):
            a_k = shaw.keys[min(max(j - i, -2), 2) + 2]
            torch.testing.assert_close(scores[..., i, j], (q[..., i, :] * a_k).sum(-1))
            torch.testing.assert_close(added[..., i, j], base[..., i, j] + (q[..., i, :] * a_k).sum(-1))
    for i in range(5):
        expected = sum(
            weights[..., i, j, None] * (v[..., j, :] + shaw.values[min(max(j - i, -2), 2) + 2])
            for j in range(5)
        )
        torch.testing.assert_close(out[..., i, :], expected)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: ALiBiBias(0), "n_heads"),
        (lambda: T5RelativeBias(4, num_buckets=2), "num_buckets"),
        (lambda: T5RelativeBias(4, num_buckets=32, max_distance=8), "max_distance"),
        (lambda: ShawRelativeBias(8, max_distance=0), "max_distance"),
        (lambda: ALiBiBias(2).bias(3, 3, q_positions=torch.arange(4)), "q_positions"),
        (lambda: ALiBiBias(2).bias(4, 3), "s_q"),
    ],
)
def test_bad_input_names_the_parameter(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_relative_buckets_refuse_fractional_positions():
    with pytest.raises(TypeError, match="integer positions"):
        T5RelativeBias(2).bias(3, 3, q_positions=torch.tensor([0.0, 0.5, 1.0]))
    with pytest.raises(TypeError, match="integer positions"):
        ShawRelativeBias(4).index(3, 3, q_positions=torch.tensor([0.0, 0.5, 1.0]))


def _left_padded_positions() -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded batch of 3 rows of length 6 (True = token) and positions counting tokens from 0."""
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1]], dtype=torch.bool)
    return mask, ((mask.long().cumsum(-1) - 1) * mask)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ALiBiBias(6),
        lambda: ALiBiBias(5, alibi_bias_max=6.0),
        lambda: T5RelativeBias(3, num_buckets=8, max_distance=4),
    ],
    ids=["alibi", "alibi-mpt", "t5"],
)
def test_batched_positions_equal_a_loop_over_rows(make):
    torch.manual_seed(0)
    bias = make()
    _, positions = _left_padded_positions()
    batched = bias.bias(6, 6, q_positions=positions, k_positions=positions, dtype=torch.float64)
    assert batched.shape == (3, bias.n_heads, 6, 6)
    for row in range(3):
        alone = bias.bias(6, 6, q_positions=positions[row], k_positions=positions[row], dtype=torch.float64)
        torch.testing.assert_close(batched[row], alone, rtol=0, atol=0)
    assert not torch.equal(batched[0], batched[2])  # the rows really differ
    # cross-attention shapes and a single row broadcast over the batch
    keys = torch.arange(4)
    assert bias.bias(6, 4, q_positions=positions, k_positions=keys).shape == (3, bias.n_heads, 6, 4)


def test_shaw_batched_index_and_terms_equal_a_loop_over_rows():
    torch.manual_seed(1)
    shaw = ShawRelativeBias(4, max_distance=2, on_values=True)
    _, positions = _left_padded_positions()
    index = shaw.index(6, 6, q_positions=positions, k_positions=positions)
    assert index.shape == (3, 6, 6)
    q = torch.randn(3, 2, 6, 4, dtype=torch.float64)
    weights = torch.softmax(torch.randn(3, 2, 6, 6, dtype=torch.float64), -1)
    v = torch.randn(3, 2, 6, 4, dtype=torch.float64)
    scores, out = shaw.key_scores(q, index), shaw.attend(weights, v, index)
    for row in range(3):
        alone = shaw.index(6, 6, q_positions=positions[row])
        torch.testing.assert_close(index[row], alone, rtol=0, atol=0)
        torch.testing.assert_close(scores[row], shaw.key_scores(q[row : row + 1], alone)[0], rtol=0, atol=0)
        torch.testing.assert_close(
            out[row], shaw.attend(weights[row : row + 1], v[row : row + 1], alone)[0], rtol=0, atol=0
        )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 2.0**53])
@pytest.mark.parametrize("make", [lambda: ALiBiBias(2), lambda: T5RelativeBias(2)], ids=["alibi", "t5"])
def test_bias_refuses_positions_it_cannot_represent(make, bad):
    with pytest.raises(ValueError, match=r"q_positions must be (finite|< 2\^53)"):
        make().bias(3, 3, q_positions=torch.tensor([0.0, bad, 2.0], dtype=torch.float64))
    with pytest.raises(TypeError, match="(q|k)_positions must be an integer dtype"):
        make().bias(3, 3, k_positions=torch.arange(3).half())


def test_shaw_refuses_non_finite_positions():
    with pytest.raises(ValueError, match="q_positions must be finite"):
        ShawRelativeBias(4).index(2, 2, q_positions=torch.tensor([0.0, float("nan")]))


transformers = import_peer("transformers", "BLOOM/MPT ALiBi are the peers compared against")


def _row_constant(difference: torch.Tensor, causal: torch.Tensor) -> None:
    """Softmax cannot tell ``difference`` from zero: constant along each row over the causal keys (float32 peers)."""
    for i in range(difference.shape[-2]):
        row = difference[..., i, : i + 1][..., causal[i, : i + 1]]
        torch.testing.assert_close(row, row[..., :1].expand_as(row), rtol=0, atol=1e-6)  # peers use float32


@pytest.mark.parametrize("n_heads", [4, 6, 12])
def test_alibi_matches_bloom_on_a_left_padded_batch(n_heads):
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    mask, positions = _left_padded_positions()
    bloom = build_alibi_tensor(mask.long(), n_heads, torch.float64).view(3, n_heads, 1, 6)
    ours = ALiBiBias(n_heads).bias(6, 6, q_positions=positions, k_positions=positions, dtype=torch.float64)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    for row in range(3):
        keep = mask[row]
        diff = (bloom[row] - ours[row])[:, keep][:, :, keep]  # BLOOM adds m·j; the softmax removes m·i
        _row_constant(diff, causal[: int(keep.sum()), : int(keep.sum())])


@pytest.mark.parametrize(("n_heads", "bias_max"), [(8, 8.0), (6, 8.0), (12, 16.0), (5, 4.0)])
def test_alibi_matches_mpt_with_alibi_bias_max(n_heads, bias_max):
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    mpt = build_mpt_alibi_tensor(n_heads, 7, alibi_bias_max=bias_max).to(
        torch.float64
    )  # [h, 1, s]: m·(j − s + 1)
    ours = ALiBiBias(n_heads, alibi_bias_max=bias_max).bias(7, 7, dtype=torch.float64)
    torch.testing.assert_close(ours[:, -1, :], mpt[:, 0, :], rtol=1e-7, atol=0)  # the last query: equal
    _row_constant(mpt.expand(n_heads, 7, 7) - ours, torch.ones(7, 7, dtype=torch.bool).tril())


def test_default_positions_past_2_53_are_refused():
    with pytest.raises(ValueError, match=r"offset \+ sequence length must be <= 2\^53"):
        ALiBiBias(2).bias(3, 3, offset=2**53 - 2)
