"""swap_rotary on tiny random models of each rotary family transformers ships: same logits, or a refusal.

Each model is built from a config here (random weights, no download). The swap verifies itself on
probe positions before it replaces anything; these tests check that what it installs gives the model's
own logits, near and far, and that what it cannot reproduce is refused with the model class, the module
and the first difference named, leaving the model untouched.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from peers import import_peer

from posenc.integrations.hf import HFRotary, RotaryMismatch, rotary_from_spec, swap_rotary
from posenc.nn import RotaryEmbedding
from posenc.nn.rope_types import hf_rope_layers
from posenc.rope_spec import hf_rope_spec

transformers = import_peer("transformers", "transformers is the client these tests run")

TEXT = {
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "vocab_size": 97,
    "max_position_embeddings": 64,
}
VISION = {"patch_size": 2, "temporal_patch_size": 2, "spatial_merge_size": 2, "depth": 1, "num_heads": 2}
TOKENS = {"image_token_id": 95, "video_token_id": 96, "vision_start_token_id": 94}


def peer_class(name: str) -> type:
    """A transformers class, or skip saying why it cannot be imported here (e.g. a broken torchvision)."""
    try:
        return getattr(transformers, name)
    except (ImportError, RuntimeError) as error:
        pytest.skip(f"transformers.{name} cannot be imported here: {error}")


def build(family: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "qwen2_vl":
        config = peer_class("Qwen2VLConfig")(
            text_config={**TEXT, "rope_parameters": {"rope_type": "mrope", "mrope_section": [2, 3, 3]}},
            vision_config={**VISION, "embed_dim": 32, "hidden_size": 64, "mlp_ratio": 2},
            **TOKENS,
        )
        return peer_class("Qwen2VLForConditionalGeneration")(config).eval()
    if family == "qwen3_vl":
        rope = {
            "rope_type": "default",
            "mrope_section": [4, 2, 2],
            "mrope_interleaved": True,
            "rope_theta": 1e3,
        }
        config = peer_class("Qwen3VLConfig")(
            text_config={**TEXT, "head_dim": 16, "rope_parameters": rope},
            vision_config={
                **VISION,
                "hidden_size": 32,
                "intermediate_size": 64,
                "out_hidden_size": 64,
                "deepstack_visual_indexes": [0],
            },
            **TOKENS,
        )
        return peer_class("Qwen3VLForConditionalGeneration")(config).eval()
    if family == "gemma4":  # sliding layers: default rope; full layers: proportional, their own head_dim
        config = peer_class("Gemma4TextConfig")(
            **TEXT,
            head_dim=16,
            global_head_dim=32,
            sliding_window=8,
            layer_types=["sliding_attention", "full_attention"],
        )
        return peer_class("Gemma4ForCausalLM")(config).eval()
    extra = {
        "llama": ("Llama", {}),
        "cohere": ("Cohere", {}),
        "cohere2": ("Cohere2", {"sliding_window": 8}),
        "gpt_oss": ("GptOss", {"num_local_experts": 4, "num_experts_per_tok": 2, "head_dim": 16}),
        "llama4": ("Llama4", {"head_dim": 16, "num_local_experts": 2, "intermediate_size_mlp": 96}),
        "deepseek_v2": (
            "DeepseekV2",
            {
                "kv_lora_rank": 16,
                "q_lora_rank": 16,
                "qk_rope_head_dim": 8,
                "qk_nope_head_dim": 8,
                "v_head_dim": 16,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "first_k_dense_replace": 1,
            },
        ),
    }
    prefix, options = extra[family]
    config_name = "Llama4TextConfig" if family == "llama4" else f"{prefix}Config"
    return peer_class(f"{prefix}ForCausalLM")(peer_class(config_name)(**TEXT, **options)).eval()


FAMILIES = [
    "llama",
    "cohere",
    "cohere2",
    "gpt_oss",
    "llama4",
    "deepseek_v2",
    "gemma4",
    "qwen2_vl",
    "qwen3_vl",
]
EXPECTED_FORM = {"cohere": "adjacent", "cohere2": "adjacent", "gpt_oss": "pairs", "llama4": "complex"}
EXPECTED_FORM["deepseek_v2"] = "complex"


def logits(model: torch.nn.Module, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, position_ids=positions).logits


def position_sets(family: str, ids: torch.Tensor) -> list[torch.Tensor]:
    """Near and far positions; for M-RoPE, [3, b, s] with distinct time/height/width coordinates."""
    b, s = ids.shape
    sets = [torch.arange(start, start + s).expand(b, s) for start in (0, 60, 5000)]
    if family in ("qwen2_vl", "qwen3_vl"):
        sets = [torch.stack([p, p // 2 + 3, (p * 3) % 17]) for p in sets]
    return sets


@pytest.mark.parametrize("family", FAMILIES)
def test_swap_gives_the_models_own_logits_in_every_family(family):
    model = build(family)
    ids = torch.randint(0, 90, (2, 24), generator=torch.Generator().manual_seed(1))
    positions = position_sets(family, ids)
    theirs = [logits(model, ids, p) for p in positions]
    swapped = swap_rotary(model)
    assert swapped
    forms = {getattr(model.get_submodule(name), "form", None) for name in swapped}
    assert forms == {EXPECTED_FORM.get(family, "half_split")}
    ours = [logits(model, ids, p) for p in positions]
    for near_or_far, (a, b) in enumerate(zip(theirs, ours)):
        # float32 angles of transformers differ from float64 ones by t·2^-24 rad: ~3e-4 at t = 5000
        tolerance = 1e-4 if near_or_far < 2 else 2e-3
        assert (a - b).abs().max() < tolerance * a.abs().max(), near_or_far
    # the positions matter to these models: shuffling them changes the logits
    assert not torch.allclose(logits(model, ids, positions[0].flip(-1)), ours[0], atol=1e-4)


def test_qwen_vision_rotary_is_swapped_for_an_axial_one_that_matches_on_image_grids():
    model = build("qwen2_vl")
    vision = model.model.visual.rotary_pos_emb
    grid = torch.stack(torch.meshgrid(torch.arange(6), torch.arange(9), indexing="ij"), dim=-1).reshape(-1, 2)
    x = torch.zeros(1)
    cos, sin = vision(x, grid)
    swap_rotary(model)
    ours = model.model.visual.rotary_pos_emb
    assert isinstance(ours, HFRotary) and ours.axes_last
    our_cos, our_sin = ours(x, grid)
    assert our_cos.shape == cos.shape
    assert (our_cos - cos).abs().max() < 1e-6 and (our_sin - sin).abs().max() < 1e-6


class ClampedRotary(torch.nn.Module):
    """A rotary with a classic bug: positions clamped to the trained context (equal up to it, wrong after)."""

    def __init__(self, original: torch.nn.Module) -> None:
        super().__init__()
        self.original, self.config = original, original.config

    def forward(self, x, position_ids):
        return self.original(x, position_ids.clamp(max=self.config.max_position_embeddings - 1))


def test_a_rotary_that_differs_only_far_away_is_refused_and_the_model_is_left_alone():
    model = build("llama")
    original = model.model.rotary_emb
    model.model.rotary_emb = ClampedRotary(original)
    type(model.model.rotary_emb).__name__ = "ClampedRotaryEmbedding"  # recognised as a rotary module
    try:
        with pytest.raises(RotaryMismatch) as refusal:
            swap_rotary(model)
    finally:
        type(model.model.rotary_emb).__name__ = "ClampedRotary"
    message = str(refusal.value)
    assert "LlamaForCausalLM" in message and "model.rotary_emb" in message
    assert "first at position 64," in message  # max_position_embeddings = 64: the first clamped one
    assert isinstance(model.model.rotary_emb, ClampedRotary)  # nothing replaced


class EarlySwitchRotary(ClampedRotary):
    """LongRoPE switching to its long factors one position early (a call ending at L − 1 gets them)."""

    def forward(self, x, position_ids):
        original = self.config.rope_parameters["original_max_position_embeddings"]
        if int(position_ids.max()) + 1 == original:  # transformers switches only beyond: seq_len > original
            extended = torch.cat([position_ids, torch.full_like(position_ids[..., :1], original)], dim=-1)
            cos, sin = self.original(x, extended)
            return cos[..., :-1, :], sin[..., :-1, :]
        return self.original(x, position_ids)


def test_longropes_switch_off_by_one_is_refused():
    from test_integrations_hf import ROPE_PARAMETERS, tiny_llama

    model = tiny_llama(ROPE_PARAMETERS["longrope"])  # original_max_position_embeddings = 32
    assert swap_rotary(tiny_llama(ROPE_PARAMETERS["longrope"])) == ["model.rotary_emb"]
    model.model.rotary_emb = EarlySwitchRotary(model.model.rotary_emb)
    type(model.model.rotary_emb).__name__ = "EarlySwitchRotaryEmbedding"
    try:
        with pytest.raises(RotaryMismatch, match=r"LlamaForCausalLM.*differ first at position"):
            swap_rotary(model)
    finally:
        type(model.model.rotary_emb).__name__ = "EarlySwitchRotary"


def test_cohere_tables_in_the_half_split_form_would_move_the_logits():
    """Why the swap must verify: Cohere's interleaved tables replaced by half-split ones (the old swap)
    change the logits; the verified swap installs the adjacent form instead (test above)."""
    model = build("cohere")
    for parameter in model.parameters():  # larger weights than the default init, so that rotations matter
        parameter.data.mul_(10.0)
    ids = torch.randint(0, 90, (2, 24), generator=torch.Generator().manual_seed(1))
    p = torch.arange(24).expand(2, 24)
    before = logits(model, ids, p)
    model.model.rotary_emb = HFRotary(RotaryEmbedding.from_hf(model.config))
    wrong = logits(model, ids, p)
    assert (wrong - before).abs().max() > 0.05 * before.abs().max()


def test_hf_rotary_refuses_mrope_position_ids_for_a_1d_rope():
    rope = HFRotary(RotaryEmbedding(16))
    with pytest.raises(ValueError, match=r"position_ids must be \[b, s\].*\[3, 2, 5\].*M-RoPE"):
        rope(torch.zeros(1), torch.zeros(3, 2, 5, dtype=torch.long))


def test_an_unknown_rope_type_is_refused_at_swap_time_naming_it():
    model = build("llama")
    model.model.rotary_emb.config.rope_parameters = {"rope_type": "quadratic", "rope_theta": 1e4}
    with pytest.raises(RotaryMismatch, match=r"LlamaForCausalLM.*posenc cannot read its config.*'quadratic'"):
        swap_rotary(model)


def llama4_with_rope_and_nope_layers() -> torch.nn.Module:
    """Llama 4 whose layers 1 and 3 use no rope (``no_rope_layers`` flags 1 = rotates, as transformers
    reads them), with attention temperature tuning in those layers from position 8 on, chunked attention
    (chunks of 16) in the rope layers and llama3 frequency scaling."""
    torch.manual_seed(0)
    config = peer_class("Llama4TextConfig")(
        **{**TEXT, "num_hidden_layers": 4},
        head_dim=16,
        num_local_experts=2,
        intermediate_size_mlp=96,
        no_rope_layers=[1, 0, 1, 0],
        attention_chunk_size=16,
        attn_temperature_tuning=True,
        floor_scale=8,
        attn_scale=0.5,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 5e5,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        },
    )
    model = peer_class("Llama4ForCausalLM")(config).eval()
    for parameter in model.parameters():  # larger weights than the default init, so that rotations matter
        parameter.data.mul_(4.0)
    return model


def hidden_states(model: torch.nn.Module, ids: torch.Tensor, positions: torch.Tensor) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(input_ids=ids, position_ids=positions, output_hidden_states=True)
    return [*out.hidden_states, out.logits]


def test_llama4_swap_keeps_every_layers_output_and_leaves_the_nope_layers_alone():
    model = llama4_with_rope_and_nope_layers()
    assert [layer.self_attn.use_rope for layer in model.model.layers] == [1, 0, 1, 0]
    ids = torch.randint(0, 90, (2, 40), generator=torch.Generator().manual_seed(1))
    positions = [torch.arange(start, start + 40).expand(2, 40) for start in (0, 60, 5000)]
    theirs = [hidden_states(model, ids, p) for p in positions]
    attention = [dict(layer.self_attn.named_modules()) for layer in model.model.layers]
    assert swap_rotary(model) == ["model.rotary_emb"]
    assert [dict(layer.self_attn.named_modules()) for layer in model.model.layers] == attention
    ours = [hidden_states(model, ids, p) for p in positions]
    for near_or_far, (a_all, b_all) in enumerate(zip(theirs, ours, strict=True)):
        tolerance = 1e-4 if near_or_far < 2 else 2e-3  # float32 angles of transformers: ~3e-4 rad at t = 5000
        for layer, (a, b) in enumerate(zip(a_all, b_all, strict=True)):
            assert (a - b).abs().max() <= tolerance * a.abs().max(), (near_or_far, layer)
    # the positions matter to this model: shuffling them changes the logits
    assert not torch.allclose(hidden_states(model, ids, positions[0].flip(-1))[-1], ours[0][-1], atol=1e-3)


def test_llama4_rope_layers_are_read_as_transformers_reads_them():
    model = llama4_with_rope_and_nope_layers()
    used = [bool(layer.self_attn.use_rope) for layer in model.model.layers]
    assert hf_rope_layers(model.config) == hf_rope_layers(model.config.to_dict()) == used == [1, 0, 1, 0]
    default = peer_class("Llama4TextConfig")(**{**TEXT, "num_hidden_layers": 8}, head_dim=16)
    assert hf_rope_layers(default) == [True, True, True, False] * 2  # every 4th layer: no rope
    assert hf_rope_layers(
        {"model_type": "llama4_text", "num_hidden_layers": 3, "no_rope_layer_interval": 3}
    ) == [True, True, False]
    assert hf_rope_layers(build("llama").config) is None
    with pytest.raises(ValueError, match=r"no_rope_layers must be a list of num_hidden_layers=4 flags 0/1"):
        hf_rope_layers({**model.config.to_dict(), "no_rope_layers": [1, 0, 1]})
    with pytest.raises(ValueError, match=r"no_rope_layer_interval must be a positive int, got 0"):
        hf_rope_layers({"model_type": "llama4_text", "num_hidden_layers": 3, "no_rope_layer_interval": 0})
    # Llama 4's layer types name attention masks, not ropes: asking for one is refused, naming the parameter
    assert model.config.layer_types == ["chunked_attention", "full_attention"] * 2
    with pytest.raises(ValueError, match=r"layer_type must name one of the per-layer rope parameters \[\]"):
        RotaryEmbedding.from_hf(model.config, layer_type="chunked_attention")


def test_llama4_with_its_vision_rope_is_refused_naming_the_fixed_table():
    vision = {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "image_size": 16,
        "patch_size": 4,
        "vision_output_dim": 64,
        "projector_input_dim": 64,
        "projector_output_dim": 64,
    }
    text = {**TEXT, "head_dim": 16, "num_local_experts": 2, "intermediate_size_mlp": 96}
    config = peer_class("Llama4Config")(text_config=text, vision_config=vision, image_token_index=95)
    model = peer_class("Llama4ForConditionalGeneration")(config).eval()
    text_rope = model.language_model.model.rotary_emb
    with pytest.raises(RotaryMismatch) as refusal:
        swap_rotary(model)
    message = str(refusal.value)
    assert "Llama4ForConditionalGeneration" in message and "vision_model.rotary_embedding" in message
    assert "its forward takes no position ids" in message and "language_model" not in message
    assert model.language_model.model.rotary_emb is text_rope  # nothing replaced


def assert_same_outputs(model: torch.nn.Module, run) -> None:
    """``run(model, positions)`` (a list of tensors) before and after the swap, near and far: equal within
    transformers' float32 angle round-off (t·2^-24 rad), and the positions must matter to the model."""
    ids = torch.randint(0, 90, (2, 24), generator=torch.Generator().manual_seed(1))
    positions = [torch.arange(start, start + 24).expand(2, 24) for start in (0, 60, 5000)]
    theirs = [run(model, ids, p) for p in positions]
    assert swap_rotary(model)
    ours = [run(model, ids, p) for p in positions]
    for near_or_far, (a_all, b_all) in enumerate(zip(theirs, ours, strict=True)):
        tolerance = 1e-4 if near_or_far < 2 else 2e-3
        for layer, (a, b) in enumerate(zip(a_all, b_all, strict=True)):
            assert (a - b).abs().max() <= tolerance * a.abs().max(), (near_or_far, layer)
    assert not torch.allclose(run(model, ids, positions[0].flip(-1))[-1], ours[0][-1], atol=1e-4)


