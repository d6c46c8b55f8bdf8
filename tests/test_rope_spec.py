"""The per-layer, per-sub-module rope spec against transformers' own modules and model files."""

from __future__ import annotations

import importlib
import inspect
import pathlib
import re
import warnings

import pytest
import torch
from peers import import_peer

from posenc import rope_spec
from posenc.nn import RotaryEmbedding, rope_types

transformers = import_peer("transformers", "transformers is the peer these tests compare against")
from transformers import AutoConfig, Cohere2Config, Gemma3TextConfig, Llama4TextConfig  # noqa: E402
from transformers.models.cohere2 import modeling_cohere2  # noqa: E402
from transformers.models.gemma3 import modeling_gemma3  # noqa: E402
from transformers.models.llama4 import modeling_llama4  # noqa: E402

MODELS = pathlib.Path(transformers.__file__).parent / "models"
SMALL = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 32,
    "vocab_size": 50,
}


def by_layer(groups: list[rope_spec.LayerGroup]) -> dict[int, rope_spec.LayerGroup]:
    return {i: g for g in groups for i in g.layers}


def test_llama4_nope_layers_are_transformers_use_rope_with_its_polarity():
    config = Llama4TextConfig(
        **SMALL,
        head_dim=16,
        num_hidden_layers=6,
        no_rope_layers=[1, 0, 1, 1, 0, 1],
        attn_temperature_tuning=True,
    )
    spec = by_layer(rope_spec.hf_rope_spec(config))
    for i in range(6):
        attention = modeling_llama4.Llama4TextAttention(config, i)
        module = spec[i].modules[0]
        assert module.rope == bool(attention.use_rope), i
        assert (module.query_scale is not None) == (
            not attention.use_rope and attention.attn_temperature_tuning
        )
    assert rope_spec.LayerGroup((0, 2, 3, 5), None, ()).describe_layers() == "0, 2-3, 5"


def test_cohere2_rotates_only_its_sliding_layers():
    config = Cohere2Config(**SMALL, num_hidden_layers=4, sliding_window_pattern=2)
    spec = by_layer(rope_spec.hf_rope_spec(config))
    for i in range(4):
        attention = modeling_cohere2.Cohere2Attention(config, i)
        assert spec[i].modules[0].rope == (
            attention.sliding_window is not None
        )  # its forward: `if self.sliding_window`
        assert spec[i].modules[0].layout in (None, "adjacent")


@pytest.mark.parametrize("sliding_pattern", [2, 10])
def test_gemma3_layer_types_get_their_own_rope(sliding_pattern):
    """Gemma 3: one rope per layer type; with 6 layers and pattern 10 every layer is sliding."""
    config = Gemma3TextConfig(
        **SMALL, head_dim=16, num_hidden_layers=6, sliding_window_pattern=sliding_pattern
    )
    groups = rope_spec.hf_rope_spec(config)
    assert {g.layer_type for g in groups} == set(config.layer_types)
    hf_rope = modeling_gemma3.Gemma3RotaryEmbedding(config)
    for group in groups:
        module = group.modules[0]
        ours = RotaryEmbedding.from_hf(config, layer_type=group.layer_type)
        want = getattr(hf_rope, f"{group.layer_type}_inv_freq")
        torch.testing.assert_close(ours.frequencies, want.double(), rtol=4 * 2.0**-24, atol=0)
        assert module.base == ours.base and module.rotary_dim == ours.rotary_dim


def calls_in(source: str) -> set[str]:
    return set(re.findall(r"(apply_rotary_pos_emb\w*)\(", source))


def layout_of(module, function: str) -> str:
    """The pair layout a model file's apply function rotates: interleave → adjacent; else its rotate_half's."""
    if "interleave" in function:
        return "adjacent"
    half = inspect.getsource(module.rotate_half)
    return "adjacent" if "0::2]" in half or "::2]" in half else "half_split"


@pytest.mark.parametrize("model_type", sorted(rope_spec.SUBMODULE_LAYOUTS))
def test_indexer_and_attention_layouts_are_read_from_the_model_file(model_type):
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    classes = {
        n: c for n, c in vars(module).items() if inspect.isclass(c) and c.__module__ == module.__name__
    }
    found = {}
    for role, suffix in (("indexer", "Indexer"), ("attention", "Attention")):
        names = [
            n
            for n in classes
            if n.endswith(suffix) and "Vision" not in n and "Audio" not in n and "Linear" not in n
        ]
        functions = set().union(*(calls_in(inspect.getsource(classes[n])) for n in names))
        assert len(functions) == 1, (model_type, role, functions)
        found[role] = layout_of(module, functions.pop())
    assert found == rope_spec.SUBMODULE_LAYOUTS[model_type]


