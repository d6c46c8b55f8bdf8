"""A benchmark run's encoding, initial and trained, handed to :mod:`posenc.analysis` as NumPy arrays.

A run directory written by ``posenc bench`` (:mod:`posenc.experiment.runs`) holds
``config.json`` (the resolved configuration, the encoding's options, ``n_features``) and
``checkpoint.pt`` (``{"model": state_dict, …}``). :func:`load_model` rebuilds the
:class:`~posenc.models.TransformerClassifier` under the run's seed — the initial model exactly
as the run started (:func:`posenc.experiment.scale.build_classifier`) — and, with
``trained=True``, loads the checkpoint's weights. :func:`encoding_view` reads the encoding's
(trained) parameters into an :class:`~posenc.analysis.EncodingView`; :func:`attention_form`
reads the first layer's query–key form ``H`` that Su's decomposition is applied to. Torch stays
here: the analysis receives arrays only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from posenc import analysis, spectrum, tables
from posenc.analysis.views import _shaw_key_bias
from posenc.experiment.config import RunConfig
from posenc.experiment.runs import CHECKPOINT, CONFIG
from posenc.models import TransformerClassifier


@dataclass(frozen=True)
class Run:
    """A run directory's configuration: ``config`` (:class:`RunConfig`) and the resolved record of ``config.json``."""

    directory: Path
    config: RunConfig
    resolved: dict[str, Any]


