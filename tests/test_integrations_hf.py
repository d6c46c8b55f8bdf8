"""posenc.integrations.hf: a tiny randomly initialised LlamaForCausalLM keeps its logits with posenc's rotary."""

from __future__ import annotations

import copy

import pytest
import torch
from peers import import_peer

from posenc.integrations.hf import HFRotary, swap_rotary
from posenc.nn import RotaryEmbedding

transformers = import_peer("transformers", "transformers is the client these tests run")
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

HEAD = 16
ROPE_PARAMETERS = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32},
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


def tiny_llama(parameters: dict) -> LlamaForCausalLM:
    """Two layers, 4 heads of 16, random weights: no download."""
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=4 * HEAD,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        num_hidden_layers=2,
        vocab_size=97,
        max_position_embeddings=64,
        rope_parameters={**parameters, "rope_theta": 500.0},
        initializer_range=0.2,
    )
    return LlamaForCausalLM(config).eval()


def logits(model, ids: torch.Tensor, start: int) -> torch.Tensor:
    positions = torch.arange(start, start + ids.shape[1]).expand_as(ids)
    with torch.no_grad():
        return model(input_ids=ids, position_ids=positions).logits


@pytest.mark.parametrize("name", list(ROPE_PARAMETERS))
def test_swapped_llama_gives_the_same_logits_for_every_rope_type(name):
    model = tiny_llama(ROPE_PARAMETERS[name])
    ids = torch.randint(0, 97, (2, 40), generator=torch.Generator().manual_seed(1))
    theirs = [
        logits(model, ids, start) for start in (0, 60, 0)
    ]  # inside, beyond (dynamic/longrope switch), back
    assert swap_rotary(model) == ["model.rotary_emb"]
    assert isinstance(model.model.rotary_emb, HFRotary)
    ours = [logits(model, ids, start) for start in (0, 60, 0)]
    for a, b in zip(theirs, ours):
        assert (a - b).abs().max() < 1e-4 * a.abs().max()
    with torch.no_grad():  # relative distances matter to this model: doubling them changes the logits
        stretched = model(input_ids=ids, position_ids=2 * torch.arange(40).expand_as(ids)).logits
    assert not torch.allclose(stretched, ours[0], atol=1e-3)


class Float64Rotary(torch.nn.Module):
    """The default rope written out here with float64 angles: the reference."""

    def forward(self, x, position_ids):
        inv_freq = 500.0 ** (-torch.arange(0, HEAD, 2, dtype=torch.float64) / HEAD)
        angles = position_ids.to(torch.float64)[..., None] * inv_freq
        emb = torch.cat([angles, angles], dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def far_position_errors(start: int) -> tuple[float, float]:
    """Max |logit error| of transformers' float32 model and of the swapped one, against float64."""
    model = tiny_llama(ROPE_PARAMETERS["default"])
    reference = copy.deepcopy(model).double()
    reference.model.rotary_emb = Float64Rotary()
    ids = torch.randint(0, 97, (1, 32), generator=torch.Generator().manual_seed(2))
    exact = logits(reference, ids, start)
    theirs = logits(model, ids, start).double()
    swap_rotary(model)
    ours = logits(model, ids, start).double()
    return float((theirs - exact).abs().max()), float((ours - exact).abs().max())


@pytest.mark.parametrize("start", [10**5, 10**6])
def test_at_far_positions_the_swapped_model_is_closer_to_float64(start):
    theirs, ours = far_position_errors(start)
    assert ours < 1e-4
    assert theirs > 10 * ours


def test_bad_use_is_refused():
    with pytest.raises(ValueError, match="no transformers rotary embedding"):
        swap_rotary(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="layout='half_split'"):
        HFRotary(RotaryEmbedding(8, layout="adjacent"))
    with pytest.raises(TypeError, match="rope must be a posenc RotaryEmbedding"):
        HFRotary(torch.nn.Identity())


def test_swap_covers_gpt_neox_partial_rotary_and_gemma3_layer_types():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(3)
    neox = GPTNeoXForCausalLM(
        GPTNeoXConfig(
            hidden_size=64,
            num_attention_heads=4,
            intermediate_size=96,
            num_hidden_layers=2,
            vocab_size=97,
            rotary_pct=0.5,
            max_position_embeddings=64,
        )
    ).eval()
    gemma = Gemma3ForCausalLM(
        Gemma3TextConfig(
            hidden_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=HEAD,
            intermediate_size=96,
            num_hidden_layers=6,
            vocab_size=97,
            max_position_embeddings=128,
            sliding_window=8,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            },
        )
    ).eval()
    ids = torch.randint(0, 97, (2, 30), generator=torch.Generator().manual_seed(4))
    for model in (neox, gemma):
        before = logits(model, ids, 5)
        assert len(swap_rotary(model)) == 1
        after = logits(model, ids, 5)
        assert (after - before).abs().max() < 1e-4 * before.abs().max()