def test_adjacent_pair_and_rope_interleave_lists_are_the_model_files():
    adjacent, interleave = set(), set()
    for path in MODELS.glob("*/modeling_*.py"):
        if path.name != f"modeling_{path.parent.name}.py":
            continue
        text = path.read_text()
        if "config.rope_interleave" in text:
            interleave.add(path.parent.name)
        match = re.search(r"def rotate_half\(x\):(?:\n.*){1,4}?\n\s+x1 = x\[([^\]]*)\]", text)
        adjacent_half = match is not None and "::2" in match.group(1)
        if (adjacent_half or "def rotate_every_two" in text) and re.search(r"class \w*ForCausalLM", text):
            adjacent.add(path.parent.name)
    assert interleave == set(rope_spec.ROPE_INTERLEAVE_MODEL_TYPES)
    assert adjacent - set(rope_spec.SUBMODULE_LAYOUTS) == set(rope_spec.ADJACENT_PAIR_MODEL_TYPES)


@pytest.mark.slow
def test_the_spec_reads_the_default_config_of_most_model_types_with_a_rope():
    """Every model type whose file defines a rotary class, from its default config (no download): the counts
    read are floors (transformers 5.24: 196 with a default config; hf_rope_spec reads 183 of them, and
    hf_rope_submodels 191, counting a composite config read when one of its sub-models is, and 166 with every
    sub-config holding a rope read, vision ropes included)."""
    transformers.utils.logging.set_verbosity_error()
    with_rope = sorted(
        p.parent.name
        for p in MODELS.glob("*/modeling_*.py")
        if p.name == f"modeling_{p.parent.name}.py" and re.search(r"class \w*RotaryEmbedding", p.read_text())
    )
    spec = submodels = every = 0
    for model_type in with_rope:
        try:
            config = AutoConfig.for_model(model_type)
        except Exception:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                rope_spec.hf_rope_spec(config)
                spec += 1
            except Exception:
                pass
            try:
                found = rope_spec.hf_rope_submodels(config)
            except Exception:
                continue
        submodels += 1
        every += all(s.unread is None for s in found)
    assert spec >= 183 and submodels >= 191 and every >= 166, (spec, submodels, every)


def test_a_plain_config_is_one_submodel_read_as_hf_rope_spec_reads_it():
    config = transformers.LlamaConfig(**SMALL, num_hidden_layers=2)
    assert rope_spec.hf_rope_submodels(config) == [
        rope_spec.SubmodelRope("", tuple(rope_spec.hf_rope_spec(config)))
    ]
    with pytest.raises(ValueError, match="config needs head_dim, or hidden_size and num_attention_heads"):
        rope_spec.hf_rope_submodels({"rope_parameters": {"rope_type": "default"}})


def test_gemma4_layer_types_read_their_own_head_dim_and_rope():
    """Gemma 4 keeps head_dim per layer type (256 sliding, 512 full) and a proportional full-attention rope."""
    from transformers import Gemma4TextConfig
    from transformers.models.gemma4 import modeling_gemma4

    config = Gemma4TextConfig(num_hidden_layers=6, vocab_size=50)
    groups = {g.layer_type: g for g in rope_spec.hf_rope_spec(config)}
    hf_rope = modeling_gemma4.Gemma4TextRotaryEmbedding(config)
    for layer_type, group in groups.items():
        module = group.modules[0]
        want = getattr(hf_rope, f"{layer_type}_inv_freq")
        ours = RotaryEmbedding.from_hf(config.per_layer_config[layer_type], layer_type=layer_type)
        torch.testing.assert_close(ours.frequencies, want.double(), rtol=4 * 2.0**-24, atol=0)
        assert module.head_dim == config.per_layer_config[layer_type].head_dim
    assert groups["full_attention"].modules[0].rope_type == "proportional"


def test_a_layer_type_whose_rope_parameters_are_none_is_nope():
    """transformers: ``rope_parameters[layer_type] is None`` is a NoPE layer type (Beam's full-attention layers)."""
    config = AutoConfig.for_model("beam", num_hidden_layers=6)
    config = getattr(config, "text_config", config)
    spec = by_layer(rope_spec.hf_rope_spec(config))
    for i, layer_type in enumerate(config.layer_types):
        assert spec[i].modules[0].rope == (config.rope_parameters[layer_type] is not None)
    assert any(not spec[i].modules[0].rope for i in spec) and any(spec[i].modules[0].rope for i in spec)


