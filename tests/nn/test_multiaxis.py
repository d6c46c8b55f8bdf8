"""Multi-axis rotary (posenc.nn.multiaxis) against the peers' own code and float64 definitions.

Peers: transformers' Qwen2-VL (sectioned M-RoPE) and Qwen3-VL (interleaved) rotary modules and
``get_rope_index``; rotary-embedding-torch's ``get_axial_freqs`` (language and pixel grids).
timm cannot be installed in this environment (its torchvision requirement pulls a CUDA torch that
replaces the CPU build), so its rotary is not compared here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from peers import import_peer

from posenc.nn.multiaxis import MultiAxisRotary, mrope_axes, mrope_position_ids

F64 = torch.float64


def qwen_rotary(version: int, head_dim: int, sections: list[int], theta: float = 1e6):
    """transformers' own text rotary of Qwen2-VL (2) or Qwen3-VL (3), built from a local config."""
    transformers = import_peer("transformers", "transformers' Qwen-VL rotary is the peer")
    if version == 2:
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig as Config
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding as Rotary
    else:
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig as Config
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding as Rotary
    assert transformers
    rope = {"rope_type": "default", "rope_theta": theta, "mrope_section": sections}
    if version == 3:
        rope["mrope_interleaved"] = True
    config = Config(
        hidden_size=4 * head_dim,
        num_attention_heads=4,
        head_dim=head_dim,
        rope_parameters=rope,
        max_position_embeddings=4096,
    )
    return Rotary(config), config


def grid_positions(b: int, s: int, start: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return start + torch.randint(0, 500, (3, b, s), generator=g)


@pytest.mark.parametrize(
    ("version", "head_dim", "sections"), [(2, 128, [16, 24, 24]), (3, 128, [24, 20, 20])]
)
def test_mrope_equals_transformers_qwen_vl_rotary(version, head_dim, sections):
    theirs, config = qwen_rotary(version, head_dim, sections)
    ours = MultiAxisRotary.from_hf(config)
    positions = grid_positions(2, 40, 0, seed=version)
    cos, sin = theirs(torch.zeros(1), positions)
    our_cos, our_sin = ours.cos_sin(positions)
    assert our_cos.shape == cos.shape == (2, 40, head_dim)
    # float32 angles: |error| <= t·θ·2^-23 with t < 500
    assert (our_cos - cos).abs().max() < 2e-4 and (our_sin - sin).abs().max() < 2e-4
    # a wrong assignment (the other Qwen version's) is far off: the comparison can fail
    other = MultiAxisRotary.mrope(head_dim, sections[::-1] if version == 2 else sections, base=1e6)
    assert (other.cos_sin(positions)[0] - cos).abs().max() > 0.5


def test_mrope_angles_are_the_float64_definition_at_far_positions():
    sections = [16, 24, 24]
    theirs, config = qwen_rotary(2, 128, sections)
    ours = MultiAxisRotary.from_hf(config)
    positions = grid_positions(1, 16, 10**6, seed=0)
    theta = 1e6 ** (-torch.arange(0, 128, 2, dtype=F64) / 128)
    axis = torch.tensor(np.repeat([0, 1, 2], sections))
    exact = positions.to(F64)[axis].permute(1, 2, 0) * theta  # [b, s, 64]: pair i at its axis' coordinate
    torch.testing.assert_close(
        ours.angles(positions), exact, rtol=4e-15, atol=0
    )  # θ written as a power, posenc forms exp(−(2i/r)·ln ρ): a few ulp
    our_error = (ours.cos_sin(positions)[0][..., :64].to(F64) - exact.cos()).abs().max()
    their_error = (theirs(torch.zeros(1), positions)[0][..., :64].to(F64) - exact.cos()).abs().max()
    assert our_error < 1e-7 and their_error > 100 * our_error


def test_text_only_positions_give_plain_rope():
    from posenc.nn import RotaryEmbedding

    ours = MultiAxisRotary.mrope(64, [8, 12, 12], base=1e4)
    p = torch.arange(50)
    cos, sin = ours.cos_sin(p.expand(3, -1))
    ref_cos, ref_sin = RotaryEmbedding(64, base=1e4).tables(p, dtype=torch.float32)
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin)


def test_interleaved_assignment_is_qwen3s():
    axes = mrope_axes([24, 20, 20], 64, interleaved=True)
    assert axes[:6].tolist() == [0, 1, 2, 0, 1, 2]
    assert np.bincount(axes).tolist() == [24, 20, 20]
    assert axes[60:].tolist() == [0, 0, 0, 0]
    assert mrope_axes([16, 24, 24], 64).tolist() == [0] * 16 + [1] * 24 + [2] * 24


