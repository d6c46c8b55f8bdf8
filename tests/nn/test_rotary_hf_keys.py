"""Real configurations transformers accepts, read key by key as transformers reads them: each accepted key
is held against transformers' own function or module (built from a small local config, nothing downloaded)."""

from __future__ import annotations

import math

import pytest
import torch
from peers import import_peer

from posenc.nn import RotaryEmbedding, rope_types

transformers = import_peer("transformers", "transformers is the peer these tests compare against")
from transformers import DeepseekV3Config, HunYuanMoEV1Config, LlamaConfig, Ministral3Config, PhimoeConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as deepseek  # noqa: E402
from transformers.models.hunyuan_v1_moe import modeling_hunyuan_v1_moe as hunyuan  # noqa: E402
from transformers.models.llama import modeling_llama as llama  # noqa: E402
from transformers.models.ministral3 import modeling_ministral3 as ministral3  # noqa: E402
from transformers.models.phimoe import modeling_phimoe as phimoe  # noqa: E402

EPS32 = 2.0**-24
HEAD = 16
SMALL = {
    "hidden_size": 4 * HEAD,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "vocab_size": 50,
}


def assert_frequencies_match(ours: RotaryEmbedding, inv_freq: torch.Tensor, attention: float) -> None:
    """posenc's float64 frequencies against transformers' float32 ones (one float32 rounding apart)."""
    torch.testing.assert_close(ours.frequencies, inv_freq.double(), rtol=4 * EPS32, atol=0)
    assert ours.attention_factor == pytest.approx(attention, rel=1e-12)


def tables_match(ours: RotaryEmbedding, hf_rope: torch.nn.Module, length: int) -> None:
    """Queries and keys rotated by the module's own (cos, sin) for a call of positions 0 … length−1 and by
    posenc's forward (float32 angles apart)."""
    torch.manual_seed(length)
    q, k = torch.randn(1, 2, length, HEAD), torch.randn(1, 2, length, HEAD)
    cos, sin = hf_rope(q, torch.arange(length)[None])
    q_hf, k_hf = llama.apply_rotary_pos_emb(q, k, cos, sin)
    q_ours, k_ours = ours(q, k)
    tol = 8 * EPS32 * length + 1e-6
    assert (q_ours - q_hf).abs().max() <= tol
    assert (k_ours - k_hf).abs().max() <= tol


def test_llama3_with_equal_low_and_high_factors_has_an_empty_smooth_band():
    """Llama 4 Scout's scaling: low_freq_factor == high_freq_factor == 1: wavelengths above L are
    divided by factor, the others kept (transformers' formula, whose blend band is empty there)."""
    parameters = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
        "rope_theta": 500.0,
    }
    config = LlamaConfig(**SMALL, max_position_embeddings=512, rope_parameters=parameters)
    inv_freq, attention = ROPE_INIT_FUNCTIONS["llama3"](config)
    ours = RotaryEmbedding.from_hf(config)
    assert_frequencies_match(ours, inv_freq, attention)
    wavelength = 2 * math.pi / ours.frequencies
    plain = RotaryEmbedding(HEAD, base=500.0).frequencies
    assert (wavelength > 64).any() and (wavelength < 64).any()  # both regimes occur
    torch.testing.assert_close(ours.frequencies, torch.where(2 * math.pi / plain > 64, plain / 8, plain))


def test_llama3_with_high_below_low_is_refused_naming_both():
    config = {
        "head_dim": 8,
        "rope_parameters": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 4.0,
            "high_freq_factor": 1.0,
            "original_max_position_embeddings": 64,
        },
    }
    with pytest.raises(ValueError, match=r"high_freq_factor must be >= low_freq_factor.*1.0 < 4.0"):
        RotaryEmbedding.from_hf(config)


HUNYUAN_ROPE = {
    "type": "dynamic",
    "alpha": 1000.0,
    "factor": 1.0,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "rope_theta": 10000.0,
}


