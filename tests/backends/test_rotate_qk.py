"""The q+k rotation's backends (:mod:`posenc.backends.rotate_qk`): which one :func:`posenc.backends.select`
picks, its reference against the module's table rotation and the float64 formula, and the CPU loop through
that seam against the reference (and its gradients through the operator ``posenc::rotate_qk``).

The Triton kernel itself is checked against the same module in tests/test_cuda.py (CUDA) and under the
Triton interpreter (tests/triton_interpreter.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from references import reference_rotary

from posenc.backends import Environment, rotate_qk, select
from posenc.nn import RotaryEmbedding

F64 = torch.float64
CUDA = Environment(
    device="cuda", dtype=torch.float32, compiling=False, exporting=False, native=False, triton=True
)
CPU = Environment(
    device="cpu", dtype=torch.float32, compiling=False, exporting=False, native=True, triton=False
)
INT64 = torch.int64


def call(**changes: object) -> rotate_qk.QK:
    q, k = torch.randn(2, 4, 3, 8), torch.randn(2, 2, 5, 8)
    fields = {"q": q, "k": k, "q_positions": None, "k_positions": None, "xpos": False, "static": True,
              "context": False}  # fmt: skip
    return rotate_qk.QK(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "changes", "expected"),
    [
        (CUDA, {}, "triton"),
        (CUDA, {"q_positions": torch.zeros(2, 3, dtype=torch.int32), "k_positions": torch.zeros(2, 5, dtype=torch.int32)}, "triton"),
        (CUDA, {"q_positions": torch.zeros(3), "k_positions": torch.zeros(5)}, "tables"),  # float positions
        (CUDA, {"xpos": True}, "tables"),
        (CUDA, {"static": False}, "tables"),  # dynamic/longrope: frequencies follow the length
        (CUDA, {"context": True}, "tables"),  # eagerly, a context's tables rotate with less host time
        (dataclasses.replace(CUDA, compiling=True), {"context": True}, "triton, context"),
        (dataclasses.replace(CUDA, compiling=True, exporting=True), {}, "tables"),
        (dataclasses.replace(CUDA, triton=False), {}, "tables"),
        (dataclasses.replace(CUDA, device="cpu", triton=False), {}, "tables"),
        (CPU, {}, "loop"),
        (CPU, {"q_positions": torch.zeros(2, 3, dtype=INT64), "k_positions": torch.zeros(1, 5, dtype=INT64)}, "loop"),
        (CPU, {"q_positions": torch.zeros(2, 3, dtype=torch.int32), "k_positions": torch.zeros(2, 5, dtype=torch.int32)}, "tables"),
        (CPU, {"q_positions": torch.zeros(3), "k_positions": torch.zeros(5)}, "tables"),  # float positions
        (CPU, {"k": torch.randn(2, 2, 17, 8)}, "tables"),  # beyond a decoding step: the tuned table rotation
        (CPU, {"q": torch.randn(2, 4, 3, 8).to(torch.float16)}, "tables"),
        (CPU, {"xpos": True}, "tables"),
        (CPU, {"static": False}, "tables"),
        (CPU, {"context": True}, "tables"),  # the context's tables are made already
        (dataclasses.replace(CPU, compiling=True), {}, "tables"),
        (dataclasses.replace(CPU, native=False), {}, "tables"),
    ],
)  # fmt: skip
def test_the_one_launch_serves_where_it_is_declared_to(env, changes, expected):
    assert select(rotate_qk.BACKENDS, call(**changes), env).name == expected


def test_on_the_cpu_a_decoding_step_of_the_module_is_one_call_of_the_loop(native):
    assert (launch := rotate_qk.one_launch(call())) is not None and launch.name == "loop"
    assert rotate_qk.table_dtype(launch, torch.bfloat16) == torch.bfloat16  # as the CPU table path reads
    assert rotate_qk.table_dtype(launch, torch.float32) == torch.float32


def cache(n: int, half: int, factor: float, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """A module's cache of ``n`` rows ``[n, r/2]`` in ``dtype`` (from float64 angles) and ``theta``."""
    theta = torch.cat([10000.0 ** (-torch.arange(half, dtype=F64) / half), torch.tensor([factor], dtype=F64)])
    angles = torch.arange(n, dtype=F64)[:, None] * theta[:half]
    return (angles.cos() * factor).to(dtype), (angles.sin() * factor).to(dtype), theta


