"""ALiBi, T5 and Shaw relative biases against values computed independently in the test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

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
    expected = [t5_reference_bucket(int(v), bidirectional=bidirectional, num_buckets=num_buckets,
                                    max_distance=max_distance) for v in d]
    assert got.tolist() == expected
    assert int(got.min()) >= 0 and int(got.max()) == num_buckets - 1


def test_t5_buckets_pinned_values():
    """Hand-checked values for T5's defaults (32 buckets, max_distance 128)."""
    def b(d: int, bidirectional: bool = True) -> int:
        return int(t5_bucket(torch.tensor(d), bidirectional=bidirectional))

    # bidirectional: keys before the query in buckets 0–15, after it in 16–31; exact below 8
    assert [b(0), b(-1), b(-7), b(1), b(7)] == [0, 1, 7, 17, 23]
    assert b(-8) == 8 and b(-127) == 15 and b(-128) == 15 and b(-10**6) == 15
    assert b(8) == 24 and b(10**6) == 31
    # causal: later keys all in bucket 0; exact below 16; log buckets 16–31 up to distance 128
    assert [b(5, False), b(0, False), b(-5, False), b(-15, False), b(-16, False), b(-10**6, False)] == [0, 0, 5, 15, 16, 31]


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
    index = shaw.index(5, 5)
    scores, values = shaw.key_scores(q, index), shaw.value_term(weights, index)
    for i in range(5):
        for j in range(5):
            a_k = shaw.keys[min(max(j - i, -2), 2) + 2]
            torch.testing.assert_close(scores[..., i, j], (q[..., i, :] * a_k).sum(-1))
    for i in range(5):
        expected = sum(weights[..., i, j, None] * shaw.values[min(max(j - i, -2), 2) + 2] for j in range(5))
        torch.testing.assert_close(values[..., i, :], expected)


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