def test_hunyuan_dynamic_with_alpha_is_a_fixed_ntk_alpha_base():
    """Hunyuan-A13B's ``{"type": "dynamic", "alpha": 1000, …}``: transformers' Hunyuan rotary turns it into
    ``ntk_alpha`` (base ρ·α^(d/(d−2)), not recomputed with the length) and ignores the other keys."""
    config = HunYuanMoEV1Config(
        **SMALL, head_dim=HEAD, max_position_embeddings=64, rope_parameters=dict(HUNYUAN_ROPE)
    )
    hf_rope = hunyuan.HunYuanMoEV1RotaryEmbedding(config)
    assert hf_rope.rope_type == "ntk_alpha"
    ours = RotaryEmbedding.from_hf(config)
    assert_frequencies_match(ours, hf_rope.inv_freq, hf_rope.attention_scaling)
    for length in (16, 200):  # beyond max_position_embeddings: still the same base (not dynamic)
        tables_match(ours, hf_rope, length)
    expected = RotaryEmbedding(HEAD, base=10000.0 * 1000.0 ** (HEAD / (HEAD - 2))).frequencies
    torch.testing.assert_close(ours.frequencies, expected, rtol=1e-14, atol=0)
    reading = rope_types.hf_read(config)
    assert reading.rope_type == "ntk_alpha"
    assert set(reading.ignored) == {"factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim"}


def test_ministral3_yarn_with_llama_4_scaling_beta_rotates_as_yarn_and_reports_the_query_scale():
    """Ministral 3: ``llama_4_scaling_beta`` is read by the attention (queries × 1 + β·ln(1 + ⌊t/L⌋)),
    not the rotary: the rotary is transformers' yarn, and the reading carries β for the attention."""
    config = Ministral3Config(**SMALL, head_dim=HEAD)
    parameters = config.rope_parameters
    assert parameters["llama_4_scaling_beta"] == 0.1
    inv_freq, attention = ROPE_INIT_FUNCTIONS["yarn"](config)
    ours = RotaryEmbedding.from_hf(config)
    assert_frequencies_match(ours, inv_freq, attention)
    reading = rope_types.hf_read(config)
    assert reading.attention == {"llama_4_scaling_beta": 0.1}
    positions = torch.tensor([[0, 1, 16383, 16384, 40000, 10**6]])
    want = ministral3.get_llama_4_attn_scale(
        positions, parameters["llama_4_scaling_beta"], parameters["original_max_position_embeddings"]
    ).flatten()
    got = rope_types.llama4_query_scale(positions.flatten().numpy(), reading)
    torch.testing.assert_close(torch.from_numpy(got), want.double(), rtol=1e-6, atol=0)


def test_yarn_with_mscale_all_dim_zero_takes_the_plain_yarn_factor():
    """Arcee-style ``mscale_all_dim: 0.0``: transformers' ``if mscale and mscale_all_dim`` is false,
    so the attention factor is 0.1·ln f + 1."""
    parameters = {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 32,
        "mscale": 1.0,
        "mscale_all_dim": 0.0,
        "rope_theta": 10000.0,
    }
    config = LlamaConfig(**SMALL, max_position_embeddings=128, rope_parameters=parameters)
    inv_freq, attention = ROPE_INIT_FUNCTIONS["yarn"](config)
    ours = RotaryEmbedding.from_hf(config)
    assert_frequencies_match(ours, inv_freq, attention)
    assert ours.attention_factor == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)


def test_deepseek_softmax_scale_from_mscale_all_dim_is_transformers():
    parameters = {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 64,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
        "beta_fast": 32,
        "beta_slow": 1,
        "rope_theta": 10000.0,
    }
    config = DeepseekV3Config(
        **SMALL,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=8,
        kv_lora_rank=8,
        q_lora_rank=8,
        max_position_embeddings=2560,
        rope_parameters=parameters,
        n_routed_experts=4,
        num_experts_per_tok=2,
    )
    reading = rope_types.hf_read(config)
    want = deepseek.yarn_apply_mscale(config.rope_parameters, 1.0)
    assert want != 1.0
    assert reading.attention["softmax_scale_factor"] == pytest.approx(want, rel=1e-14)


