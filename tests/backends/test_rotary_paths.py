"""Rotary's fast paths against each other and the float64 formula: blocked and unblocked, with and
without the compiled loop, eager and compiled, and the cache of the loop's derived tables. Backend tests:
they switch ``posenc._native.kernels`` off, shrink ``posenc.nn.rotary._CHUNK_BYTES`` and read the private
``posenc.nn.rotary._pair_table``."""

from __future__ import annotations

import pytest
import torch
from references import reference_rotary

from posenc import _native
from posenc.nn import RotaryEmbedding, apply_rotary, rotary

F64 = torch.float64


@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_paths_agree_with_the_float64_formula(layout, dtype):
    # blocks along batch·heads and along the sequence (a tiny block size forces both), partial rotary,
    # a non-contiguous input, and the complex path (adjacent rotation tables) against the real formula
    x64 = torch.randn(2, 3, 37, 20, dtype=F64)
    rope = RotaryEmbedding(20, rotary_dim=16, layout=layout)
    cos, sin = rope.cos_sin(37, dtype=F64)
    ref = reference_rotary(x64, torch.arange(37), layout=layout, rotary_dim=16, base=10000.0)
    x = x64.to(dtype)
    c, s = rope.cos_sin(37, dtype=dtype)
    tol = {"rtol": 0, "atol": 1e-5 if dtype == torch.float32 else 3e-2}
    for block in (1 << 20, 256):
        old, rotary._CHUNK_BYTES = rotary._CHUNK_BYTES, block
        try:
            torch.testing.assert_close(apply_rotary(x, c, s, layout=layout).to(F64), ref, **tol)
            xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # same values, strides not mergeable
            torch.testing.assert_close(apply_rotary(xt, c, s, layout=layout).to(F64), ref, **tol)
            back = apply_rotary(apply_rotary(x64, cos, sin, layout=layout), cos, -sin, layout=layout)
            torch.testing.assert_close(back, x64, rtol=0, atol=1e-12)
        finally:
            rotary._CHUNK_BYTES = old


@pytest.mark.parametrize("native", [True, False], ids=["loop", "no-loop"])
@pytest.mark.parametrize("layout", ["adjacent", "half_split"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_forward_and_backward_match_eager(layout, dtype, native, monkeypatch):
    # both compiled paths: the opaque operator posenc::rotate (the compiled loop; adjacent always) and
    # the fused real expression (half_split without the loop); partial rotary too
    if not native:
        monkeypatch.setattr(_native, "kernels", None)
    elif _native.kernels is None:
        pytest.skip("posenc's compiled loops are not built")
    torch._dynamo.reset()  # every case traces afresh: no cached graph, no recompile limit
    cos, sin = RotaryEmbedding(20, rotary_dim=16, layout=layout).cos_sin(9, dtype=dtype)
    x = torch.randn(2, 3, 9, 20).to(dtype)
    grad = torch.randn(2, 3, 9, 20).to(dtype)

    def rotate(t):
        return apply_rotary(t, cos, sin, layout=layout)

    compiled = torch.compile(rotate, backend="aot_eager", fullgraph=True)
    results = []
    for fn in (rotate, compiled):
        xg = x.clone().requires_grad_()
        out = fn(xg)
        out.backward(grad)
        results.append((out.detach(), xg.grad))
    (out_eager, grad_eager), (out_compiled, grad_compiled) = results
    if native or layout == "adjacent":  # the operator runs the eager kernel: the same bits
        tol = {"rtol": 0, "atol": 0}
    elif dtype == torch.float32:
        tol = {"rtol": 0, "atol": 1e-6}
    else:  # bfloat16: the fused expression rounds once, eager after each operation (~one bf16 ulp of |x|)
        tol = {"rtol": 2**-7, "atol": 2**-7}
    torch.testing.assert_close(out_compiled, out_eager, **tol)
    torch.testing.assert_close(grad_compiled, grad_eager, **tol)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), out_eager, **tol)


def test_fresh_slices_of_one_table_share_derived_tables_and_other_views_do_not():
    # a module hands out a new slice of its cached tables at every call (a compiled backward, a detached
    # alias): the derived tables of the last call serve it; a slice elsewhere in the same base, or after the base changed, gets its own
    embedding = RotaryEmbedding(8, layout="half_split", max_len=32)
    (c1, s1), (c2, s2) = embedding.cos_sin(16, dtype=F64), embedding.cos_sin(16, dtype=F64)
    assert c1 is not c2
    first = rotary._pair_table(c1, s1, "half_split", False, F64, False)
    assert rotary._pair_table(c2, s2, "half_split", False, F64, False) is first
    assert (
        rotary._pair_table(c2.detach(), s2.detach(), "half_split", False, F64, False) is first
    )  # compiled graphs
    base_cos, base_sin = embedding.cos_sin(32, dtype=F64)
    x = torch.randn(2, 16, 8, dtype=F64)
    for start in (0, 1, 3):  # slices of one base at other offsets: each rotates by its own rows
        c, s = base_cos[start : start + 16], base_sin[start : start + 16]
        torch.testing.assert_close(
            apply_rotary(x, c, s, layout="half_split"),
            apply_rotary(x, c.clone(), s.clone(), layout="half_split"),
            rtol=0, atol=0,
        )  # fmt: skip
    base_sin.neg_()  # in place through a view of the same base: every view's version moves with it
    c3, s3 = embedding.cos_sin(16, dtype=F64)
    torch.testing.assert_close(
        apply_rotary(x, c3, s3, layout="half_split"),
        apply_rotary(x, c3.clone(), s3.clone(), layout="half_split"),
        rtol=0, atol=0,
    )  # fmt: skip
    assert not torch.equal(rotary._pair_table(c3, s3, "half_split", False, F64, False), first)