NEAR = [2**52 - 3, 2**52 + 1, -(2**52), -(2**53) + 1, 2**53 - 1]  # far from the cache, still exact in float64


@st.composite
def qk_calls(draw):
    dtype = draw(st.sampled_from([torch.float32, F64, torch.bfloat16]))
    b, hq, hk = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(1, 3))
    sq, sk = draw(st.integers(1, 16)), draw(st.integers(1, 16))
    half = draw(st.sampled_from([1, 3, 16, 64]))
    d = 2 * half + draw(st.integers(0, 3))  # r < d: partial rotary
    n = draw(st.integers(1, 24))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))

    def tensor(heads: int, seq: int) -> torch.Tensor:
        if draw(st.booleans()):  # [b, s, h, d] in memory, as a fused projection leaves it
            return torch.randn(b, seq, heads, d, generator=gen).to(dtype).transpose(1, 2)
        return torch.randn(b, heads, seq, d, generator=gen).to(dtype)

    def positions(seq: int) -> torch.Tensor:
        rows = draw(st.sampled_from([1, b]))  # a row of 1 broadcasts to the batch
        values = st.one_of(st.integers(-5, n + 5), st.sampled_from(NEAR))
        return torch.tensor(draw(st.lists(values, min_size=rows * seq, max_size=rows * seq))).view(rows, seq)

    q, k = tensor(hq, sq), tensor(hk, sk)
    qp = kp = None
    if draw(st.booleans()):
        qp = positions(sq)
        kp = qp if sq == sk and qp.shape[0] == b and draw(st.booleans()) else positions(sk)
    offsets = (draw(st.integers(0, n + 5)), draw(st.integers(0, n + 5)))
    factor = draw(st.sampled_from([1.0, 1.25]))
    tables = cache(n, half, factor, dtype)  # bfloat16 tables beside bfloat16, as the module makes them
    return (
        q,
        k,
        qp,
        kp,
        *tables,
        *offsets,
        draw(st.sampled_from(["half_split", "adjacent"])),
        draw(st.booleans()),
    )


TOLERANCE = {
    torch.float32: 1e-6,
    F64: 1e-12,
    torch.bfloat16: 0.0,
}  # libm's and torch's cos may differ by an ulp


@pytest.mark.usefixtures("native")
@settings(max_examples=150, deadline=None)
@given(qk_calls())
def test_the_loop_equals_the_reference(args):
    q, k, qp, kp = args[:4]
    backend = select(rotate_qk.BACKENDS, rotate_qk.QK(q, k, qp, kp, False, True, False), Environment.of(q))
    assert backend.name == "loop"
    got, want = backend.apply(*args), rotate_qk.reference(*args)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g, w, rtol=0, atol=TOLERANCE[q.dtype])


def test_gradients_through_the_operator_on_the_cpu_are_the_inverse_rotation(native):
    cos, sin, theta = cache(6, 3, 1.25, F64)
    q = torch.randn(2, 3, 2, 8, dtype=F64, requires_grad=True)
    k = torch.randn(2, 2, 3, 8, dtype=F64, requires_grad=True)
    qp, kp = torch.tensor([[1, 9], [-2, 2**52 + 1]]), torch.tensor([[0, 5, 7]])  # in and beyond the cache

    def rotate(q, k):
        return rotate_qk._loop_backend(q, k, qp, kp, cos, sin, theta, 0, 0, "half_split", False)

    assert torch.autograd.gradcheck(rotate, (q, k))
    assert torch.autograd.gradcheck(
        lambda q, k: rotate_qk._loop_backend(q, k, None, None, cos, sin, theta, 4, 1, "adjacent", False),
        (q, k),
    )
    grad_q, grad_k = torch.autograd.grad(sum(t.sum() for t in rotate(q, k)), (q, k))
    inverse = rotate_qk.reference(torch.ones_like(q), torch.ones_like(k), qp, kp, cos, sin, theta, 0, 0,
                                  "half_split", True)  # fmt: skip
    torch.testing.assert_close(grad_q, inverse[0], rtol=0, atol=1e-15)
    torch.testing.assert_close(grad_k, inverse[1], rtol=0, atol=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, F64, torch.bfloat16])
