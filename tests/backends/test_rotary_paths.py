"""Rotary's fast paths against each other and the float64 formula: blocked and unblocked, with and
without the compiled loop, eager and compiled, and tables that change between calls. Backend tests:
they switch ``posenc._native.kernels`` off and shrink ``posenc.backends.rotate.CHUNK_BYTES``."""

from __future__ import annotations

import pytest
import torch
from references import reference_rotary

from posenc import _native
from posenc.backends import rotate as rotation
from posenc.nn import RotaryEmbedding, apply_rotary

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
        old, rotation.CHUNK_BYTES = rotation.CHUNK_BYTES, block
        try:
            torch.testing.assert_close(apply_rotary(x, c, s, layout=layout).to(F64), ref, **tol)
            xt = x.transpose(1, 2).contiguous().transpose(1, 2)  # same values, strides not mergeable
            torch.testing.assert_close(apply_rotary(xt, c, s, layout=layout).to(F64), ref, **tol)
            back = apply_rotary(apply_rotary(x64, cos, sin, layout=layout), cos, -sin, layout=layout)
            torch.testing.assert_close(back, x64, rtol=0, atol=1e-12)
        finally:
            rotation.CHUNK_BYTES = old


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


LAYOUTS = ["adjacent", "half_split"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_module_tables_follow_moves_casts_and_loads(layout):
    """The module keeps one table per pair and nothing derived from it, rebuilt for every dtype from
    float64 angles: moves, casts and loads never leave a stale copy behind."""
    torch.manual_seed(0)
    rope = RotaryEmbedding(12, rotary_dim=8, layout=layout, max_len=16).to(F64)
    x = torch.randn(2, 3, 10, 12, dtype=F64)
    want = reference_rotary(x, torch.arange(10), layout=layout, rotary_dim=8, base=10000.0)
    torch.testing.assert_close(rope(x, x)[0], want, rtol=0, atol=1e-14)
    torch.testing.assert_close(rope(x, x, offset=3)[1], reference_rotary(
        x, torch.arange(3, 13), layout=layout, rotary_dim=8, base=10000.0), rtol=0, atol=1e-14)  # fmt: skip
    rope.load_state_dict(RotaryEmbedding(12, rotary_dim=8, layout=layout).state_dict())  # nothing learned
    torch.testing.assert_close(rope(x, x)[0], want, rtol=0, atol=1e-14)
    for dtype, tol in ((torch.float32, 1e-6), (F64, 1e-14)):  # a cast rebuilds from float64 angles
        rope.to(dtype)
        torch.testing.assert_close(rope(x, x)[0], want, rtol=0, atol=1e-14)  # float64 x: float64 tables
        torch.testing.assert_close(rope(x.to(dtype), x.to(dtype))[0].double(), want, rtol=0, atol=tol)
    with torch.inference_mode():
        torch.testing.assert_close(rope(x, x)[0], want, rtol=0, atol=1e-14)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_module_tables_follow_the_frequencies_of_dynamic_scaling(layout):
    torch.manual_seed(0)
    rope = RotaryEmbedding(
        8, layout=layout, scaling="dynamic", scaling_factor=4.0,
        scaling_options={"max_position_embeddings": 16}, max_len=64,
    ).to(F64)  # fmt: skip
    x = torch.randn(1, 2, 40, 8, dtype=F64)
    used = []
    for s in (8, 40, 8):  # the long call changes the frequencies, the short one returns to the original
        got = rope(x[:, :, :s], x[:, :, :s])[0]
        used.append(rope.frequencies)
        angles = torch.arange(s, dtype=F64)[:, None] * used[-1][None]
        cos, sin = (rotation.layout_table(t, layout) for t in (angles.cos(), angles.sin()))
        want = rotation.rotation_reference(x[:, :, :s], cos, sin, layout)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-13)
    assert not torch.equal(used[0], used[1]) and torch.equal(used[0], used[2])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_user_tables_changed_in_place_rotate_by_their_new_values(layout):
    # apply_rotary keeps nothing between calls: a table changed in place, or a slice of one base at another
    # offset, rotates by its own values
    embedding = RotaryEmbedding(8, layout=layout, max_len=32)
    base_cos, base_sin = embedding.cos_sin(32, dtype=F64)
    x = torch.randn(2, 16, 8, dtype=F64)
    for start in (0, 1, 3):
        c, s = base_cos[start : start + 16], base_sin[start : start + 16]
        torch.testing.assert_close(
            apply_rotary(x, c, s, layout=layout),
            rotation.rotation_reference(x, c, s, layout),
            rtol=0,
            atol=1e-15,
        )
    c, s = base_cos[:16].clone(), base_sin[:16].clone()
    apply_rotary(x, c, s, layout=layout)
    s.neg_()  # now the inverse rotation's table
    torch.testing.assert_close(
        apply_rotary(x, c, s, layout=layout), rotation.rotation_reference(x, c, s, layout), rtol=0, atol=1e-15
    )


def test_fresh_slices_of_one_given_table_share_its_pairs_and_other_views_do_not():
    # the tables given to apply_rotary are read once (are both columns of every pair equal?): a fresh slice
    # of the same base (a caller slicing its cache at every call), or the detached alias a compiled
    # backward receives, finds the kept result; a slice elsewhere, or after the base changed, does not
    embedding = RotaryEmbedding(8, layout="half_split", max_len=32)
    base_cos, base_sin = (t.clone() for t in embedding.cos_sin(32, dtype=F64))
    (c1, s1), (c2, s2) = (base_cos[:16], base_sin[:16]), (base_cos[:16], base_sin[:16])
    first = rotation.given_pairs(c1, s1, "half_split")
    assert first is not None and rotation.given_pairs(c2, s2, "half_split") is first
    assert rotation.given_pairs(c2.detach(), s2.detach(), "half_split") is first
    assert rotation.given_pairs(base_cos[1:17], base_sin[1:17], "half_split") is not first
    base_sin.neg_()  # in place through the base: every view's version moves with it
    again = rotation.given_pairs(c1, s1, "half_split")
    assert again is not first and torch.equal(again[1], -first[1])
    assert rotation.given_pairs(torch.randn(16, 8, dtype=F64), s1, "half_split") is None  # not a rotation