def gemma3_local_and_global() -> torch.nn.Module:
    """Gemma 3 with its two ropes: sliding layers at base 10^4, full layers at base 10^6 with linear ×8."""
    torch.manual_seed(0)
    config = peer_class("Gemma3TextConfig")(
        **TEXT,
        head_dim=16,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        },
    )
    model = peer_class("Gemma3ForCausalLM")(config).eval()
    for parameter in model.parameters():  # larger weights than the default init, so that rotations matter
        parameter.data.mul_(4.0)
    return model


def test_gemma3_local_and_global_ropes_are_the_specs_and_give_the_models_own_outputs():
    model = gemma3_local_and_global()
    spec = {g.layer_type: g.modules[0] for g in hf_rope_spec(model.config)}
    assert_same_outputs(model, hidden_states)
    ropes = model.model.rotary_emb.ropes
    assert set(ropes) == {"sliding_attention", "full_attention"}
    for layer_type, rope in ropes.items():  # each layer type's rope is built from its spec entry
        assert (rope.base, rope.scaling, rope.rotary_dim) == (
            spec[layer_type].base,
            None if spec[layer_type].rope_type == "default" else spec[layer_type].rope_type,
            spec[layer_type].rotary_dim,
        )
    ratio = ropes["full_attention"].frequencies / ropes["sliding_attention"].frequencies
    expected = torch.tensor([(1e4 / 1e6) ** (2 * i / 16) / 8 for i in range(8)], dtype=torch.float64)
    assert torch.allclose(ratio, expected, rtol=1e-12)