def test_a_dual_chunk_attention_config_is_reported_with_vllms_remapped_positions():
    """transformers ignores Qwen2.5-1M's dual_chunk_attention_config; the spec says what vLLM rotates instead."""
    config = transformers.Qwen2Config(
        **SMALL,
        num_hidden_layers=2,
        dual_chunk_attention_config={
            "chunk_size": 100,
            "local_size": 10,
            "original_max_position_embeddings": 64,
        },
    )
    (group,) = rope_spec.hf_rope_spec(config)
    (note,) = group.modules[0].notes
    assert "chunk_size 100, local_size 10" in note and "transformers ignores it" in note
    assert "keys at t mod 90" in note and "min(t mod 90 + 90, 100)" in note and "min(179, 100)" in note
    assert "t mod 90 + 100" in note
    (plain,) = rope_spec.hf_rope_spec(transformers.Qwen2Config(**SMALL, num_hidden_layers=2))
    assert plain.modules[0].notes == ()
    bad = {**config.to_dict(), "dual_chunk_attention_config": {"chunk_size": 10, "local_size": 10}}
    (refused,) = rope_spec.hf_rope_spec(bad)
    assert "local_size=10: not integers with 0 <= local_size < chunk_size" in refused.modules[0].notes[0]


def test_vllms_fope_keys_are_reported_with_the_tables_vllm_builds():
    """No transformers 5.24 model reads FoPE's keys (it warns and ignores them); the spec reports what vLLM's
    InternS1-Pro builds from them (``vllm/model_executor/models/interns1_pro.py``, read, not run): the
    frequencies θ_j = ρ^(−2j/d_h) with θ_j > 2π/L, and [kv_heads, F, F] coefficient tables per KV head."""
    import math

    from posenc.nn import FourierRotary

    parameters = {"rope_type": "default", "rope_theta": 5e6, "fope_init_factor": 0.5, "fope_sep_head": True}
    config = transformers.Qwen3MoeConfig(
        **{**SMALL, "num_key_value_heads": 1}, head_dim=128, num_hidden_layers=2,
        max_position_embeddings=262144, rope_parameters=parameters,
    )  # fmt: skip
    (group,) = rope_spec.hf_rope_spec(config)
    module = group.modules[0]
    kept = sum(5e6 ** (-2 * j / 128) > 2 * math.pi / 262144 for j in range(64))
    assert module.fope == {
        "head_dim": 128,
        "base": 5e6,
        "max_position_embeddings": 262144,
        "kv_heads": 1,
        "separate_heads": True,
        "num_inv_freq": None,
        "init_factor": 0.5,
        "kept_frequencies": kept,
        "table_heads": 1,
    }
    assert set(module.ignored_keys) == {"fope_init_factor", "fope_sep_head"}  # as transformers ignores them
    built = FourierRotary(**rope_spec.fope_settings(config))
    assert built.cos_coef.shape == (1, kept, kept)
    # vLLM's rule: any FoPE key not None turns it on; num_inv_freq alone keeps the first ones, one shared table
    only = {
        **config.to_dict(),
        "rope_parameters": {"rope_theta": 1e4, "num_inv_freq": 7},
        "num_key_value_heads": 2,
    }
    (group,) = rope_spec.hf_rope_spec(only)
    assert group.modules[0].fope["kept_frequencies"] == 7 and group.modules[0].fope["table_heads"] == 1
    off = {**config.to_dict(), "rope_parameters": {"rope_theta": 1e4, "num_inv_freq": None}}
    assert rope_spec.hf_rope_spec(off)[0].modules[0].fope is None
    bad = {**config.to_dict(), "rope_parameters": {"rope_theta": 1e4, "num_inv_freq": 65}}
    with pytest.raises(ValueError, match=r"num_inv_freq must be in 1…64 .*got 65"):
        rope_spec.hf_rope_spec(bad)


