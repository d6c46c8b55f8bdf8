"""The q+k rotation's backends (:mod:`posenc.backends.rotate_qk`): which one :func:`posenc.backends.select`
picks, and its reference against the module's table rotation and the float64 formula.

The Triton kernel itself is checked against the same module in tests/test_cuda.py (CUDA) and under the
Triton interpreter (tests/triton_interpreter.py)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from references import reference_rotary

from posenc.backends import Environment, rotate_qk, select
from posenc.nn import RotaryEmbedding

F64 = torch.float64
CUDA = Environment(
    device="cuda", dtype=torch.float32, compiling=False, exporting=False, native=False, triton=True
)


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
    ],
)  # fmt: skip
def test_the_one_launch_serves_where_it_is_declared_to(env, changes, expected):
    assert select(rotate_qk.BACKENDS, call(**changes), env).name == expected


def test_on_the_cpu_the_module_rotates_by_tables():
    assert not rotate_qk.one_launch(call())


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