def smollm3_with_nope_layers() -> torch.nn.Module:
    """SmolLM3 with a NoPE layer every 2nd layer (``no_rope_layer_interval``: layer 1 has no rope)."""
    torch.manual_seed(0)
    config = peer_class("SmolLM3Config")(
        **{**TEXT, "num_hidden_layers": 4}, no_rope_layer_interval=2, pad_token_id=0
    )
    model = peer_class("SmolLM3ForCausalLM")(config).eval()
    for parameter in model.parameters():
        parameter.data.mul_(4.0)
    return model


def test_smollm3_nope_pattern_is_the_specs_and_the_swap_keeps_every_layers_output():
    model = smollm3_with_nope_layers()
    groups = {g.layers: g.modules[0].rope for g in hf_rope_spec(model.config)}
    assert groups == {(0, 2): True, (1, 3): False}
    assert [bool(layer.self_attn.use_rope) for layer in model.model.layers] == [True, False, True, False]
    assert_same_outputs(model, hidden_states)


def test_an_attention_whose_rope_flag_disagrees_with_the_spec_is_refused_naming_the_layer():
    """NoPE flags read with the opposite polarity (1 = NoPE): the spec and the model would rotate other layers."""
    model = smollm3_with_nope_layers()
    original = model.model.rotary_emb
    model.model.layers[1].self_attn.use_rope = 1  # the spec says layer 1 is NoPE
    with pytest.raises(RotaryMismatch) as refusal:
        swap_rotary(model)
    message = str(refusal.value)
    assert "model.layers.1.self_attn (layer 1) has use_rope=1" in message and "NoPE" in message
    assert "layers.0" not in message and "layers.3" not in message
    assert model.model.rotary_emb is original  # nothing replaced