SUBMODEL_ROTARIES = {
    "qwen2_5_omni": {
        "thinker_config": ("Qwen2_5OmniRotaryEmbedding", "thinker_config.text_config"),
        "talker_config": ("Qwen2_5OmniRotaryEmbedding", "talker_config"),
        "token2wav_config.dit_config": ("Qwen2_5OmniDiTRotaryEmbedding", "token2wav_config.dit_config"),
    },
    "qwen3_omni_moe": {
        "talker_config": ("Qwen3OmniMoeTalkerRotaryEmbedding", "talker_config.text_config"),
        "talker_config.code_predictor_config": (
            "Qwen3OmniMoeRotaryEmbedding",
            "talker_config.code_predictor_config",
        ),
        "code2wav_config": ("Qwen3OmniMoeRotaryEmbedding", "code2wav_config"),
    },
    "t5gemma": {
        "encoder": ("T5GemmaRotaryEmbedding", "encoder"),
        "decoder": ("T5GemmaRotaryEmbedding", "decoder"),
    },
    "t5gemma2": {
        "encoder": ("T5Gemma2RotaryEmbedding", "encoder.text_config"),
        "decoder": ("T5Gemma2RotaryEmbedding", "decoder"),
    },
    "blt": {
        name: ("BltRotaryEmbedding", name)
        for name in ("patcher_config", "encoder_config", "decoder_config", "global_config")
    },
    "dia": {
        "encoder_config": ("DiaRotaryEmbedding", "encoder_config"),
        "decoder_config": ("DiaRotaryEmbedding", "decoder_config"),
    },
    "nemotron3_diarization": {"audio_config": ("Nemotron3DiarizationRotaryEmbedding", "audio_config")},
}
"""Per composite model type, each sub-config the spec reads → transformers' rotary class built from it (in the
model file: ``self.rotary_emb = <class>(config)`` of the sub-model holding that config) and that config."""

UNREAD = {
    "qwen2_5_omni": {"thinker_config.vision_config": "got 'axial'"},
    "qwen3_omni_moe": {
        "thinker_config.vision_config": "got 'axial'",
        "thinker_config.text_config": "73 × 1.0 → 73",  # hidden 2048 / 28 heads: an odd head_dim by default
    },
}
"""Sub-configs of the default configs that the spec lists as unread, and a part of the reason."""


