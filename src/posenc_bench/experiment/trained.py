"""A benchmark run's encoding, initial and trained, handed to :mod:`posenc.analysis` as NumPy arrays.

A run directory written by ``posenc bench`` (:mod:`posenc_bench.experiment.runs`) holds
``config.json`` (the resolved configuration, the encoding's options, ``n_features``) and
``checkpoint.pt`` (``{"model": state_dict, …}``). :func:`load_model` rebuilds the
:class:`~posenc_bench.models.TransformerClassifier` under the run's seed — the initial model exactly
as the run started (:func:`posenc_bench.experiment.scale.build_classifier`) — and, with
``trained=True``, loads the checkpoint's weights. :func:`encoding_view` reads the encoding's
(trained) parameters into an :class:`~posenc.analysis.EncodingView`; :func:`attention_form`
reads the first layer's query–key form ``H`` that Su's decomposition is applied to. Torch stays
here: the analysis receives arrays only.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from posenc import analysis, registry
from posenc_bench.decoder import CausalDecoder
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.runs import CHECKPOINT, CONFIG, read_checkpoint, read_config
from posenc_bench.models import TransformerClassifier


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
    resolved = read_config(directory)
    try:
        config = RunConfig.from_dict(resolved["config"])
    except (KeyError, TypeError) as exc:
        raise ValueError(
            f"{directory / CONFIG} does not hold a run configuration of this posenc: {exc}"
        ) from None
    if not config.axes.task.classify:
        raise ValueError(
            f"{directory} is a run of task {config.task!r}; only classifier runs (task 'classify') "
            "can be rebuilt for analysis"
        )
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
    with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
        torch.manual_seed(c.seed)
        model = TransformerClassifier(
            int(run.resolved["n_features"]),
            c.d_model,
            c.n_heads,
            c.n_layers,
            encoding=c.encoding,
            encoding_options=run.resolved.get("encoding_options", {}),
            dropout=c.dropout,
            max_len=c.window,
        )
    if trained:
        model.load_state_dict(read_checkpoint(run.directory / CHECKPOINT, model)["model"])
    return model.eval()


def _numpy(tensor: torch.Tensor) -> NDArray[np.float64]:
    return tensor.detach().to("cpu").double().numpy()


def encoding_view(
    model: TransformerClassifier | CausalDecoder, *, name: str, state: str, seed: int = 0
) -> analysis.EncodingView:
    """The model's encoding as the analysis sees it, from its current (``state``: initial/trained) parameters.

    The module's own ``analysis_view`` (its family contract: table, rotated probe rows, bias,
    Shaw's key term for one random probe query), completed by what the analysis can derive
    from the frequencies the view carries: a table of (sin, cos) pairs in a known layout
    (sinusoidal, learnable-frequency) gets the exact shift operator at its (trained) frequencies and
    eq. 15 weights (Idé et al., 2024), rotary eq. 15 weights; an entry registered with
    ``fixed_frequencies`` (the DFT encoding) takes frequencies, operator and weights (eq. 22) from
    its registry view.
    """
    module = model.encoder.encoding
    if module is None:
        return analysis.encoding_view("none", dim=model.encoder.d_model, length=1)
    dim = int(getattr(module, "dim", model.encoder.d_model))
    with torch.no_grad():
        view = module.analysis_view(name=name, dim=dim, seed=seed)
    note = f"{state} parameters of the run's encoding module" + (
        f"; {view.notes['view']}" if "view" in view.notes else ""
    )
    extra: dict[str, Any] = {"notes": {**view.notes, "view": note}}
    info = registry.get(name)
    if info.fixed_frequencies:  # the entry's own view holds for any instance: take what depends on dim only
        fixed = info.analysis_view(dim=dim, length=dim, base=10000.0, n_heads=1, seed=seed)
        extra.update(
            frequencies=fixed.frequencies,
            weights=fixed.weights,
            operator=fixed.operator,
            layout=fixed.layout,
            dft_rows=fixed.dft_rows,
        )
    elif view.frequencies is not None:
        w, layout = view.frequencies, view.layout
        extra["weights"] = analysis.frequency_distribution(
            w, dim=2 * w.size if view.family == "rotary" else dim
        )
        if layout is not None and dim % 2 == 0:
            extra["operator"] = lambda k: analysis.shift_operator(k, dim=dim, frequencies=w, layout=layout)
    table, bias = view.table, view.bias
    if table is not None:
        extra["table"] = lambda n: _no_grad(table, n)
    if bias is not None:
        extra["bias"] = lambda n: _no_grad(bias, n)
    return dataclasses.replace(view, **extra)


def _no_grad(rows: Any, n: int) -> NDArray[np.float64]:
    with torch.no_grad():
        return rows(n)


def attention_form(model: TransformerClassifier) -> NDArray[np.float64] | None:
    """``H`` of the first layer's scores ``x_mᵀ H x_n`` summed over heads: ``diag(γ) W_Qᵀ W_K diag(γ) / √d_h``.

    ``W_Q``, ``W_K`` are the query and key rows of the fused ``qkv`` projection, ``γ`` the gain
    of the pre-attention LayerNorm (its normalisation and bias are left out). ``None`` when the
    encoding is not added to the tokens the attention reads (rotary, bias, concat mode).
    """
    encoder = model.encoder
    if encoder.family != "input" or encoder.input_projection is not None:
        return None
    layer: Any = encoder.layers[0]
    d = encoder.d_model
    weight = _numpy(layer.attention.qkv.weight)
    gain = _numpy(layer.norm1.weight)
    w_q, w_k = weight[:d] * gain, weight[d : 2 * d] * gain
    return w_q.T @ w_k / math.sqrt(layer.attention.head_dim)


@dataclass(frozen=True)
class RunAnalysis:
    """Initial and trained scorecards of one run's encoding, and Su's decomposition of its first layer.

    ``forms[state]`` is :func:`posenc.analysis.form_summary` (``None`` where the encoding is not
    added to the tokens); ``spectra[state]`` the power spectrum of the table along positions
    (:func:`posenc.analysis.table_spectrum`, ``None`` without a table); ``diagonals[state]`` the
    diagonal of ``H``, ``frequencies[state]`` the encoding's frequencies and ``layouts[state]``
    the layout of its (sin, cos) columns (``None``: not such pairs), for figures.
    """

    run: Run
    cards: dict[str, analysis.Scorecard]
    forms: dict[str, dict[str, float | None] | None]
    spectra: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]] | None]
    diagonals: dict[str, NDArray[np.float64] | None]
    frequencies: dict[str, NDArray[np.float64] | None]
    layouts: dict[str, str | None]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the trained scorecard's keys plus ``run``, ``initial`` (values), ``attention_form``, ``spectrum``."""
        spectra = {
            state: None if sp is None else {"omega": sp[0].tolist(), "power": sp[1].tolist()}
            for state, sp in self.spectra.items()
        }
        return {
            **self.cards["trained"].to_dict(),
            "run": str(self.run.directory),
            "initial": self.cards["initial"].to_dict()["values"],
            "attention_form": self.forms,
            "spectrum": spectra,
        }