@pytest.mark.parametrize(("family", "rotary_dim"), [("Phi", 8), ("Glm", 8), ("StableLm", 4)])
def test_partial_rotary_dims_are_the_specs_and_give_the_models_own_logits(family, rotary_dim):
    """Phi and GLM rotate half of each 16-dim head (GLM in adjacent pairs), StableLM a quarter."""
    torch.manual_seed(0)
    factor = {"Phi": 0.5, "Glm": 0.5, "StableLm": 0.25}[family]
    config = peer_class(f"{family}Config")(**TEXT, head_dim=16, partial_rotary_factor=factor, pad_token_id=0)
    model = peer_class(f"{family}ForCausalLM")(config).eval()
    for parameter in model.parameters():
        parameter.data.mul_(4.0)
    (group,) = hf_rope_spec(model.config)
    assert group.modules[0].rotary_dim == rotary_dim
    assert_same_outputs(model, lambda m, ids, p: [logits(m, ids, p)])
    (swapped,) = [m for m in model.modules() if isinstance(m, HFRotary)]
    assert swapped.rope.rotary_dim == rotary_dim and swapped.rope.head_dim == 16


def test_a_spec_attention_factor_the_rotary_does_not_reproduce_is_refused():
    from test_integrations_hf import ROPE_PARAMETERS, tiny_llama

    (group,) = hf_rope_spec(tiny_llama(ROPE_PARAMETERS["yarn"]).config)
    module = group.modules[0]
    rope = rotary_from_spec(module, layout="half_split")
    assert (
        rope.attention_factor == pytest.approx(module.attention_factor, rel=1e-12)
        and rope.attention_factor > 1
    )
    with pytest.raises(ValueError, match=r"attention factor .* the spec 2\.5"):
        rotary_from_spec(dataclasses.replace(module, attention_factor=2.5), layout="half_split")
    with pytest.raises(ValueError, match=r"'attention' is NoPE"):
        rotary_from_spec(dataclasses.replace(module, rope=False), layout="half_split")