def test_phimoe_longrope_mscales_scale_the_tables_as_transformers_does():
    """Phi-3.5-MoE: ``short_mscale`` up to L, ``long_mscale`` beyond, in place of the computed factor; its
    rotary recomputes the frequencies without the length, so the short factors hold at every length."""
    parameters = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0 + 0.1 * i for i in range(HEAD // 2)],
        "long_factor": [2.0 + 0.5 * i for i in range(HEAD // 2)],
        "short_mscale": 1.1,
        "long_mscale": 1.3,
        "original_max_position_embeddings": 32,
    }
    config = PhimoeConfig(**SMALL, max_position_embeddings=128, rope_parameters=parameters)
    hf_rope = phimoe.PhimoeRotaryEmbedding(config)
    ours = RotaryEmbedding.from_hf(config)
    for length in (20, 100, 30):
        tables_match(ours, hf_rope, length)
        assert ours.attention_factor == (1.3 if length > 32 else 1.1)


def test_only_one_of_the_mscales_is_refused():
    config = {
        "head_dim": 8,
        "max_position_embeddings": 64,
        "rope_parameters": {
            "rope_type": "longrope",
            "short_factor": [1.0] * 4,
            "long_factor": [2.0] * 4,
            "short_mscale": 1.1,
            "original_max_position_embeddings": 32,
        },
    }
    with pytest.raises(ValueError, match="short_mscale and long_mscale go together.*only short_mscale"):
        RotaryEmbedding.from_hf(config)


def test_an_unknown_key_is_refused_naming_it():
    config = {"head_dim": 8, "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "beta_fastest": 64}}
    with pytest.raises(ValueError, match="key 'beta_fastest' is not one transformers reads"):
        RotaryEmbedding.from_hf(config)


def test_a_key_of_another_rope_type_is_ignored_as_transformers_ignores_it():
    config = LlamaConfig(
        **SMALL,
        rope_parameters={"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0, "rope_theta": 1e4},
    )
    inv_freq, attention = ROPE_INIT_FUNCTIONS["linear"](config)
    assert_frequencies_match(RotaryEmbedding.from_hf(config), inv_freq, attention)
    assert set(rope_types.hf_read(config).ignored) == {"low_freq_factor"}


def test_every_key_a_model_file_reads_is_known():
    """Grep the installed transformers' model files for ``rope_parameters[...]``/``.get(...)`` keys: posenc
    must know each (read it, or list it as read elsewhere)."""
    import pathlib
    import re

    models = pathlib.Path(transformers.__file__).parent / "models"
    pattern = re.compile(r"rope_parameters(?:\[[^\]]*\])?(?:\[\"([a-z_0-9]+)\"\]|\.get\(\"([a-z_0-9]+)\")")
    read = set()
    for path in models.glob("*/modeling_*.py"):
        for match in pattern.finditer(path.read_text()):
            read.add(match.group(1) or match.group(2))
    layer_types = {"full_attention", "sliding_attention"}
    known = set(rope_types.HF_ROPE_KEYS) | set(rope_types._HF_GLOBAL_KEYS)
    assert read - layer_types - known == set()
    assert "alpha" in read and "llama_4_scaling_beta" in read  # the grep sees what it should


def test_the_softmax_mscale_model_types_are_the_files_that_apply_it():
    import pathlib

    models = pathlib.Path(transformers.__file__).parent / "models"
    applying = {
        path.parent.name
        for path in models.glob("*/modeling_*.py")
        if "yarn_apply_mscale(" in path.read_text() and path.name == f"modeling_{path.parent.name}.py"
    }
    assert applying == set(rope_types.SOFTMAX_MSCALE_MODEL_TYPES)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"rope_theta": "1e4"}, r"config rope_theta must be a finite number, got '1e4'"),
        ({"rope_theta": [1e4, 1e6]}, r"config rope_theta must be a finite number, got \[10000.0"),
        ({"partial_rotary_factor": 2.0}, r"partial_rotary_factor must be in \(0, 1\].*got 2.0"),
        ({"partial_rotary_factor": 0.0}, r"partial_rotary_factor must be in \(0, 1\]"),
        (
            {"rope_type": "proportional", "partial_rotary_factor": 1.5},
            r"partial_rotary_factor must be in \(0, 1\].*1.5",
        ),
        ({"rope_type": 3}, r"config rope_type must be a string, got 3"),
    ],
)
def test_bad_global_values_are_refused_naming_the_key(change, match):
    config = {"head_dim": 64, "rope_parameters": {"rope_type": "default", **change}}
    with pytest.raises(ValueError, match=match):
        RotaryEmbedding.from_hf(config)