def analyze_run(run_dir: Path | str, *, decode_noise: float = 0.5) -> RunAnalysis:
    """Score the run's encoding at initialisation and after training, at the run's window length."""
    run = read_run(run_dir)
    c = run.config
    cards, forms, diagonals, freqs, layouts = {}, {}, {}, {}, {}
    spectra: dict[str, tuple[NDArray[np.float64], NDArray[np.float64]] | None] = {}
    for state in ("initial", "trained"):
        model = load_model(run, trained=state == "trained")
        view = encoding_view(model, name=c.encoding, state=state, seed=c.seed)
        cards[state] = analysis.score_view(
            view,
            length=c.window,
            decode_noise=decode_noise,
            seed=c.seed,
            extra={"run": str(run.directory), "state": state},
        )
        H = attention_form(model)
        forms[state] = (
            None
            if H is None or view.table is None
            else analysis.form_summary(  # Su's relative part needs (sin, cos) pairs in a known layout
                H,
                view.table(c.window),
                frequencies=view.frequencies if view.layout is not None else None,
                layout=view.layout or "interleaved",
            )
        )
        spectra[state] = None
        if view.table is not None and c.window >= 2 and np.any(view.table(c.window)):
            spectra[state] = analysis.table_spectrum(view.table(c.window), axis="positions")
        diagonals[state] = None if H is None else np.diag(H).copy()
        freqs[state] = view.frequencies
        layouts[state] = view.layout
    return RunAnalysis(run, cards, forms, spectra, diagonals, freqs, layouts)
