"""build_encoding / available_encodings: names resolve through posenc.registry."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from posenc import registry
from posenc.nn import (
    ALiBiBias,
    RotaryEmbedding,
    ShawRelativeBias,
    T5RelativeBias,
    available_encodings,
    build_encoding,
)


def test_available_encodings_are_the_registry_names():
    assert available_encodings() == registry.names()


@pytest.mark.parametrize("name", registry.names())
def test_every_name_builds_its_registered_class(name):
    module = build_encoding(name, d_model=32, n_heads=4, max_len=64)
    info = registry.get(name)
    if info.module is None:
        assert module is None
    else:
        assert type(module) is info.module_class()
        assert any(True for _ in module.parameters()) == info.learned


def test_sizes_go_to_the_parameters_that_ask_for_them():
    rope = build_encoding("rope", d_model=48, n_heads=4, max_len=100, layout="adjacent", rotary_dim=0.5)
    assert isinstance(rope, RotaryEmbedding)
    assert (rope.head_dim, rope.rotary_dim, rope.layout) == (12, 6, "adjacent")
    assert {b.shape[0] for b in rope.buffers()} == {100}  # its cached tables reach max_len
    assert build_encoding("alibi", d_model=48, n_heads=6, max_len=8).n_heads == 6
    t5 = build_encoding("t5", d_model=48, n_heads=6, max_len=8, bidirectional=False)
    assert isinstance(t5, T5RelativeBias) and not t5.bidirectional
    shaw = build_encoding("shaw", d_model=48, n_heads=6, max_len=8, on_values=True)
    assert isinstance(shaw, ShawRelativeBias) and shaw.head_dim == 8 and shaw.on_values
    assert build_encoding("learned", d_model=48, n_heads=6, max_len=77).weight.shape[0] == 77


def test_modules_and_none_pass_through():
    alibi = ALiBiBias(4)
    assert build_encoding(alibi, d_model=32, n_heads=4, max_len=8) is alibi
    assert build_encoding(None, d_model=32, n_heads=4, max_len=8) is None


def test_unregistered_name_lists_the_registered_ones():
    with pytest.raises(ValueError) as info:
        build_encoding("xpos", d_model=32, n_heads=4, max_len=8)
    assert "'xpos'" in str(info.value)
    assert all(name in str(info.value) for name in registry.names())


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: build_encoding("rope", d_model=32, n_heads=4, max_len=8, fraction=0.5),
            TypeError,
            "'rope' has no option 'fraction'; its options: base, layout, rotary_dim, scaling, scaling_factor",
        ),
        (
            lambda: build_encoding("rope", d_model=32, n_heads=4, max_len=8, head_dim=4),
            TypeError,
            "head_dim is set",
        ),
        (
            lambda: build_encoding("none", d_model=32, n_heads=4, max_len=8, base=3.0),
            TypeError,
            "takes no options",
        ),
        (lambda: build_encoding(ALiBiBias(4), d_model=32, n_heads=4, max_len=8, x=1), TypeError, "by name"),
        (lambda: build_encoding("alibi", d_model=30, n_heads=4, max_len=8), ValueError, "d_model=30"),
        (lambda: build_encoding("alibi", d_model=32, n_heads=0, max_len=8), ValueError, "n_heads"),
        (lambda: build_encoding("alibi", d_model=32, n_heads=4, max_len=0), ValueError, "max_len"),
    ],
)
def test_bad_arguments_are_explained(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_registry_imports_no_torch():
    code = "import sys, posenc.registry; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_built_encodings_follow_the_module_to_another_dtype():
    rope = build_encoding("rope", d_model=16, n_heads=2, max_len=8).to(torch.float64)
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64)
    assert rope(q, q)[0].dtype == torch.float64
