"""RotaryEmbedding.from_hf against transformers' own rotary embeddings and apply_rotary_pos_emb (every rope type)."""

from __future__ import annotations

import math

import pytest
import torch
from peers import import_peer

from posenc.nn import RotaryEmbedding, rope_types

transformers = import_peer("transformers", "transformers is the peer these tests compare against")
from transformers import GPTNeoXConfig, LlamaConfig  # noqa: E402
from transformers.models.gpt_neox import modeling_gpt_neox as neox  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402

F64 = torch.float64
EPS32 = 2.0**-24
HEAD = 16
MAX_POS = 64

ROPE_PARAMETERS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {
        "rope_type": "yarn",
        "factor": 2.0,
        "original_max_position_embeddings": 32,
        "beta_fast": 16,
        "beta_slow": 2,
    },
    "yarn_mscale": {
        "rope_type": "yarn",
        "factor": 2.0,
        "original_max_position_embeddings": 32,
        "mscale": 0.707,
        "mscale_all_dim": 1.0,
    },
    "yarn_attention_factor": {
        "rope_type": "yarn",
        "factor": 2.0,
        "original_max_position_embeddings": 32,
        "attention_factor": 0.8,
        "truncate": False,
    },
    "longrope": {
        "rope_type": "longrope",
        "short_factor": [1.0 + 0.1 * i for i in range(HEAD // 2)],
        "long_factor": [1.0 + 0.5 * i for i in range(HEAD // 2)],
        "original_max_position_embeddings": 32,
    },
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
}


def llama_config(parameters: dict, **extra) -> LlamaConfig:
    return LlamaConfig(
        hidden_size=4 * HEAD,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=50,
        max_position_embeddings=MAX_POS,
        rope_parameters={**parameters, "rope_theta": 500.0},
        **extra,
    )


def hf_rotate(hf_rope, q, k, positions):
    """transformers' own path: the rotary module's (cos, sin) for position_ids, then apply_rotary_pos_emb."""
    cos, sin = hf_rope(q, positions)
    return llama.apply_rotary_pos_emb(q, k, cos, sin)


def tolerance(positions: torch.Tensor) -> float:
    """float32 round-off of transformers' angles (t·θ formed in float32) on unit-scale inputs."""
    return 8 * EPS32 * (float(positions.max()) + 1) + 1e-6


@pytest.mark.parametrize("name", list(ROPE_PARAMETERS))
def test_rotated_q_k_match_transformers_for_every_rope_type(name):
    config = llama_config(ROPE_PARAMETERS[name])
    hf_rope, ours = llama.LlamaRotaryEmbedding(config), RotaryEmbedding.from_hf(config)
    assert ours.attention_factor == pytest.approx(hf_rope.attention_scaling, rel=1e-12)
    torch.manual_seed(0)
    # lengths inside, beyond, far beyond, then back inside the original context: dynamic and longrope switch
    for length in (20, 100, 80, 40, 150):
        q, k = torch.randn(2, 4, length, HEAD), torch.randn(2, 4, length, HEAD)
        positions = torch.arange(length).expand(2, length)
        q_hf, k_hf = hf_rotate(hf_rope, q, k, positions)
        q_ours, k_ours = ours(q, k)
        tol = tolerance(positions)
        assert (q_ours - q_hf).abs().max() <= tol, (name, length)
        assert (k_ours - k_hf).abs().max() <= tol, (name, length)
        torch.testing.assert_close(ours.frequencies.float(), hf_rope.inv_freq, rtol=4 * EPS32, atol=0)


def test_the_types_really_differ_and_dynamic_follows_the_longest_length():
    """Guard against a test that passes because every type reduces to the default."""
    default = RotaryEmbedding.from_hf(llama_config(ROPE_PARAMETERS["default"]))
    for name, parameters in ROPE_PARAMETERS.items():
        if name not in ("default", "dynamic", "longrope"):
            assert not torch.allclose(
                RotaryEmbedding.from_hf(llama_config(parameters)).frequencies, default.frequencies
            )
    dynamic = RotaryEmbedding.from_hf(llama_config(ROPE_PARAMETERS["dynamic"]))
    x = torch.randn(1, 1, 100, HEAD)
    torch.testing.assert_close(dynamic.frequencies, default.frequencies, rtol=0, atol=0)  # inside the context
    dynamic(x, x)
    after_100 = dynamic.frequencies
    assert after_100[-1] < default.frequencies[-1]
    dynamic(x[..., :80, :], x[..., :80, :])  # shorter, still beyond 64: keeps the longest (100)
    torch.testing.assert_close(dynamic.frequencies, after_100, rtol=0, atol=0)
    dynamic(x[..., :10, :], x[..., :10, :])  # back inside: the original frequencies
    torch.testing.assert_close(dynamic.frequencies, default.frequencies, rtol=0, atol=0)


def test_plain_dict_and_legacy_rope_scaling_read_like_the_config_object():
    legacy = {
        "rope_scaling": {"type": "linear", "factor": 4.0},
        "rope_theta": 500.0,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "max_position_embeddings": MAX_POS,
    }
    from_dict = RotaryEmbedding.from_hf(legacy)
    from_config = RotaryEmbedding.from_hf(llama_config(ROPE_PARAMETERS["linear"]))
    assert from_dict.scaling == "linear" and from_dict.base == 500.0 and from_dict.head_dim == HEAD
    torch.testing.assert_close(from_dict.frequencies, from_config.frequencies, rtol=0, atol=0)
    new_style = {
        "rope_parameters": {**ROPE_PARAMETERS["llama3"], "rope_theta": 500.0},
        "head_dim": HEAD,
        "max_position_embeddings": MAX_POS,
    }
    torch.testing.assert_close(
        RotaryEmbedding.from_hf(new_style).frequencies,
        RotaryEmbedding.from_hf(llama_config(ROPE_PARAMETERS["llama3"])).frequencies,
        rtol=0,
        atol=0,
    )
    # Phi-3 keeps original_max_position_embeddings next to rope_parameters; transformers prefers that one
    phi = {**new_style, "original_max_position_embeddings": 8}
    assert RotaryEmbedding.from_hf(phi).scaling_parameters["original_max_position_embeddings"] == 8


@pytest.mark.parametrize("name", ["default", "yarn", "linear"])
def test_partial_rotary_matches_gpt_neox(name):
    parameters = {**ROPE_PARAMETERS[name], "rope_theta": 500.0, "partial_rotary_factor": 0.5}
    config = GPTNeoXConfig(
        hidden_size=4 * HEAD,
        num_attention_heads=4,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=50,
        max_position_embeddings=MAX_POS,
        rope_parameters=parameters,
    )
    hf_rope, ours = neox.GPTNeoXRotaryEmbedding(config), RotaryEmbedding.from_hf(config)
    assert ours.rotary_dim == HEAD // 2
    q, k = torch.randn(1, 4, 30, HEAD), torch.randn(1, 4, 30, HEAD)
    positions = torch.arange(30)[None]
    cos, sin = hf_rope(q, positions)
    q_hf, k_hf = neox.apply_rotary_pos_emb(q, k, cos, sin)
    q_ours, k_ours = ours(q, k)
    assert (q_ours - q_hf).abs().max() <= tolerance(positions)
    assert (k_ours - k_hf).abs().max() <= tolerance(positions)


def reference_frequencies(name: str) -> torch.Tensor:
    """float64 frequencies written out here for the types whose formula is one line."""
    theta = 500.0 ** (-torch.arange(0, HEAD, 2, dtype=F64) / HEAD)
    if name == "linear":
        return theta / ROPE_PARAMETERS["linear"]["factor"]
    if name == "longrope":  # beyond the original context: the long factors
        return theta / torch.tensor(ROPE_PARAMETERS["longrope"]["long_factor"], dtype=F64)
    return theta


def rotation_errors(name: str, start: int) -> tuple[float, float]:
    """Max |error| of transformers' and of posenc's float32 rotated queries against float64 angles."""
    config = llama_config(ROPE_PARAMETERS[name])
    hf_rope, ours = llama.LlamaRotaryEmbedding(config), RotaryEmbedding.from_hf(config)
    torch.manual_seed(1)
    q = torch.randn(1, 1, 64, HEAD)
    positions = torch.arange(start, start + 64)
    q_hf, _ = hf_rotate(hf_rope, q, q, positions[None])
    q_ours, _ = ours(q, q, q_positions=positions)
    angles = positions.to(F64)[:, None] * reference_frequencies(name)[None]
    angles = torch.cat([angles, angles], dim=-1)
    x = q.to(F64)
    turned = torch.cat([-x[..., HEAD // 2 :], x[..., : HEAD // 2]], dim=-1)
    exact = (x * torch.cos(angles) + turned * torch.sin(angles)) * ours.attention_factor
    return float((q_hf.to(F64) - exact).abs().max()), float((q_ours.to(F64) - exact).abs().max())


@pytest.mark.parametrize("name", ["default", "linear", "longrope"])
@pytest.mark.parametrize("start", [10**5, 10**6])
def test_float64_angles_keep_their_precision_at_far_positions(name, start):
    hf_error, our_error = rotation_errors(name, start)
    assert our_error < 1e-6  # float32 round-off of a correctly rounded table
    assert hf_error > 100 * our_error  # float32 angles: t·θ loses ~t·2^-24 radians


def test_hf_settings_refuses_what_it_cannot_read():
    with pytest.raises(ValueError, match="head_dim"):
        rope_types.hf_settings({"rope_theta": 10000.0})
    with pytest.raises(ValueError, match="must be one of.*mrope"):
        RotaryEmbedding.from_hf({"head_dim": 8, "rope_parameters": {"rope_type": "mrope"}})
    with pytest.raises(ValueError, match="key 'low_freq_factr' is not one transformers reads"):
        RotaryEmbedding.from_hf(
            {"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "low_freq_factr": 1.0}}
        )
    with pytest.warns(UserWarning, match="'linear' does not read rope_parameters low_freq_factor"):
        RotaryEmbedding.from_hf(
            {"head_dim": 8, "rope_parameters": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}}
        )
    with pytest.raises(ValueError, match="short_factor must hold rotary_dim/2 = 4"):
        RotaryEmbedding.from_hf(
            {
                "head_dim": 8,
                "max_position_embeddings": 8,
                "rope_parameters": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0] * 4},
            }
        )


def test_registry_is_open():
    def halve(r, base, parameters, length):
        return RotaryEmbedding(r, base=base).frequencies.numpy() / 2, 1.0

    rope_types.register("halve", rope_types.RopeType(halve))
    try:
        rope = RotaryEmbedding(8, scaling="halve")
        torch.testing.assert_close(rope.frequencies, RotaryEmbedding(8).frequencies / 2, rtol=0, atol=0)
    finally:
        del rope_types.ROPE_TYPES["halve"]


def test_yarn_attention_factor_formula():
    """YaRN (Peng et al. 2023): √(1/t) = 0.1·ln s + 1, written out here."""
    rope = RotaryEmbedding(
        16, scaling="yarn", scaling_factor=8.0, scaling_options={"original_max_position_embeddings": 4096}
    )
    assert rope.attention_factor == pytest.approx(0.1 * math.log(8.0) + 1.0, rel=1e-15)


def test_per_layer_type_rope_parameters_need_a_layer_type():
    config = {
        "head_dim": 8,
        "max_position_embeddings": 64,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    with pytest.raises(
        ValueError, match=r"layer_type must name one of .*'full_attention', 'sliding_attention'"
    ):
        RotaryEmbedding.from_hf(config)
    full = RotaryEmbedding.from_hf(config, layer_type="full_attention")
    assert full.scaling == "linear" and full.base == 1e6
    sliding = RotaryEmbedding.from_hf(config, layer_type="sliding_attention")
    assert sliding.scaling is None and sliding.base == 1e4


@pytest.mark.parametrize("layer_type", ["full_attention", "sliding_attention"])
def test_gemma3_per_layer_type_ropes_match_transformers(layer_type):
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3 import modeling_gemma3 as gemma3

    config = Gemma3TextConfig(
        hidden_size=4 * HEAD,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=HEAD,
        intermediate_size=32,
        num_hidden_layers=6,
        vocab_size=50,
        max_position_embeddings=128,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        },
    )
    q, k = torch.randn(1, 4, 30, HEAD), torch.randn(1, 4, 30, HEAD)
    positions = torch.arange(30)[None]
    cos, sin = gemma3.Gemma3RotaryEmbedding(config)(q, positions, layer_type=layer_type)
    q_hf, k_hf = gemma3.apply_rotary_pos_emb(q, k, cos, sin)
    q_ours, k_ours = RotaryEmbedding.from_hf(config, layer_type=layer_type)(q, k)
    assert (q_ours - q_hf).abs().max() <= tolerance(positions)
    assert (k_ours - k_hf).abs().max() <= tolerance(positions)


@pytest.mark.parametrize("name", ["dynamic", "longrope"])
def test_explicit_positions_follow_the_length_as_transformers_does(name):
    # the length read on the device from explicit positions: inside, beyond, shorter but still beyond
    # (dynamic keeps the longest), far, back inside; decoding steps at one far position
    config = llama_config(ROPE_PARAMETERS[name])
    hf_rope, ours = llama.LlamaRotaryEmbedding(config), RotaryEmbedding.from_hf(config)
    torch.manual_seed(0)
    for start, length in ((0, 20), (0, 100), (0, 80), (500, 1), (0, 40), (0, 70), (90, 1)):
        q, k = torch.randn(2, 4, length, HEAD), torch.randn(2, 4, length, HEAD)
        positions = (start + torch.arange(length)).expand(2, length)
        q_hf, k_hf = hf_rotate(hf_rope, q, k, positions)
        q_ours, k_ours = ours(q, k, q_positions=positions)
        tol = tolerance(positions)
        assert (q_ours - q_hf).abs().max() <= tol, (name, start, length)
        assert (k_ours - k_hf).abs().max() <= tol, (name, start, length)
