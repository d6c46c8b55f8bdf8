"""The scorecard of every registered encoding (SPEC §6) and the published numbers through it."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pytest

from posenc import analysis, registry


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_encoding_has_a_scorecard(name):
    card = analysis.scorecard(name, length=40, dim=32, n_heads=4)
    assert card.encoding == name and card.family == registry.get(name).family
    assert list(card.values) == list(analysis.CRITERIA)
    for key, value in card.values.items():
        if value is None:
            assert card.notes.get(key), f"{name}.{key} is None without a stated reason"
    json.dumps(card.to_dict(), allow_nan=False)  # valid JSON, stable keys
    assert set(card.to_dict()) == {"encoding", "family", "parameters", "values", "notes"}


def test_largest_period_at_d512_is_60611_477():
    card = analysis.scorecard("sinusoidal", length=16, dim=512)
    assert round(card.values["largest_period"], 3) == 60611.477  # seed notes-*
    assert card.values["largest_period"] == pytest.approx(2 * math.pi * 10000 ** (510 / 512), rel=1e-14)


def test_sinusoidal_and_dft_numbers():
    sin = analysis.scorecard("sinusoidal", length=80, dim=256).values
    dft = analysis.scorecard("dft", length=80, dim=256).values
    assert sin["shift_residual"] < 1e-12 and dft["shift_residual"] < 1e-12
    assert sin["toeplitz_error"] < 1e-10
    assert sin["low_pass_fraction"] == pytest.approx(76 / 128)  # SPEC §5
    assert dft["reconstruction_width"] == pytest.approx(1.0)
    assert sin["reconstruction_width"] > 8.0
    assert dft["decoding_accuracy_inverse_dft"] == 1.0
    assert dft["first_repeat"] == 256 and sin["first_repeat"] is None
    assert sin["unique"] and dft["unique"] and sin["extrapolates"]
    assert sin["value_min"] >= -1.0 and sin["value_max"] <= 1.0


def test_dft_beyond_d_is_not_unique():
    card = analysis.scorecard("dft", length=100, dim=64)
    assert card.values["unique"] is False and card.values["min_distance"] < 1e-12
    assert card.values["first_repeat"] == 64 and card.values["extrapolates"] is False
    assert card.values["decoding_accuracy_inverse_dft"] is None
    assert "alias" in card.notes["decoding_accuracy_inverse_dft"]


def test_learned_table_is_measured_by_least_squares():
    card = analysis.scorecard("learned", length=100, dim=16)
    assert card.notes["shift_residual"] == "least-squares map"
    assert card.values["shift_residual"] > 0.5  # random initial vectors admit no linear shift
    assert card.values["extrapolates"] is False  # no rows beyond max_len


def test_alibi_is_toeplitz_and_decays():
    card = analysis.scorecard("alibi", length=64, dim=32, n_heads=4)
    assert card.values["toeplitz_error"] < 1e-12
    slowest = 2.0 ** (-8 * 4 / 4)  # ALiBi slope of head 4 of 4: 2^-8
    far = np.arange(32, 64)
    assert card.values["long_range_decay"] == pytest.approx(math.exp(-slowest * far.mean()), rel=1e-5)
    assert card.values["unique"] is None


def test_unknown_encoding_lists_the_known_ones():
    with pytest.raises(ValueError, match="registered encodings: none, sinusoidal"):
        analysis.scorecard("sinusodial", length=8, dim=8)


def test_import_analysis_stays_numpy_only():
    import subprocess

    code = "import posenc.analysis, sys; print('torch' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_negative_decode_noise_is_refused():
    # regression: decode_noise=-1 gave decoding_accuracy None with the reason hidden in a note
    with pytest.raises(ValueError, match="decode_noise must be >= 0, got -1"):
        analysis.scorecard("sinusoidal", length=8, dim=8, decode_noise=-1)


def test_score_view_scores_arrays_handed_in():
    # a "trained" table handed over as NumPy: a sinusoidal table whose rows are permuted is no
    # longer shift-equivariant, and the scorecard of the bare arrays says so
    E = np.asarray(analysis.encoding_view("sinusoidal", dim=16, length=40).table(40))
    rng = np.random.default_rng(1)
    shuffled = E[rng.permutation(40)]
    view = analysis.EncodingView(
        "learned",
        "input",
        16,
        table=lambda n: shuffled[:n] if n <= 40 else (_ for _ in ()).throw(ValueError("S")),
        notes={"view": "trained"},
    )
    card = analysis.score_view(view, length=40)
    assert card.values["toeplitz_error"] > 0.1
    assert card.values["min_distance"] == pytest.approx(analysis.min_pairwise_distance(E))
    assert card.values["low_pass_fraction"] is None
    assert card.notes["view"] == "trained"


@pytest.mark.parametrize(("option", "value"), [("seed", -1), ("n_heads", 0), ("seed", 1.5)])
def test_scorecard_refuses_bad_seed_and_heads_for_every_encoding(option, value):
    """Even where the encoding does not use them (sinusoidal has no heads, no learned initialisation)."""
    with pytest.raises((ValueError, TypeError), match=option):
        analysis.scorecard("sinusoidal", length=16, dim=8, **{option: value})