@pytest.mark.parametrize("grid", ["lang", "pixel"])
def test_axial_angles_equal_rotary_embedding_torch_get_axial_freqs(grid):
    ret = import_peer("rotary_embedding_torch", "rotary-embedding-torch is the peer")
    dim, h, w = 16, 6, 9
    peer = ret.RotaryEmbedding(dim, freqs_for=grid, max_freq=10.0)
    freqs = peer.get_axial_freqs(h, w)  # [h, w, 2·dim] angles, adjacent pairs: axis 0's then axis 1's
    ours = MultiAxisRotary.axial(2 * dim, [dim, dim], grid=grid, max_freq=10.0, layout="adjacent")
    coords = [torch.linspace(-1, 1, n) if grid == "pixel" else torch.arange(n) for n in (h, w)]
    mesh = torch.stack(torch.meshgrid(*coords, indexing="ij")).reshape(2, -1)
    angles = ours.angles(mesh)
    assert torch.allclose(angles.float(), freqs.reshape(h * w, -1)[:, 0::2], rtol=1e-6, atol=1e-6)
    # and the rotation itself, through the peer's apply_rotary_emb on adjacent pairs
    x = torch.randn(h * w, 2 * dim, generator=torch.Generator().manual_seed(0))
    theirs = ret.apply_rotary_emb(freqs.reshape(h * w, -1), x)
    cos, sin = ours.cos_sin(mesh)
    assert torch.allclose(ours.rotate(x, cos, sin), theirs, atol=1e-5)


def test_axial_dims_beyond_the_axes_pass_through_and_each_axis_is_1d_rope():
    from posenc.nn import RotaryEmbedding

    ours = MultiAxisRotary.axial(40, [16, 16], base=100.0, layout="half_split")
    assert ours.rotary_dim == 32
    x = torch.randn(1, 2, 12, 40, dtype=F64)
    p = torch.stack([torch.arange(12), torch.zeros(12, dtype=torch.long)])
    q, _ = ours(x, x, positions=p)
    assert torch.equal(q[..., 32:], x[..., 32:])
    one_d = MultiAxisRotary(16, ours.frequencies[:1, :8], layout="half_split")
    assert torch.equal(ours.angles(p)[:, :8], one_d.angles(p[:1]))
    assert torch.equal(
        one_d.cos_sin(p[:1], dtype=F64)[0], RotaryEmbedding(16, base=100.0).tables(p[0], dtype=F64)[0]
    )


def test_per_head_frequencies_choose_which_heads_rotate_which_axes():
    theta = torch.tensor([1.0, 0.1, 0.01, 0.001], dtype=F64)
    zero = torch.zeros(4, dtype=F64)
    # head 0 rotates with the first axis only, head 1 with the second only
    rope = MultiAxisRotary(8, torch.stack([torch.stack([theta, zero]), torch.stack([zero, theta])]))
    x = torch.randn(2, 2, 5, 8, dtype=F64, generator=torch.Generator().manual_seed(0))
    p = torch.stack([torch.arange(5), 10 * torch.arange(5)])
    q, _ = rope(x, x, positions=p)
    one_axis = MultiAxisRotary(8, theta[None])
    for head, axis in ((0, 0), (1, 1)):
        cos, sin = one_axis.cos_sin(p[axis : axis + 1], dtype=F64)
        assert torch.allclose(q[:, head], one_axis.rotate(x[:, head], cos, sin), atol=1e-12)


def test_rope_mixed_is_relative_and_learns_its_frequencies():
    torch.manual_seed(0)
    rope = MultiAxisRotary.mixed(16, 3, base=10.0)
    assert rope.frequencies.shape == (3, 2, 8) and rope.frequencies.requires_grad
    assert set(rope.state_dict()) == {"frequencies"}
    q, k = torch.randn(2, 3, 5, 16, dtype=F64), torch.randn(2, 3, 5, 16, dtype=F64)
    p = torch.randint(0, 20, (2, 5))
    shift = torch.tensor([[7], [-3]])
    with torch.no_grad():
        a = torch.einsum("bhsd,bhtd->bhst", *rope(q, k, positions=p))
        b = torch.einsum("bhsd,bhtd->bhst", *rope(q, k, positions=p + shift))
    assert torch.allclose(a, b, atol=1e-5)  # float32 parameters: depends on p' − p only
    qr, kr = rope(q.float(), k.float(), positions=p)
    (qr * kr).sum().backward()
    assert rope.frequencies.grad is not None and rope.frequencies.grad.abs().sum() > 0
    # the differentiable path agrees with apply_rotary's
    with torch.no_grad():
        cos, sin = rope.cos_sin(p)
        assert torch.allclose(rope.rotate(q.float(), cos, sin), qr.detach(), atol=1e-6)