def read_run(run_dir: Path | str) -> Run:
    """Read ``run_dir/config.json``; raise ``FileNotFoundError`` naming what is missing."""
    directory = Path(run_dir)
    for name in (CONFIG, CHECKPOINT):
        if not (directory / name).is_file():
            raise FileNotFoundError(
                f"{directory} is not a finished or checkpointed benchmark run: no {name} "
                f"(a run directory of `posenc bench` holds {CONFIG} and {CHECKPOINT})"
            )
    resolved = json.loads((directory / CONFIG).read_text(encoding="utf-8"))
    try:
        config = RunConfig(**resolved["config"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{directory / CONFIG} does not hold a run configuration of this posenc: {exc}") from None
    return Run(directory, config, resolved)


def find_runs(root: Path | str) -> list[Path]:
    """Every run directory (``config.json`` + ``checkpoint.pt``) under ``root``, sorted."""
    base = Path(root)
    if not base.is_dir():
        raise FileNotFoundError(f"runs folder {base} does not exist")
    return sorted(p.parent for p in base.rglob(CONFIG) if (p.parent / CHECKPOINT).is_file())


def load_model(run: Run, *, trained: bool = True) -> TransformerClassifier:
    """The run's classifier: initial weights (the run's seed) or, with ``trained``, the checkpoint's."""
    c = run.config
    torch.manual_seed(c.seed)
    model = TransformerClassifier(
        int(run.resolved["n_features"]), c.d_model, c.n_heads, c.n_layers, encoding=c.encoding,
        encoding_options=run.resolved.get("encoding_options", {}), dropout=c.dropout, max_len=c.window,
    )
    if trained:
        state = torch.load(run.directory / CHECKPOINT, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
    return model.eval()


def _numpy(tensor: torch.Tensor) -> NDArray[np.float64]:
    return tensor.detach().to("cpu").double().numpy()


def _frequencies(module: torch.nn.Module, name: str) -> NDArray[np.float64] | None:
    if name == "dft" or not hasattr(module, "frequencies"):
        return None
    return _numpy(torch.as_tensor(module.frequencies))


def encoding_view(model: TransformerClassifier, *, name: str, state: str, seed: int = 0) -> analysis.EncodingView:
    """The classifier's encoding as the analysis sees it, from its current (``state``: initial/trained) parameters.

    Input encodings: ``table(n)`` with scale and unit norm applied, their frequencies when
    they have them (sinusoidal, learnable frequency) with the exact shift operator and eq. 15
    weights; rotary: rows ``R_t q`` for ``q = (1, 0, 1, 0, …)`` at its frequencies; biases:
    ``bias(n, n)``; Shaw: its key term for one random probe query (seed ``seed``).
    """
    module, family = model.encoder.encoding, model.encoder.family
    note = {"view": f"{state} parameters of the run's encoding module"}
    if module is None:
        return analysis.encoding_view("none", dim=model.encoder.d_model, length=1)
    w = _frequencies(module, name)
    if family == "input":
        dim = int(module.dim)
        layout = getattr(module, "layout", "interleaved")
        operator, weights = None, None
        if name == "dft":
            w, weights = spectrum.dft(dim), analysis.dft_distribution(dim)

            def operator(k: int) -> NDArray[np.float64]:
                return analysis.dft_shift_operator(k, dim=dim)
        elif w is not None:
            weights = analysis.frequency_distribution(w, dim=dim)
            if dim % 2 == 0:
                def operator(k: int) -> NDArray[np.float64]:
                    return analysis.shift_operator(k, dim=dim, frequencies=w, layout=layout)

        def table(n: int) -> NDArray[np.float64]:
            with torch.no_grad():
                return _numpy(module.table(n))

        return analysis.EncodingView(name, family, dim, table=table, frequencies=w, operator=operator,
                                     weights=weights, notes=note)
    if family == "rotary" and w is not None:
        dim = 2 * w.size
        return analysis.EncodingView(
            name, family, dim, table=lambda n: tables.sinusoidal(n, dim, frequencies=w, layout="interleaved_cos_first"),
            frequencies=w, weights=analysis.frequency_distribution(w, dim=dim),
            operator=lambda k: analysis.shift_operator(k, dim=dim, frequencies=w, layout="interleaved_cos_first"),
            notes={"view": f"{note['view']}: rows R_t q for q = (1, 0, 1, 0, …) at its frequencies"})
    if hasattr(module, "bias"):
        def bias(n: int) -> NDArray[np.float64]:
            with torch.no_grad():
                return _numpy(module.bias(n, n, dtype=torch.float64))

        return analysis.EncodingView(name, family, model.encoder.d_model, bias=bias, notes=note)
    if hasattr(module, "key_scores"):
        shaw = _shaw_key_bias(module, seed)

        def key_bias(n: int) -> NDArray[np.float64]:
            with torch.no_grad():
                return shaw(n)

        return analysis.EncodingView(name, family, model.encoder.d_model, bias=key_bias,
                                     notes={"view": f"{note['view']}: key term for one random probe query"})
    return analysis.EncodingView(name, family, model.encoder.d_model, notes={
        "view": f"{type(module).__name__} offers neither table(length) nor bias(q_len, k_len) to measure"})


def attention_form(model: TransformerClassifier) -> NDArray[np.float64] | None:
    """``H`` of the first layer's scores ``x_mᵀ H x_n`` summed over heads: ``diag(γ) W_Qᵀ W_K diag(γ) / √d_h``.

    ``W_Q``, ``W_K`` are the query and key rows of the fused ``qkv`` projection, ``γ`` the gain
    of the pre-attention LayerNorm (its normalisation and bias are left out). ``None`` when the
    encoding is not added to the tokens the attention reads (rotary, bias, concat mode).
    """
    encoder = model.encoder
    if encoder.family != "input" or encoder.input_projection is not None:
        return None
    layer = encoder.layers[0]
    d = encoder.d_model
    weight = _numpy(layer.attention.qkv.weight)
    gain = _numpy(layer.norm1.weight)
    w_q, w_k = weight[:d] * gain, weight[d : 2 * d] * gain
    return w_q.T @ w_k / math.sqrt(layer.attention.head_dim)


@dataclass(frozen=True)
class RunAnalysis:
    """Initial and trained scorecards of one run's encoding, and Su's decomposition of its first layer.

    ``forms[state]`` is :func:`posenc.analysis.form_summary` (``None`` where the encoding is not
    added to the tokens); ``diagonals[state]`` the diagonal of ``H`` and ``frequencies[state]``
    the encoding's frequencies, for figures.
    """

    run: Run
    cards: dict[str, analysis.Scorecard]
    forms: dict[str, dict[str, float | None] | None]
    diagonals: dict[str, NDArray[np.float64] | None]
    frequencies: dict[str, NDArray[np.float64] | None]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the trained scorecard's keys plus ``run``, ``initial`` (values) and ``attention_form``."""
        return {**self.cards["trained"].to_dict(), "run": str(self.run.directory),
                "initial": self.cards["initial"].to_dict()["values"], "attention_form": self.forms}


def analyze_run(run_dir: Path | str, *, decode_noise: float = 0.5) -> RunAnalysis:
    """Score the run's encoding at initialisation and after training, at the run's window length."""
    run = read_run(run_dir)
    c = run.config
    cards, forms, diagonals, freqs = {}, {}, {}, {}
    for state in ("initial", "trained"):
        model = load_model(run, trained=state == "trained")
        view = encoding_view(model, name=c.encoding, state=state, seed=c.seed)
        cards[state] = analysis.score_view(view, length=c.window, decode_noise=decode_noise, seed=c.seed,
                                           extra={"run": str(run.directory), "state": state})
        H = attention_form(model)
        layout = getattr(model.encoder.encoding, "layout", "interleaved")
        forms[state] = None if H is None or view.table is None else analysis.form_summary(
            H, view.table(c.window), frequencies=view.frequencies if c.encoding != "dft" else None, layout=layout)
        diagonals[state] = None if H is None else np.diag(H).copy()
        freqs[state] = view.frequencies
    return RunAnalysis(run, cards, forms, diagonals, freqs)