def deepseek_v32_with_indexer() -> torch.nn.Module:
    """DeepSeek-V3.2: MLA rotating adjacent pairs and a sparse indexer (top 8 keys) rotating half-split ones."""
    torch.manual_seed(0)
    config = peer_class("DeepseekV32Config")(
        **{**TEXT, "num_key_value_heads": 4},
        pad_token_id=0,
        kv_lora_rank=16,
        q_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=8,
        v_head_dim=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        first_k_dense_replace=1,
        n_group=1,
        topk_group=1,
        index_topk=8,
        index_head_dim=16,
        index_n_heads=2,
    )
    model = peer_class("DeepseekV32ForCausalLM")(config).eval()
    for parameter in model.parameters():
        parameter.data.mul_(4.0)
    return model


def test_deepseek_v32_indexer_and_mla_are_served_from_the_specs_one_table():
    model = deepseek_v32_with_indexer()
    (group,) = hf_rope_spec(model.config)
    assert [(m.module, m.layout, m.rotary_dim) for m in group.modules] == [
        ("attention", "adjacent", 8),
        ("indexer", "half_split", 8),
    ]
    assert_same_outputs(model, lambda m, ids, p: [logits(m, ids, p)])


def test_sub_modules_of_one_layer_type_with_different_frequencies_are_refused(monkeypatch):
    """transformers' one rotary module cannot serve an indexer rotating at another base than its MLA."""
    import posenc.integrations.hf as hf

    model = deepseek_v32_with_indexer()
    (group,) = hf_rope_spec(model.config)
    attention, indexer = group.modules
    other = dataclasses.replace(group, modules=(attention, dataclasses.replace(indexer, base=5e5)))
    monkeypatch.setattr(hf, "hf_rope_spec", lambda config: [other])
    with pytest.raises(RotaryMismatch, match=r"layers 0-1 \(indexer\) rotate with .*500000\.0.*10000\.0"):
        swap_rotary(model)


def test_a_nope_model_with_an_unreadable_config_is_refused_as_unreadable_not_crashed():
    model = smollm3_with_nope_layers()
    model.config.rope_parameters = {"rope_type": "quadratic", "rope_theta": 1e4}
    with pytest.raises(
        RotaryMismatch, match=r"SmolLM3ForCausalLM.*posenc cannot read its config.*'quadratic'"
    ):
        swap_rotary(model)