def test_mrope_position_ids_equal_transformers_get_rope_index_on_text_image_video():
    transformers = import_peer("transformers", "transformers' get_rope_index is the peer")
    try:
        model_class, config_class = transformers.Qwen2VLModel, transformers.Qwen2VLConfig
    except (ImportError, RuntimeError) as error:
        pytest.skip(f"transformers' Qwen2-VL cannot be imported here: {error}")
    config = config_class(
        text_config={
            "hidden_size": 32,
            "num_attention_heads": 2,
            "num_hidden_layers": 1,
            "intermediate_size": 32,
            "vocab_size": 50,
            "rope_parameters": {"rope_type": "mrope", "mrope_section": [2, 3, 3]},
        },
        vision_config={
            "depth": 1,
            "embed_dim": 16,
            "num_heads": 2,
            "hidden_size": 32,
            "spatial_merge_size": 2,
        },
    )
    model = model_class(config).eval()
    # row 0: text, image (1×4×6 → 6 tokens), text, video (3×4×4 → 12 tokens), text; row 1: left-padded
    types = torch.tensor(
        [
            [0] * 3 + [1] * 6 + [0] * 2 + [2] * 12 + [0] * 4,
            [0] * 2 + [0] * 3 + [1] * 12 + [0] * 5 + [2] * 3 + [0] * 2,
        ]
    )
    mask = torch.ones_like(types)
    mask[1, :2] = 0
    images = torch.tensor([[1, 4, 6], [1, 8, 6]])
    videos = torch.tensor([[3, 4, 4], [3, 2, 2]])
    ids = torch.zeros_like(types)
    theirs, their_deltas = model.get_rope_index(ids, types, images, videos, attention_mask=mask)
    ours, our_deltas = mrope_position_ids(
        types, image_grid_thw=images, video_grid_thw=videos, spatial_merge_size=2, attention_mask=mask
    )
    assert torch.equal(ours, theirs) and torch.equal(our_deltas, their_deltas)
    assert ours[:, 0, 3:9].tolist() == [[3] * 6, [3, 3, 3, 4, 4, 4], [3, 4, 5, 3, 4, 5]]


def test_bad_input_is_refused_naming_the_parameter():
    with pytest.raises(
        ValueError, match=r"sections must sum to the number of rotary pairs \(rotary_dim / 2 = 32\)"
    ):
        MultiAxisRotary.mrope(64, [8, 12, 8])
    with pytest.raises(TypeError, match="sections must be a non-empty list"):
        MultiAxisRotary.mrope(64, 32)
    rope = MultiAxisRotary.mrope(64, [8, 12, 12])
    with pytest.raises(
        ValueError, match=r"positions must be \[axes=3, s\] or \[axes=3, b, s\].*got shape \[2, 5\]"
    ):
        rope.cos_sin(torch.zeros(2, 5))
    with pytest.raises(
        TypeError, match=r"^positions must be an integer dtype, float32 or float64, got torch.float16"
    ):
        rope.cos_sin(torch.zeros(3, 5, dtype=torch.float16))
    with pytest.raises(ValueError, match="axis_dims must all be even"):
        MultiAxisRotary.axial(32, [15, 17])
    with pytest.raises(ValueError, match="grid must be one of"):
        MultiAxisRotary.axial(32, [16, 16], grid="audio")
    with pytest.raises(ValueError, match="does not fit its grid"):
        mrope_position_ids(torch.tensor([[0, 1, 1, 0]]), image_grid_thw=torch.tensor([[1, 4, 4]]))
    with pytest.raises(ValueError, match="image_grid_thw has 0 rows"):
        mrope_position_ids(torch.tensor([[0, 1, 1, 0]]))


@given(
    sections=st.lists(st.integers(0, 6), min_size=1, max_size=4).filter(lambda s: sum(s) > 0),
    seed=st.integers(0, 2**16),
)
def test_every_pair_follows_exactly_its_sections_axis(sections, seed):
    pairs = sum(sections)
    rope = MultiAxisRotary.mrope(2 * pairs, sections, base=100.0)
    p = torch.randint(0, 1000, (len(sections), 7), generator=torch.Generator().manual_seed(seed))
    theta = torch.from_numpy(100.0 ** (-np.arange(pairs) * 2.0 / (2 * pairs)))
    axis = torch.from_numpy(np.repeat(np.arange(len(sections)), sections))
    torch.testing.assert_close(
        rope.angles(p), p.to(F64)[axis].T * theta, rtol=4e-15, atol=0
    )  # θ written as a power, posenc forms exp(−(2i/r)·ln ρ): a few ulp


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_queries_and_keys_are_refused(dtype):
    # a rotation of integers is not an integer: refused, never rounded to zeros
    module = MultiAxisRotary.mrope(16, [2, 3, 3])
    positions = torch.zeros(3, 4, dtype=torch.int64)
    floats = torch.randn(1, 2, 4, 16)
    ints = torch.ones(1, 2, 4, 16, dtype=dtype)
    with pytest.raises(TypeError, match=r"^q must be a floating tensor.*got torch\."):
        module(ints, floats, positions=positions)
    with pytest.raises(TypeError, match=r"^k must be a floating tensor.*got torch\."):
        module(floats, ints, positions=positions)
    cos, sin = module.cos_sin(positions)
    with pytest.raises(TypeError, match=r"^x must be a floating tensor.*got torch\."):
        module.rotate(ints, cos, sin)
