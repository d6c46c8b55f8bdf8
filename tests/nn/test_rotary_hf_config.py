"""from_hf refuses config values it would otherwise have to guess at (a fractional head_dim, a zero
original context, a rope type it does not know, an M-RoPE config read as 1-D)."""

from __future__ import annotations

import numpy as np
import pytest

from posenc.nn import RotaryEmbedding
from posenc.nn.multiaxis import MultiAxisRotary


@pytest.mark.parametrize("head_dim", [64.5, 0, -8, True, "64"])
def test_a_head_dim_that_is_not_a_positive_integer_is_refused(head_dim):
    with pytest.raises(ValueError, match=r"config head_dim must be a positive integer, got"):
        RotaryEmbedding.from_hf({"head_dim": head_dim, "rope_theta": 1e4})


def test_an_integral_float_head_dim_is_read_as_that_integer():
    assert RotaryEmbedding.from_hf({"head_dim": 64.0}).head_dim == 64


@pytest.mark.parametrize("name", ["llama3", "yarn", "longrope"])
@pytest.mark.parametrize("where", ["parameters", "config"])
def test_a_zero_original_context_is_refused_not_replaced(name, where):
    parameters = {
        "llama3": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
        "yarn": {"factor": 4.0},
        "longrope": {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4},
    }[name]
    config = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": name, **parameters},
    }
    if where == "parameters":
        config["rope_parameters"]["original_max_position_embeddings"] = 0
    else:
        config["original_max_position_embeddings"] = 0
    with pytest.raises(
        ValueError, match=r"original_max_position_embeddings must be a positive number.*got 0"
    ):
        RotaryEmbedding.from_hf(config)


def test_an_absent_original_context_still_means_max_position_embeddings():
    config = {
        "head_dim": 8,
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "yarn", "factor": 4.0},
    }
    assert RotaryEmbedding.from_hf(config).scaling_parameters["original_max_position_embeddings"] == 4096


def test_proportional_rope_turns_the_first_pairs_over_the_whole_head():
    """Gemma 4's ``proportional``: ``ρ^(−2i/d_h)/f`` for ``i < ⌊p·d_h/2⌋``, the other pairs still."""
    rope = RotaryEmbedding.from_hf(
        {
            "head_dim": 32,
            "rope_parameters": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "factor": 2.0,
                "rope_theta": 1e6,
            },
        }
    )
    assert rope.rotary_dim == 32
    theta = 1e6 ** (-np.arange(0, 32, 2) / 32) / 2.0
    theta[4:] = 0.0
    np.testing.assert_allclose(rope.frequencies.numpy(), theta, rtol=1e-14, atol=0)


def test_an_unknown_rope_type_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"config rope_type must be 'default' or one of .*got 'quadratic'"):
        RotaryEmbedding.from_hf({"head_dim": 8, "rope_parameters": {"rope_type": "quadratic"}})


def test_an_mrope_config_is_refused_as_1d_and_read_by_multiaxis():
    config = {"head_dim": 16, "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}}
    with pytest.raises(ValueError, match=r"M-RoPE.*MultiAxisRotary.from_hf"):
        RotaryEmbedding.from_hf(config)
    assert MultiAxisRotary.from_hf(config).n_axes == 3
    with pytest.raises(ValueError, match=r"no mrope_section"):
        MultiAxisRotary.from_hf({"head_dim": 16})