@pytest.mark.parametrize("model_type", sorted(SUBMODEL_ROTARIES))
def test_composite_configs_are_read_per_sub_config_as_their_rotaries(model_type):
    """Each sub-config's spec gives the frequencies of transformers' own rotary module of that sub-model
    (float32 inv_freq against posenc's float64 ones); sub-configs with a vision rope are listed as unread."""
    from posenc.integrations.hf import rotary_from_spec

    transformers.utils.logging.set_verbosity_error()
    try:
        config = AutoConfig.for_model(model_type)
        modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    except Exception as error:  # pragma: no cover - depends on the installed transformers
        pytest.skip(f"transformers cannot build {model_type} here: {error}")
    with pytest.raises(ValueError, match="hf_rope_submodels"):
        rope_spec.hf_rope_spec(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = rope_spec.hf_rope_submodels(config)
    read = {s.path: s for s in found if s.unread is None}
    assert set(read) == set(SUBMODEL_ROTARIES[model_type])
    unread = {s.path: s.unread for s in found if s.unread is not None}
    assert unread.keys() == UNREAD.get(model_type, {}).keys()
    for path, reason in unread.items():
        assert UNREAD[model_type][path] in reason
    for path, (class_name, config_path) in SUBMODEL_ROTARIES[model_type].items():
        sub_config = config
        for name in config_path.split("."):
            sub_config = getattr(sub_config, name)
        hf_rotary = getattr(modeling, class_name)(sub_config)
        for group in read[path].groups:
            for module in group.modules:
                if not module.rope:
                    continue
                name = "inv_freq" if module.layer_type is None else f"{module.layer_type}_inv_freq"
                want = getattr(hf_rotary, name).double()
                ours = rotary_from_spec(module, layout="half_split").frequencies
                torch.testing.assert_close(ours, want, rtol=4 * 2.0**-24, atol=0)


@pytest.mark.parametrize(
    ("model_type", "head_dim", "fraction"), [("glm4_moe", 42, 0.5), ("glm4_moe", 64, 0.3)]
)
def test_an_odd_partial_rotary_dimension_is_read_as_transformers_rounds_it(model_type, head_dim, fraction):
    """transformers' default rope forms ⌈r/2⌉ frequencies ρ^(−2i/r) for an odd r = int(head_dim·fraction) and its
    tables rotate r + 1 columns (GLM-4-MoE's default 42 × 0.5 → 21: 11 pairs over 22 columns). The spec, and
    RotaryEmbedding.from_hf, rotate q exactly as transformers' own rotary module and apply_rotary_pos_emb do."""
    modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    config = AutoConfig.for_model(
        model_type, **SMALL, head_dim=head_dim, num_hidden_layers=2, partial_rotary_factor=fraction,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": fraction},
    )  # fmt: skip
    odd = int(head_dim * fraction)
    assert odd % 2 == 1
    (group,) = rope_spec.hf_rope_spec(config)
    module = group.modules[0]
    assert module.rotary_dim == odd + 1 and module.base == pytest.approx(1e4 ** ((odd + 1) / odd), rel=1e-15)
    assert any("is odd: transformers forms" in note for note in module.notes)
    rotary_class = next(
        c for n, c in vars(modeling).items() if n.endswith("RotaryEmbedding") and "Vision" not in n
    )
    hf_rotary = rotary_class(config)
    theta = torch.tensor([1e4 ** (-2 * i / odd) for i in range((odd + 1) // 2)], dtype=torch.float64)
    # float32 exponents 2i/r (odd r: not exact) carry 2^-24 relative error, times ln ρ ≈ 9.2 in ρ^(−2i/r)
    torch.testing.assert_close(hf_rotary.inv_freq.double(), theta, rtol=16 * 2.0**-24, atol=0)
    ours = RotaryEmbedding.from_hf(config)
    torch.testing.assert_close(ours.frequencies, theta, rtol=1e-14, atol=0)
    # transformers' own application in float64, on its float32 inv_freq: agreement to float32 rounding
    q = torch.randn(1, 2, 40, head_dim, dtype=torch.float64)
    positions = torch.arange(40)[None]
    freqs = positions[..., None].double() * hf_rotary.inv_freq.double()
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    want, _ = modeling.apply_rotary_pos_emb(q, q, cos, sin)
    got, _ = ours(q, q)
    torch.testing.assert_close(got, want, rtol=0, atol=40 * 2.0**-22)
    torch.testing.assert_close(got[..., odd + 1 :], q[..., odd + 1 :], rtol=0, atol=0)
    # r + 1 columns must fit in the head, and scaled ropes (whose formulas read r) keep refusing an odd r
    with pytest.raises(ValueError, match=r"an odd one below head_dim.*got 41 × 1.0 → 41"):
        RotaryEmbedding.from_hf({"head_dim": 41, "rope_parameters": {"rope_type": "default"}})
    linear = {"rope_type": "linear", "factor": 2.0, "partial_rotary_factor": fraction}
    with pytest.raises(ValueError, match=f"got {head_dim} × {fraction} → {odd}"):
        RotaryEmbedding.from_hf({"head_dim": head_dim, "rope_parameters": linear})


def test_the_full_head_default_rope_list_is_the_model_files():
    """The model types whose own compute_default_rope_parameters never reads partial_rotary_factor."""
    found = set()
    for path in MODELS.glob("*/modeling_*.py"):
        if path.name != f"modeling_{path.parent.name}.py":
            continue
        bodies = re.findall(
            r"def compute_default_rope_parameters\((?:.|\n)*?return inv_freq", path.read_text()
        )
        if bodies and all("partial_rotary_factor" not in body for body in bodies):
            found.add(path.parent.name)
    assert found == set(rope_types.DEFAULT_ROPE_FULL_HEAD_MODEL_TYPES)
    assert "llama" in found and "stablelm" not in found  # the grep sees what it should


@pytest.mark.parametrize(("model_type", "full_head"), [("llama", True), ("qwen2", True), ("stablelm", False)])
def test_partial_rotary_factor_is_read_only_where_the_model_files_default_rope_reads_it(
    model_type, full_head
):
    """Llama's default rope turns the whole head whatever partial_rotary_factor says (dim = head_dim); StableLM's
    reads it. The spec's frequencies are transformers' own rotary module's, and the key is listed as ignored."""
    from posenc.integrations.hf import rotary_from_spec

    modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    parameters = {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.5}
    config = AutoConfig.for_model(model_type, **SMALL, num_hidden_layers=1, rope_parameters=parameters)
    rotary_class = next(c for n, c in vars(modeling).items() if n.endswith("RotaryEmbedding"))
    want = rotary_class(config).inv_freq.double()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (group,) = rope_spec.hf_rope_spec(config)
    module = group.modules[0]
    assert module.rotary_dim == (16 if full_head else 8)
    assert ("partial_rotary_factor" in module.ignored_keys) == full_head
    torch.testing.assert_close(
        rotary_from_spec(module, layout="half_split").frequencies, want, rtol=4 * 2.0**-24, atol=0
    )


def test_pixtrals_2d_rope_is_read_as_its_rotary_module_computes_it():
    """Pixtral's vision rope (rope_type 'axial') from the spec's axis_frequencies: MultiAxisRotary's tables at
    positions (h, w) equal transformers' PixtralVisionRotaryEmbedding's, and its rotation transformers'
    apply_rotary_pos_emb (float64 application of transformers' own tables)."""
    from transformers import PixtralVisionConfig
    from transformers.models.pixtral import modeling_pixtral

    from posenc.integrations.hf import rotary_from_spec
    from posenc.nn import MultiAxisRotary

    config = PixtralVisionConfig(hidden_size=64, num_attention_heads=2, num_hidden_layers=3, head_dim=32)
    (group,) = rope_spec.hf_rope_spec(config)
    (module,) = group.modules
    assert group.layers == (0, 1, 2) and module.rope_type == "axial" and module.axis_frequencies is not None
    rope = MultiAxisRotary(module.head_dim, module.axis_frequencies, layout=module.layout)
    h, w = torch.meshgrid(torch.arange(24), torch.arange(24), indexing="ij")
    position_ids = torch.stack(
        [h.flatten(), w.flatten()], dim=-1
    )  # [n, 2], as PixtralTransformer builds them
    hf_rotary = modeling_pixtral.PixtralVisionRotaryEmbedding(config)
    x = torch.zeros(1, position_ids.shape[0], 64)
    want_cos, want_sin = hf_rotary(x, position_ids)
    cos, sin = rope.cos_sin(position_ids.T, dtype=torch.float64)
    torch.testing.assert_close(cos, want_cos.double(), rtol=0, atol=24 * 2.0**-23)
    torch.testing.assert_close(sin, want_sin.double(), rtol=0, atol=24 * 2.0**-23)
    q = torch.randn(1, 2, position_ids.shape[0], 32, dtype=torch.float64)
    freqs = (
        position_ids[..., None].double() * hf_rotary.inv_freq.double()
    )  # transformers' forward, in float64
    table_cos = hf_rotary.recomposition_frequencies(freqs.cos())
    table_sin = hf_rotary.recomposition_frequencies(freqs.sin())
    want, _ = modeling_pixtral.apply_rotary_pos_emb(q, q, table_cos, table_sin, unsqueeze_dim=0)
    got = rope.rotate(q, cos, sin)
    torch.testing.assert_close(got, want, rtol=0, atol=24 * 2.0**-22)
    with pytest.raises(ValueError, match="2-axis axial rope: build posenc.nn.MultiAxisRotary"):
        rotary_from_spec(module, layout="half_split")


def test_the_per_layer_type_rope_config_list_is_the_model_files():
    found = {
        path.parent.name
        for path in MODELS.glob("*/modeling_*.py")
        if path.name == f"modeling_{path.parent.name}.py"
        and "rope_config = config.per_layer_config[layer_type]" in path.read_text()
    }
    assert found == {t.removesuffix("_text") for t in rope_spec.PER_LAYER_TYPE_ROPE_MODEL_TYPES}
    assert "gemma4" in found and "neomme" not in found


@pytest.mark.parametrize("model_type", ["neomme", "step3p7"])
def test_a_per_layer_config_the_rotary_does_not_read_is_not_read(model_type):
    """NeoMME and Step-3.7 keep a per_layer_config (sliding windows) that their rotary ignores: each layer type's
    frequencies are the rotary module's ``{layer_type}_inv_freq`` from the config itself."""
    from posenc.integrations.hf import rotary_from_spec

    config = AutoConfig.for_model(model_type)
    config = getattr(config, "text_config", None) or config
    modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    rotary_class = next(
        c for n, c in vars(modeling).items() if n.endswith("RotaryEmbedding") and "Vision" not in n
    )
    hf_rotary = rotary_class(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        groups = rope_spec.hf_rope_spec(config)
    checked = 0
    for group in groups:
        for module in group.modules:
            if module.rope:
                name = "inv_freq" if module.layer_type is None else f"{module.layer_type}_inv_freq"
                want = getattr(hf_rotary, name).double()
                ours = rotary_from_spec(module, layout="half_split").frequencies
                torch.testing.assert_close(ours, want, rtol=16 * 2.0**-24, atol=0)
                checked += 1
    assert checked


@pytest.mark.parametrize("head_dim", [None, 128])
def test_glm4v_moes_text_rope_is_read_as_its_rotary_module_applies_it(head_dim):
    """GLM-4V-MoE's text config, default (head_dim 4096/96 = 42, partial_rotary_factor 0.5 → 21, odd) and with
    GLM-4.5V's head_dim 128: the spec's rotary rotates q as transformers' Glm4vMoeTextRotaryEmbedding frequencies
    and apply_rotary_pos_emb do at text positions (one id on all three M-RoPE axes), in float64 from its float32
    inv_freq. Its own forward runs only where the 11 or 32 frequencies fit its default mrope_section [8, 12, 12]:
    at the default head_dim it raises (sections summing to 32 split 11), at 128 its tables are compared too."""
    from transformers.models.glm4v_moe import modeling_glm4v_moe

    from posenc.integrations.hf import rotary_from_spec

    config = AutoConfig.for_model("glm4v_moe").text_config
    if head_dim is not None:
        config.head_dim = head_dim
    (group,) = rope_spec.hf_rope_spec(config)
    (module,) = group.modules
    assert group.layers == tuple(range(config.num_hidden_layers)) and module.layout == "half_split"
    hf_rotary = modeling_glm4v_moe.Glm4vMoeTextRotaryEmbedding(config)
    ours = rotary_from_spec(module, layout=module.layout)
    torch.testing.assert_close(ours.frequencies, hf_rotary.inv_freq.double(), rtol=16 * 2.0**-24, atol=0)
    n = 300
    positions = torch.arange(n)[None]
    freqs = positions[..., None].double() * hf_rotary.inv_freq.double()  # its forward, in float64
    table_cos, table_sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    if sum(hf_rotary.mrope_section) == freqs.shape[-1]:
        got_cos, got_sin = hf_rotary(torch.zeros(1, n, 8), positions)  # its own float32 tables
        torch.testing.assert_close(got_cos.double(), table_cos, rtol=0, atol=n * 2.0**-22)
        torch.testing.assert_close(got_sin.double(), table_sin, rtol=0, atol=n * 2.0**-22)
    else:
        with pytest.raises(RuntimeError, match="split_sizes to sum exactly to 11"):
            hf_rotary(torch.zeros(1, n, 8), positions)
    q = torch.randn(1, 2, n, module.head_dim, dtype=torch.float64)
    want, _ = modeling_glm4v_moe.apply_rotary_pos_emb(q, q, table_cos, table_sin)
    got, _ = ours(q, q)
    torch.testing.assert_close(got, want, rtol=0, atol=n * 2.0**-22)
    torch.testing.assert_close(got[..., module.rotary_dim :], q[..., module.rotary_dim :], rtol=0, atol=0)


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl"])
def test_the_qwen2_vl_vision_rope_is_read_as_its_rotary_module_computes_it(model_type):
    """The Qwen2-VL / Qwen2.5-VL vision tower's 2-D rope (rope_type 'axial') from the spec's axis_frequencies at
    qwen2_vl_vision_positions: the ids are transformers' get_vision_position_ids (images and a video, merge 2),
    MultiAxisRotary's tables are its VisionRotaryEmbedding's, and its rotation is apply_rotary_pos_emb_vision's
    (which computes in float32) and, in float64 on transformers' own inv_freq, its rotate_half formula."""
    from transformers import vision_utils

    from posenc.nn import MultiAxisRotary

    modeling = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    width = {"qwen2_vl": "embed_dim", "qwen2_5_vl": "hidden_size"}[model_type]
    config = AutoConfig.for_model(model_type).vision_config
    setattr(config, width, 64)
    config.num_heads = 2  # head_dim 32
    config.depth = 3
    (group,) = rope_spec.hf_rope_spec(config)
    (module,) = group.modules
    assert group.layers == (0, 1, 2) and module.head_dim == 32 and module.axis_frequencies is not None
    grid = torch.tensor([[1, 4, 6], [2, 6, 2], [1, 2, 2]])
    position_ids = vision_utils.get_vision_position_ids(grid, 2)
    torch.testing.assert_close(
        torch.from_numpy(rope_spec.qwen2_vl_vision_positions(grid.numpy(), 2)), position_ids, rtol=0, atol=0
    )
    rope = MultiAxisRotary(module.head_dim, module.axis_frequencies, layout=module.layout)
    rotary_class = next(c for n, c in vars(modeling).items() if n.endswith("VisionRotaryEmbedding"))
    hf_rotary = rotary_class(config)
    n = position_ids.shape[0]
    want_cos, want_sin = hf_rotary(torch.zeros(n, 64), position_ids)
    cos, sin = rope.cos_sin(position_ids.T, dtype=torch.float64)
    torch.testing.assert_close(cos, want_cos.double(), rtol=0, atol=6 * 2.0**-23)
    torch.testing.assert_close(sin, want_sin.double(), rtol=0, atol=6 * 2.0**-23)
    q = torch.randn(
        n, 2, 32, dtype=torch.float64
    )  # [tokens, heads, head_dim], as its VisionAttention holds q
    got = rope.rotate(q.transpose(0, 1), cos, sin).transpose(0, 1)
    want, _ = modeling.apply_rotary_pos_emb_vision(q, q, want_cos, want_sin)
    torch.testing.assert_close(got, want, rtol=0, atol=2.0**-18)
    freqs = position_ids[..., None].double() * hf_rotary.inv_freq.double()  # its forward, in float64
    table_cos = hf_rotary.recomposition_frequencies(freqs.cos())[:, None]
    table_sin = hf_rotary.recomposition_frequencies(freqs.sin())[:, None]
    want = q * table_cos + modeling.rotate_half(q) * table_sin
    torch.testing.assert_close(got, want, rtol=0, atol=6 * 2.0**-22)
    with pytest.raises(ValueError, match=r"spatial_merge_size must be a positive integer dividing .* got 4"):
        rope_spec.qwen2_vl_vision_positions(grid.numpy(), 4)


def test_mlcds_vision_rope_is_read_as_its_rotary_module_computes_it():
    """MLCD's vision rope (rope_type 'axial', Qwen2-VL's frequencies): at the row-major patch ids its
    MLCDVisionModel builds, MultiAxisRotary's tables from the spec are MLCDRotaryEmbedding's, and its rotation
    apply_rotary_pos_emb_vision's (float32, as it computes) and its rotate_half formula's in float64."""
    from transformers import MLCDVisionConfig
    from transformers.models.mlcd import modeling_mlcd

    from posenc.nn import MultiAxisRotary

    config = MLCDVisionConfig(
        hidden_size=64, num_attention_heads=2, num_hidden_layers=3, intermediate_size=32
    )
    (group,) = rope_spec.hf_rope_spec(config)
    (module,) = group.modules
    assert group.layers == (0, 1, 2) and module.head_dim == 32 and module.axis_frequencies is not None
    h, w = 5, 7
    rows = torch.arange(h).unsqueeze(1).expand(-1, w)  # as MLCDVisionModel.forward builds pos_ids
    columns = torch.arange(w).unsqueeze(0).expand(h, -1)
    position_ids = torch.stack([rows.flatten(), columns.flatten()], dim=-1)
    ours_ids = torch.from_numpy(rope_spec.qwen2_vl_vision_positions([[1, h, w]], 1))
    torch.testing.assert_close(ours_ids, position_ids, rtol=0, atol=0)
    rope = MultiAxisRotary(module.head_dim, module.axis_frequencies, layout=module.layout)
    hf_rotary = modeling_mlcd.MLCDRotaryEmbedding(config)
    want_cos, want_sin = hf_rotary(torch.zeros(h * w, 64), position_ids)
    cos, sin = rope.cos_sin(position_ids.T, dtype=torch.float64)
    torch.testing.assert_close(cos, want_cos.double(), rtol=0, atol=7 * 2.0**-23)
    torch.testing.assert_close(sin, want_sin.double(), rtol=0, atol=7 * 2.0**-23)
    q = torch.randn(1, h * w, 2, 32, dtype=torch.float64)  # [b, tokens, heads, head_dim], as MLCDAttention
    got = rope.rotate(q.transpose(1, 2), cos, sin).transpose(1, 2)
    want, _ = modeling_mlcd.apply_rotary_pos_emb_vision(q, q, want_cos[None], want_sin[None])
    torch.testing.assert_close(got, want, rtol=0, atol=2.0**-18)
    freqs = position_ids[..., None].double() * hf_rotary.inv_freq.double()  # its forward, in float64
    table_cos = hf_rotary.recomposition_frequencies(freqs.cos())[None, :, None]
    table_sin = hf_rotary.recomposition_frequencies(freqs.sin())[None, :, None]
    want = q * table_cos + modeling_mlcd.rotate_half(q) * table_sin
    torch.testing.assert_close(got, want, rtol=0, atol=7 * 2.0**-22)
    assert any("class_pos_emb" in note for note in module.notes)