def vllm_ntk_inv_freq(rotary_dim: int, base: float, factor: float, mixed_b: float | None) -> torch.Tensor:
    """vLLM's NTKScalingRotaryEmbedding._compute_inv_freq, transcribed (vLLM is not installable here):
    base·f (fixed) or base (mixed), inv_freq = 1/base^(arange(0, r, 2)/r), then ÷ f^(2/r) or ÷ λ_(1…r/2)."""
    scaled = base * (factor if mixed_b is None else 1)
    inv_freq = 1.0 / scaled ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    if mixed_b is None:
        return inv_freq / factor ** (2 / rotary_dim)
    a = math.log(factor) / (rotary_dim / 2) ** mixed_b
    return inv_freq / (a * torch.arange(1, rotary_dim // 2 + 1, dtype=torch.float64) ** mixed_b).exp()


@pytest.mark.parametrize("mixed_b", [None, 0.5, 1.0, 1.7])
def test_a_configs_ntk_is_read_as_vllm_reads_it(mixed_b):
    parameters = {"rope_type": "ntk", "factor": 8.0, **({} if mixed_b is None else {"mixed_b": mixed_b})}
    ours = RotaryEmbedding.from_hf({"head_dim": HEAD, "rope_theta": 10000.0, "rope_parameters": parameters})
    want = vllm_ntk_inv_freq(HEAD, 10000.0, 8.0, mixed_b)
    torch.testing.assert_close(ours.frequencies, want, rtol=1e-13, atol=0)
    assert ours.frequencies[-1] == pytest.approx(
        RotaryEmbedding(HEAD).frequencies[-1].item() / 8.0, rel=1e-13
    )


def vllm_deepseek_yarn(
    rotary_dim,
    base,
    factor,
    original,
    *,
    beta_fast=32,
    beta_slow=1,
    mscale=1.0,
    mscale_all_dim=0.0,
    attn_factor=1.0,
    extrapolation_factor=1.0,
):
    """vLLM's DeepseekScalingRotaryEmbedding (_compute_inv_freq and its mscale), transcribed in float64."""

    def get_mscale(scale, m=1.0):
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    def correction_dim(rotations):
        return rotary_dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), rotary_dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(rotary_dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim)
    mask = (1 - ramp) * extrapolation_factor
    inv_freq = 1.0 / (factor * pos_freqs) * (1 - mask) + 1.0 / pos_freqs * mask
    return inv_freq, get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim) * attn_factor


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"mscale": 0.707},
        {"mscale": 1.0, "mscale_all_dim": 1.0},
        {"attn_factor": 1.2, "extrapolation_factor": 0.5},
    ],
)
def test_vllms_deepseek_yarn_is_read_as_vllm_reads_it(extra):
    parameters = {
        "rope_type": "deepseek_yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 64,
        **extra,
    }
    config = {
        "head_dim": HEAD,
        "rope_theta": 10000.0,
        "max_position_embeddings": 2560,
        "rope_parameters": parameters,
    }
    ours = RotaryEmbedding.from_hf(config)
    inv_freq, attention = vllm_deepseek_yarn(HEAD, 10000.0, 40.0, 64, **extra)
    torch.testing.assert_close(ours.frequencies, inv_freq, rtol=1e-13, atol=0)
    assert ours.attention_factor == pytest.approx(attention, rel=1e-13)


@pytest.mark.parametrize("keys", [{}, {"interleaved": True}, {"mrope_interleaved": False}])
def test_qwen3_omni_thinker_interleaves_its_mrope_pairs_whatever_the_keys_say(keys):
    """Qwen3-Omni's thinker text rotary always recomposes t/h/w interleaved (its config's keys are not read)."""
    from transformers.models.qwen3_omni_moe import configuration_qwen3_omni_moe as omni_config
    from transformers.models.qwen3_omni_moe import modeling_qwen3_omni_moe as omni

    from posenc.nn.multiaxis import MultiAxisRotary

    parameters = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2], **keys}
    config = omni_config.Qwen3OmniMoeTextConfig(**SMALL, head_dim=HEAD, rope_parameters=parameters)
    hf_rope = omni.Qwen3OmniMoeThinkerTextRotaryEmbedding(config)
    positions = torch.stack([torch.arange(20), torch.arange(20) % 5 + 3, torch.arange(20) // 5 + 7])
    cos, sin = hf_rope(torch.zeros(1, 1, 20, HEAD), positions[:, None, :])
    ours_cos, ours_sin = MultiAxisRotary.from_hf(config).cos_sin(positions, dtype=torch.float64)
    torch.testing.assert_close(ours_cos, cos[0].double(), rtol=0, atol=1e-5)
    torch.testing.assert_close(ours_sin, sin[0].double(), rtol=0, atol=1e-5)