def test_gemma3_whose_layers_are_all_sliding_is_swapped():
    """Six layers with a sliding pattern of 10: no full-attention layer, so transformers builds only the
    sliding rope (asking it for the full one raised "Layer type 'full_attention' not found")."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(4)
    config = Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=HEAD,
        intermediate_size=96,
        num_hidden_layers=3,
        vocab_size=97,
        sliding_window_pattern=10,
        max_position_embeddings=64,
    )
    assert set(config.layer_types) == {"sliding_attention"}
    model = Gemma3ForCausalLM(config).eval()
    ids = torch.randint(0, 97, (1, 12))
    before = logits(model, ids, 0)
    assert swap_rotary(model) == ["model.rotary_emb"]
    torch.testing.assert_close(logits(model, ids, 0), before, rtol=0, atol=2e-5)


def test_a_dynamic_llama_that_ran_past_its_context_is_swapped_in_its_state():
    """transformers' dynamic NTK keeps the longest length seen: after a 200-token call a 64-token call
    (= L, not below it) still uses the grown base. The swap takes that state over."""
    model = tiny_llama(ROPE_PARAMETERS["dynamic"])
    twin = copy.deepcopy(model)
    long_ids = torch.randint(0, 97, (1, 200))
    with torch.no_grad():
        model(input_ids=long_ids)
        twin(input_ids=long_ids)
    assert swap_rotary(model) == ["model.rotary_emb"]
    ids = torch.randint(0, 97, (1, 64))
    for start in (0, 0):  # a call ending at L keeps the grown base; the model and its twin agree throughout
        torch.testing.assert_close(logits(model, ids, start), logits(twin, ids, start), rtol=0, atol=2e-5)


def test_a_llama_cast_to_bf16_is_refused_saying_why_and_swaps_when_cast_after():
    model = tiny_llama(ROPE_PARAMETERS["default"])
    cast = copy.deepcopy(model).to(torch.bfloat16)
    with pytest.raises(
        ValueError,
        match=r"inv_freq buffer is torch.bfloat16.*rounded to 8 significant bits.*swap before casting",
    ):
        swap_rotary(cast)
    reference = copy.deepcopy(model).to(torch.bfloat16)
    swap_rotary(model)
    model.to(torch.bfloat16)
    ids = torch.randint(0, 97, (1, 16))
    exact = logits(copy.deepcopy(reference).float(), ids, 0)
    assert (logits(model, ids, 0).float() - exact).abs().max() <= 2 * (
        logits(reference, ids, 0).float() - exact
    ).abs().max() + 1e-2


def test_a_refusal_from_an_unreadable_config_leads_with_the_cause():
    model = tiny_llama(ROPE_PARAMETERS["default"])
    model.model.rotary_emb.config.rope_parameters["beta_fastest"] = 1.0
    with pytest.raises(
        ValueError,
        match=r"^swap_rotary refused LlamaForCausalLM: model.rotary_emb's config could not be read.*'beta_fastest'",
    ):
        swap_rotary(model)
