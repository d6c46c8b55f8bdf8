"""An open registry: a user's encoding registered in one call works by name in the encoder, the bench and
``posenc analyze``; every entry's family is its class's."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from bench_args import tiny_bench

from posenc import registry
from posenc.cli import main
from posenc.nn import InputContract, ScoreBiasContract, TransformerEncoder

F64 = torch.float64


class GaussianBias(ScoreBiasContract):
    """A user's encoding: score bias ``−(j − i)²/(2w²)``, the same for every head (no parameters)."""

    def __init__(self, n_heads: int, *, width: float = 2.0) -> None:
        super().__init__()
        self.n_heads, self.width = n_heads, width

    def bias(
        self, q_len, k_len, *, q_positions=None, k_positions=None, offset=0, dtype=torch.float32, device=None
    ):
        i = torch.arange(q_len, device=device) if q_positions is None else q_positions
        j = torch.arange(k_len, device=device) if k_positions is None else k_positions
        d = (j[..., None, :] - i[..., :, None]).to(torch.float64)
        b = -(d**2) / (2 * self.width**2)
        return b.unsqueeze(-3).expand(*b.shape[:-2], self.n_heads, q_len, k_len).to(dtype)


@pytest.fixture
def mine():
    info = registry.register("mine", GaussianBias, summary="Gaussian distance bias", source="a test, 2026")
    yield info
    registry.unregister("mine")


def test_register_reads_the_family_from_the_class(mine):
    assert mine.family == "bias" and registry.get("mine") is mine and "mine" in registry.names()
    assert mine.module_class() is GaussianBias and not mine.scales and mine.faithful_length is None


def test_a_registered_encoding_works_by_name_in_the_encoder(mine):
    """One layer with ``"mine"`` equals the same layer without an encoding given the bias written out."""
    torch.manual_seed(0)
    model = TransformerEncoder(16, 2, 1, encoding="mine", encoding_options={"width": 3.0}).to(F64)
    torch.manual_seed(0)
    plain = TransformerEncoder(16, 2, 1, encoding="none").to(F64)
    plain.load_state_dict(model.state_dict())
    assert isinstance(model.encoding, GaussianBias) and model.encoding.width == 3.0
    x = torch.randn(2, 6, 16, dtype=F64)
    bias = torch.tensor([[-((j - i) ** 2) / 18.0 for j in range(6)] for i in range(6)], dtype=F64)
    want = plain.norm(plain.layers[0](x, attn_bias=bias))
    torch.testing.assert_close(model(x), want, rtol=0, atol=1e-12)


def test_a_registered_encoding_runs_in_the_bench_through_the_cli(mine, tmp_path, capsys):
    tiny = [*tiny_bench(), "--no-baseline"]
    assert main(["bench", *tiny, "--encodings", "mine", "--out", str(tmp_path)]) == 0
    assert "mine" in capsys.readouterr().out  # the headline names it; the tables are in results.md
    assert "| mine | native | 1 |" in (tmp_path / "results.md").read_text()
    configs = [json.loads(p.read_text()) for p in tmp_path.rglob("config.json")]
    assert any(c["config"]["encoding"] == "mine" for c in configs)