def test_the_module_decodes_by_the_loop_as_by_tables(native, dtype, monkeypatch):
    # [b, 1] int64 positions in and beyond the cache, and an empty batch, equal the table path
    rope = RotaryEmbedding(64, max_len=32)
    q, k = torch.randn(3, 8, 1, 64).to(dtype), torch.randn(3, 2, 1, 64).to(dtype)
    positions = torch.tensor([[5], [31], [1000]])
    got = rope(q, k, q_positions=positions)
    monkeypatch.setattr(rotate_qk, "one_launch", lambda call: None)
    want = rope(q, k, q_positions=positions)
    torch.testing.assert_close(
        got, want, rtol=0, atol={torch.float32: 1e-6, F64: 1e-12, torch.bfloat16: 0.02}[dtype]
    )
    monkeypatch.undo()
    empty = rope(q[:0], k[:0], q_positions=positions[:0])
    assert [tuple(t.shape) for t in empty] == [(0, 8, 1, 64), (0, 2, 1, 64)]


def test_inplace_decoding_by_the_loop_is_refused_where_it_would_be_wrong(native):
    rope = RotaryEmbedding(16)
    qk = torch.randn(2, 4, 1, 16)
    positions = torch.tensor([[3], [4]])
    with pytest.raises(ValueError, match="overlap in memory"):
        rope(qk, qk[:, 1:3], q_positions=positions, inplace=True)
    with pytest.raises(ValueError, match="share memory"):
        rope(qk[:, :1].expand(2, 4, 1, 16), qk, q_positions=positions, inplace=True)
    q, k = qk.clone(), qk[:, :2].clone()
    want = rope(q, k, q_positions=positions)
    got = rope(q, k, q_positions=positions, inplace=True)
    assert got[0] is q and got[1] is k
    torch.testing.assert_close(got, want, rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["half_split", "adjacent"])
@pytest.mark.parametrize("inverse", [False, True])
def test_the_reference_gathers_the_cache_and_forms_far_angles_in_float64(layout, inverse):
    # positions inside the 16 cached rows, beyond them and negative: all equal the float64 formula
    rope = RotaryEmbedding(24, rotary_dim=20, layout=layout, max_len=16).to(F64)
    q, k = torch.randn(2, 5, 3, 24, dtype=F64), torch.randn(2, 3, 5, 24, dtype=F64)
    q_pos = torch.tensor([[0, 1, 15], [16, 40, -3]])
    k_pos = torch.tensor([[2, 3, 4, 5, 6], [100, 7, 8, 9, 10**6]])
    theta = torch.cat([rope.frequencies, torch.tensor([rope.attention_factor], dtype=F64)])
    angles = torch.arange(16, dtype=F64)[:, None] * theta[:-1]  # a cache of 16 rows: [16, r/2]
    cos, sin = angles.cos(), angles.sin()
    q_rot, k_rot = rotate_qk.reference(q, k, q_pos, k_pos, cos, sin, theta, 0, 0, layout, inverse)
    for got, x, p in ((q_rot, q, q_pos), (k_rot, k, k_pos)):
        for row in range(2):
            positions = -p[row] if inverse else p[row]  # Rᵀ at t is R at −t
            want = reference_rotary(x[row], positions, layout=layout, rotary_dim=20, base=10000.0)
            torch.testing.assert_close(got[row], want, rtol=0, atol=1e-9)
    q_off, k_off = rotate_qk.reference(q, k, None, None, cos, sin, theta, 2, 12, layout, False)
    want = reference_rotary(k, torch.arange(12, 17), layout=layout, rotary_dim=20, base=10000.0)
    torch.testing.assert_close(k_off, want, rtol=0, atol=1e-9)
    torch.testing.assert_close(q_off, rope(q, q, offset=2)[0], rtol=0, atol=1e-12)
