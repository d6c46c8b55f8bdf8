"""Dual chunk attention's remapped positions against two independent readings, and the rotations they give.

``vllm_positions`` transcribes how vLLM's ``DualChunkRotaryEmbedding`` (``vllm/model_executor/layers/
rotary_embedding/dual_chunk_rope.py``, read, not run: vLLM is not installed and builds its caches on the
current CUDA device) indexes its caches: position arrays ``q_t = 0 … L−1``, ``qc_t = clamp(q_t + L, chunk)``,
``k_t = (0 … max_position − 1) mod L``, ``qc_no_clamp_t = q_t + L``, ``q_inter_t = q_t + chunk``, read at
``t`` (keys), ``t mod L`` (four query sets) and ``L − 1`` (the inter-chunk query). ``vllm_rotation`` is its
rotation: ``x·cat(cos, cos) + rotate_neox(x)·cat(sin, sin)`` over ``rotary_dim``, the rest passed through.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc.nn import RotaryEmbedding, dual_chunk_positions

FIELDS = ("key", "intra", "successive", "inter", "successive_critical", "inter_critical")


def vllm_positions(t: np.ndarray, chunk: int, local: int, max_position: int) -> dict[str, np.ndarray]:
    length = chunk - local
    q_t = np.arange(length)
    qc_t = np.minimum(q_t + length, chunk)
    k_t = np.arange(max_position) % length
    return {
        "key": k_t[t],
        "intra": q_t[t % length],
        "successive": qc_t[t % length],
        "inter": np.repeat(qc_t[length - 1], t.size),
        "successive_critical": (q_t + length)[t % length],
        "inter_critical": (q_t + chunk)[t % length],
    }


def formula(t: int, chunk: int, local: int) -> dict[str, int]:
    """The closed forms of An et al. 2024's dual chunk attention, per token, in Python ints."""
    length = chunk - local
    r = t - (t // length) * length
    return {
        "key": r,
        "intra": r,
        "successive": min(r + length, chunk),
        "inter": min(2 * length - 1, chunk),
        "successive_critical": r + length,
        "inter_critical": r + chunk,
    }


@given(
    chunk=st.integers(1, 5000),
    local_share=st.floats(0.0, 0.99),
    positions=st.lists(st.integers(0, 10**6), min_size=1, max_size=20),
)
def test_positions_are_the_formula_and_vllms_cache_indexing(chunk, local_share, positions):
    local = min(int(local_share * chunk), chunk - 1)
    t = np.array(positions)
    got = dual_chunk_positions(torch.tensor(positions), chunk_size=chunk, local_size=local)
    vllm = vllm_positions(t, chunk, local, max_position=int(t.max()) + 1)
    for field in FIELDS:
        value = getattr(got, field)
        assert value.dtype == torch.int64 and value.shape == (len(positions),)
        assert value.tolist() == [formula(p, chunk, local)[field] for p in positions], field
        np.testing.assert_array_equal(value.numpy(), vllm[field], err_msg=field)


def vllm_rotation(x: np.ndarray, t: np.ndarray, base: float, rotary_dim: int) -> np.ndarray:
    inv_freq = 1.0 / base ** (np.arange(0, rotary_dim, 2) / rotary_dim)
    angles = np.outer(t.astype(np.float64), inv_freq)
    cos, sin = np.concatenate([np.cos(angles)] * 2, -1), np.concatenate([np.sin(angles)] * 2, -1)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    half = rotary_dim // 2
    neox = np.concatenate([-rot[..., half:], rot[..., :half]], -1)
    return np.concatenate([rot * cos + neox * sin, rest], -1)


@pytest.mark.parametrize(("chunk", "local", "rotary_dim"), [(100, 10, 16), (32, 0, 8), (7, 6, 16)])
def test_rotary_at_the_remapped_positions_is_vllms_rotation(chunk, local, rotary_dim):
    torch.manual_seed(0)
    head_dim, base, n = 16, 1e6, 400
    t = torch.arange(n) * 37 % 3000
    sets = dual_chunk_positions(t, chunk_size=chunk, local_size=local)
    rope = RotaryEmbedding(head_dim, base=base, rotary_dim=rotary_dim)
    q = torch.randn(1, 2, n, head_dim, dtype=torch.float64)
    k = torch.randn(1, 2, n, head_dim, dtype=torch.float64)
    vllm = vllm_positions(t.numpy(), chunk, local, max_position=3000)
    for field in FIELDS[1:]:
        q_rot, k_rot = rope(q, k, q_positions=getattr(sets, field), k_positions=sets.key)
        want_q = vllm_rotation(q.numpy(), vllm[field], base, rotary_dim)
        np.testing.assert_allclose(q_rot.numpy(), want_q, rtol=0, atol=1e-12, err_msg=field)
    want_k = vllm_rotation(k.numpy(), vllm["key"], base, rotary_dim)
    np.testing.assert_allclose(k_rot.numpy(), want_k, rtol=0, atol=1e-12)


def test_an_int_is_a_range_and_batched_shapes_are_kept():
    sets = dual_chunk_positions(5, chunk_size=4, local_size=1)
    assert sets.key.tolist() == [0, 1, 2, 0, 1] and sets.successive.tolist() == [3, 4, 4, 3, 4]
    batched = dual_chunk_positions(
        torch.arange(6, dtype=torch.int32).reshape(2, 3), chunk_size=4, local_size=1
    )
    assert batched.inter.shape == (2, 3) and batched.inter.unique().tolist() == [4]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"chunk_size": 10, "local_size": 10}, ValueError, "local_size must be < chunk_size=10.*got 10"),
        ({"chunk_size": 0, "local_size": 0}, ValueError, "chunk_size must be an int >= 1, got 0"),
        ({"chunk_size": 10, "local_size": -1}, ValueError, "local_size must be an int >= 0, got -1"),
        ({"chunk_size": 10.0, "local_size": 1}, TypeError, r"chunk_size must be an int, got 10.0 \(float\)"),
        (
            {"positions": torch.arange(3.0)},
            TypeError,
            "positions must be an integer tensor or an int count, got torch.float32",
        ),
        ({"positions": [0, 1]}, TypeError, "positions must be an integer tensor or an int count, got list"),
        ({"positions": -1}, ValueError, "positions must be an int >= 0, got -1"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, error, message):
    arguments = {"positions": torch.arange(4), "chunk_size": 10, "local_size": 2, **kwargs}
    with pytest.raises(error, match=message):
        dual_chunk_positions(**arguments)