def test_a_registered_encoding_is_analysed_through_the_cli(mine, capsys):
    assert main(["analyze", "mine", "--dim", "8", "--length", "12", "--n-heads", "2", "--json"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["encoding"] == "mine" and card["family"] == "bias"
    values = card["values"]
    assert values["toeplitz_error"] < 1e-12  # a function of j − i only
    assert values["value_max"] == 0.0
    assert math.isclose(values["value_min"], -(11**2) / 8.0, rel_tol=1e-12)


def test_registration_errors_name_the_problem(mine):
    with pytest.raises(ValueError, match="'mine' is already registered"):
        registry.register("mine", GaussianBias, summary="", source="")
    with pytest.raises(ValueError, match=r"name must match \[a-z\]"):
        registry.register("My Enc", GaussianBias, summary="", source="")
    with pytest.raises(TypeError, match="has no family; subclass a contract"):
        registry.register("plain", torch.nn.Linear, summary="", source="")
    with pytest.raises(ValueError, match="family='input' disagrees with GaussianBias.family = 'bias'"):
        registry.register("other", GaussianBias, family="input", summary="", source="")
    with pytest.raises(ValueError, match="family must be one of"):
        registry.register("lazy", "somewhere:Thing", summary="", source="")
    with pytest.raises(ValueError, match="scales=True applies to input encodings only"):
        registry.register("other", GaussianBias, scales=True, summary="", source="")
    assert "plain" not in registry.names() and "other" not in registry.names()


def test_a_lazy_entry_whose_class_disagrees_is_refused_when_built():
    registry.register("wrong", "posenc.nn.bias:ALiBiBias", family="rotary", summary="", source="")
    try:
        with pytest.raises(TypeError, match="registered as family 'rotary' but ALiBiBias.family is 'bias'"):
            TransformerEncoder(16, 2, 1, encoding="wrong")
    finally:
        registry.unregister("wrong")


@pytest.mark.parametrize("name", [n for n in registry.names() if n != "none"])
def test_every_builtin_family_is_its_class_family(name):
    info = registry.get(name)
    cls = info.module_class()
    assert cls.family == info.family
    assert info.scales == issubclass(
        cls, InputContract
    )  # posenc's input encodings all take the scale options


def test_importing_the_registry_and_the_analysis_does_not_import_torch():
    code = (
        "import sys, posenc, posenc.registry, posenc.analysis, posenc.analysis.views; "
        "bad = [m for m in sys.modules if m == 'torch' or m.startswith('posenc.nn')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_report_scores_every_registered_encoding_including_a_new_one(mine):
    """The report's scorecards are those of every registry name: a registered encoding is among them."""
    from posenc import analysis

    cards = analysis.scorecards(length=8, dim=8, n_heads=2)
    assert [c.encoding for c in cards] == registry.names() and cards[-1].encoding == "mine"
    assert cards[-1].family == "bias" and cards[-1].values["toeplitz_error"] < 1e-12


def _periodic_dft_view(info, *, dim, length, base, n_heads, seed):
    """A user's view: the DFT table under another name, declaring its DFT-coefficient rows."""
    from posenc.analysis.views import dft_view

    return dft_view(info, dim=dim, length=length, base=base, n_heads=n_heads, seed=seed)


@pytest.fixture
def periodic():
    info = registry.register(
        "periodic",
        "posenc.nn.input:DFTEncoding",
        family="input",
        summary="the DFT encoding under a user's name",
        source="a test, 2026",
        view=_periodic_dft_view,
        fixed_frequencies=True,
    )
    yield info
    registry.unregister("periodic")


def test_what_an_entry_declares_gets_the_dft_treatment_under_any_name(periodic):
    """Decoding by inverse DFT and the trained view's fixed frequencies follow the declaration, not the name."""
    from posenc import analysis
    from posenc_bench.experiment.trained import encoding_view
    from posenc_bench.models import TransformerClassifier

    card = analysis.scorecard("periodic", length=16, dim=16)
    assert card.values["decoding_accuracy_inverse_dft"] == 1.0
    assert analysis.scorecard("sinusoidal", length=16, dim=16).values["decoding_accuracy_inverse_dft"] is None
    model = TransformerClassifier(2, 16, 2, 1, encoding="periodic", max_len=16)
    view = encoding_view(model, name="periodic", state="trained")
    d = 16
    assert view.dft_rows and view.layout is None
    omega = 2 * math.pi * torch.arange(d // 2 + 1, dtype=F64) / d  # ω_k = 2πk/d, k = 0 … d/2
    assert torch.allclose(torch.from_numpy(view.frequencies), omega, rtol=0, atol=1e-15)
    E = view.table(d)  # the module's own rows, shifted exactly by the entry's operator: e(t + 1) = T e(t)
    assert abs(E[1:] - E[:-1] @ view.operator(1).T).max() < 1e-12


def test_a_trained_sinusoid_in_any_layout_gets_its_exact_shift_operator():
    """The module's view carries its frequencies and layout, so the operator matches the split columns too."""
    from posenc_bench.experiment.trained import encoding_view
    from posenc_bench.models import TransformerClassifier

    for encoding, layout in (("sinusoidal", "split"), ("learnable_frequency", "interleaved_cos_first")):
        model = TransformerClassifier(
            2, 8, 2, 1, encoding=encoding, encoding_options={"layout": layout}, max_len=12
        )
        view = encoding_view(model, name=encoding, state="initial")
        assert view.layout == layout and view.frequencies is not None and not view.dft_rows
        E = view.table(12)
        for k in (1, 3):  # E[t + k] = T^(k) E[t] for every t: the exact shift of a sinusoidal table
            assert abs(E[k:] - E[:-k] @ view.operator(k).T).max() < 1e-12
