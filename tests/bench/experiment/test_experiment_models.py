"""TransformerClassifier with every registered encoding; scale policies and the model they build."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from posenc import registry
from posenc_bench.experiment.scale import build_classifier, encoding_options, mean_projected_norm
from posenc_bench.models import TransformerClassifier


@pytest.mark.parametrize("encoding", registry.names())
def test_every_registered_encoding_classifies_and_trains(encoding):
    torch.manual_seed(0)
    model = TransformerClassifier(3, 16, 2, 1, encoding=encoding, max_len=12)
    x = torch.randn(5, 12, 3)
    logits = model(x)
    assert logits.shape == (5,) and logits.dtype == torch.float32 and torch.isfinite(logits).all()
    logits.sum().backward()
    assert model.input_projection.weight.grad is not None


def test_positions_matter_exactly_when_an_encoding_is_used():
    x = torch.randn(4, 10, 3)
    perm = torch.randperm(10)
    for encoding, invariant in (("none", True), ("sinusoidal", False), ("rope", False), ("alibi", False)):
        torch.manual_seed(0)
        model = TransformerClassifier(3, 16, 2, 2, encoding=encoding, dropout=0.0, max_len=10).eval()
        same = torch.allclose(model(x), model(x[:, perm]), atol=1e-5)
        assert same is invariant, encoding


def test_bad_input_shape_names_the_expected_shape():
    model = TransformerClassifier(3, 16, 2, 1, max_len=8)
    with pytest.raises(ValueError, match="n_features=3"):
        model(torch.randn(2, 8, 4))


def test_scale_policy_options():
    assert encoding_options("sinusoidal", "native") == {}
    assert encoding_options("dft", "unit") == {"unit_norm": True}
    assert encoding_options("dft", "learned") == {"unit_norm": True, "learn_scale": True, "scale": 1.0}
    assert encoding_options("learned", "matched", matched_norm=2.5) == {"unit_norm": True, "scale": 2.5}
    with pytest.raises(ValueError, match="additive.*'rope'.*native"):
        encoding_options("rope", "matched", matched_norm=1.0)
    with pytest.raises(ValueError, match="matched_norm"):
        encoding_options("dft", "matched")


@pytest.mark.parametrize("encoding", ["sinusoidal", "dft", "learned"])
def test_matched_scale_rows_have_the_mean_projected_input_norm(encoding, tiny_config):
    X = np.random.default_rng(0).normal(size=(40, 16, 7)).astype(np.float32)
    config = dataclasses.replace(tiny_config, encoding=encoding, scale="matched", seed=3)
    model, options = build_classifier(config, 7, X)
    W = model.input_projection.weight.detach().double().numpy()
    b = model.input_projection.bias.detach().double().numpy()
    expected = np.linalg.norm(X.astype(np.float64) @ W.T + b, axis=-1).mean()  # by hand, in float64
    assert options["scale"] == pytest.approx(expected, rel=1e-5)
    assert mean_projected_norm(model, X) == pytest.approx(expected, rel=1e-5)
    norms = model.encoder.encoding.table(16).norm(dim=-1)
    np.testing.assert_allclose(norms.detach().numpy(), expected, rtol=1e-5)


def test_unit_and_learned_scale_build_unit_rows_and_a_trainable_scalar(tiny_config):
    X = np.zeros((4, 16, 7), dtype=np.float32)
    unit, _ = build_classifier(dataclasses.replace(tiny_config, encoding="sinusoidal", scale="unit"), 7, X)
    np.testing.assert_allclose(unit.encoder.encoding.table(16).norm(dim=-1).detach().numpy(), 1.0, rtol=1e-12)
    learned, _ = build_classifier(dataclasses.replace(tiny_config, encoding="dft", scale="learned"), 7, X)
    before = sum(p.numel() for p in unit.encoder.encoding.parameters() if p.requires_grad)
    after = sum(p.numel() for p in learned.encoder.encoding.parameters() if p.requires_grad)
    assert (before, after) == (0, 1)


def test_same_seed_same_initial_projection_whatever_the_encoding(tiny_config):
    X = np.zeros((2, 16, 7), dtype=np.float32)
    a, _ = build_classifier(dataclasses.replace(tiny_config, encoding="none"), 7, X)
    b, _ = build_classifier(dataclasses.replace(tiny_config, encoding="dft", scale="matched"), 7, X)
    assert torch.equal(a.input_projection.weight, b.input_projection.weight)
