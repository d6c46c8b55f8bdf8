"""SpatioTemporalClassifier against a loop-per-sensor / per-window reference written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from posenc import registry
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.scale import build_classifier, mean_projected_norm
from posenc_bench.models import SpatioTemporalClassifier

B, W, L, S, D = 3, 6, 16, 4, 8  # batch, windows, steps per window, sensors, width (channels 4 × L/8 = 2)


def model(encoding="none", **options) -> SpatioTemporalClassifier:
    torch.manual_seed(0)
    kw = {"n_windows": W, "window_length": L, "d_model": D, "n_heads": 2, "encoding": encoding, **options}
    return SpatioTemporalClassifier(S, **kw).double().eval()


def reference_features(m: SpatioTemporalClassifier, x: torch.Tensor) -> torch.Tensor:
    """One small CNN per sensor, applied window by window: [b, W, S, D]."""
    convs = [m.cnn[i] for i in (0, 4, 8)]
    norms = [m.cnn[i] for i in (3, 7, 11)]
    out = torch.empty(x.shape[0], W, S, D, dtype=x.dtype)
    for f in range(S):
        for w in range(W):
            h = x[:, w * L : (w + 1) * L, f][:, None, :]  # [b, 1, L]
            for conv, norm in zip(convs, norms):
                per = conv.out_channels // S
                rows = slice(f * per, (f + 1) * per)
                h = F.conv1d(h, conv.weight[rows], conv.bias[rows], padding=2)
                h = F.max_pool1d(F.relu(h), 2)
                h = F.batch_norm(
                    h,
                    norm.running_mean[rows],
                    norm.running_var[rows],
                    norm.weight[rows],
                    norm.bias[rows],
                    eps=norm.eps,
                )
            out[:, w, f] = h.reshape(x.shape[0], -1)  # channel-major flatten
    return out


def reference_forward(m: SpatioTemporalClassifier, x: torch.Tensor) -> torch.Tensor:
    """Temporal attention per sensor and spatial attention per window, each called on its own sequence."""
    h = reference_features(m, x)
    if m.family == "input":
        h = torch.stack([m.encoding.forward(h[:, :, f]) for f in range(S)], dim=2)
    z = torch.empty_like(h)
    for f in range(S):
        seq = h[:, :, f]
        z[:, :, f] = m.temporal_norm(seq + m.temporal(seq))  # the encoding, if rotary or bias, is bound to it
    for w in range(W):
        seq = h[:, w]
        z[:, w] += m.spatial_norm(seq + m.spatial(seq))
    z = m.out_norm(z + m.feedforward(z))
    return m.head(z.mean(dim=1).reshape(x.shape[0], S * D)).squeeze(-1)


def test_cnn_has_one_network_per_sensor():
    m = model()
    x = torch.randn(B, W * L, S, dtype=torch.float64)
    for block in (3, 7, 11):  # non-trivial running statistics
        m.cnn[block].running_mean.uniform_(-1, 1)
        m.cnn[block].running_var.uniform_(0.5, 2)
    torch.testing.assert_close(m.features(x), reference_features(m, x))


@pytest.mark.parametrize("encoding", ["none", "sinusoidal", "dft", "rope", "alibi", "t5"])
def test_batched_forward_equals_the_loop_reference(encoding):
    m = model(encoding)
    x = torch.randn(B, W * L, S, dtype=torch.float64)
    torch.testing.assert_close(m(x), reference_forward(m, x))


@pytest.mark.parametrize("encoding", registry.names())
def test_every_encoding_gives_finite_logits_and_gradients(encoding):
    torch.manual_seed(1)
    m = SpatioTemporalClassifier(S, n_windows=W, window_length=L, d_model=D, n_heads=2, encoding=encoding)
    logits = m(torch.randn(B, W * L, S))
    assert logits.shape == (B,) and torch.isfinite(logits).all()
    logits.sum().backward()
    for name in ("cnn.0.weight", "temporal.qkv.weight", "spatial.qkv.weight", "head.0.weight"):
        grad = dict(m.named_parameters())[name].grad
        assert grad is not None and grad.abs().sum() > 0, name


def test_order_of_windows_matters_only_with_an_encoding():
    x = torch.randn(B, W, L, S, dtype=torch.float64)
    shuffled = x[:, torch.roll(torch.arange(W), 2)]
    flat = lambda t: t.reshape(B, W * L, S)
    for encoding, invariant in (("none", True), ("sinusoidal", False), ("rope", False)):
        m = model(encoding)
        assert torch.allclose(m(flat(x)), m(flat(shuffled)), atol=1e-10) is invariant, encoding


def test_compiles_without_graph_breaks():
    m = model("sinusoidal").float()
    x = torch.randn(B, W * L, S)
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(x), m(x), rtol=1e-5, atol=1e-5)


def test_compiled_model_decays_the_dfstrans_table_like_eager():
    """The in-place decay survives torch.compile: same logits, same call count, same stored table."""
    eager, compiled = model("dfstrans_dft").float(), model("dfstrans_dft").float()
    fn = torch.compile(compiled, backend="aot_eager", fullgraph=True)
    x = torch.randn(B, W * L, S)
    for _ in range(3):
        torch.testing.assert_close(fn(x), eager(x), rtol=1e-5, atol=1e-5)
    assert int(compiled.encoding.calls) == int(eager.encoding.calls) == 3
    torch.testing.assert_close(compiled.encoding.stored, eager.encoding.stored)
    expected = math.sqrt(D / 2) * ((W - 2) * (2 / D) ** 1.5 + 2 * (1 / D) ** 1.5) / W
    assert compiled.encoding_row_norm() == pytest.approx(expected, rel=1e-5)


def test_paper_sizes_are_reachable():
    m = SpatioTemporalClassifier(
        20,
        n_windows=80,
        window_length=100,
        d_model=240,
        n_heads=10,
        dim_feedforward=2048,
        head_hidden=512,
        encoding="dfstrans_dft",
    )
    assert m.cnn[0].out_channels == 20 * 20  # 20 filters per sensor, 240 = 20 × ⌊100/8⌋
    assert m.head[0].in_features == 4800  # their dense1 input
    with torch.no_grad():
        assert m.eval()(torch.randn(1, 8000, 20)).shape == (1,)


def test_encoding_row_norm_reports_what_is_added():
    assert math.isnan(model("none").encoding_row_norm())
    assert math.isnan(model("rope").encoding_row_norm())
    assert model("sinusoidal").encoding_row_norm() == pytest.approx(math.sqrt(D / 2))
    m = model("dfstrans_dft")
    x = torch.randn(B, W * L, S, dtype=torch.float64)
    for n in (
        1,
        2,
        3,
    ):  # rows have norm sqrt(D/2) before scaling: middle ones shrink by sqrt(2/D), the ends by sqrt(1/D)
        m(x)
        expected = math.sqrt(D / 2) * ((W - 2) * (2 / D) ** (n / 2) + 2 * (1 / D) ** (n / 2)) / W
        assert m.encoding_row_norm() == pytest.approx(expected, rel=1e-6)


def test_matched_scale_measures_the_cnn_features():
    X = np.random.default_rng(0).normal(size=(20, W * L, S)).astype(np.float32)
    config = RunConfig(
        window=W * L,
        stride=W * L,
        model="spatiotemporal",
        n_windows=W,
        window_length=L,
        d_model=D,
        n_heads=2,
        encoding="sinusoidal",
        scale="matched",
        seed=2,
    )
    m, options = build_classifier(config, S, X)
    torch.manual_seed(2)
    bare = SpatioTemporalClassifier(
        S, n_windows=W, window_length=L, d_model=D, n_heads=2, encoding="none"
    ).train()
    with torch.no_grad():
        expected = float(bare.features(torch.as_tensor(X)).double().norm(dim=-1).mean())
    assert options == {"unit_norm": True, "scale": pytest.approx(expected)}
    assert mean_projected_norm(bare, X) == pytest.approx(expected)
    assert m.encoding_row_norm() == pytest.approx(expected)


def test_bad_sizes_name_the_option():
    with pytest.raises(ValueError, match="window_length must be >= 8.*window_length=7"):
        SpatioTemporalClassifier(S, window_length=7)
    with pytest.raises(ValueError, match="d_model must be a multiple of window_length // 8 = 2"):
        SpatioTemporalClassifier(S, window_length=16, d_model=15, n_heads=3)
    with pytest.raises(ValueError, match=r"n_windows·window_length = 6·16 = 96"):
        model()(torch.randn(1, 95, S, dtype=torch.float64))
    with pytest.raises(ValueError, match="n_sensors=4"):
        model()(torch.randn(1, W * L, 5, dtype=torch.float64))
