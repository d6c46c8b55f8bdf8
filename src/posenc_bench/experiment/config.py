"""Typed, frozen configuration of one training run and of a benchmark grid.

A run is identified by ``(dataset, encoding, encoding_options, scale, split_seed, seed)``;
everything else (model size, optimiser, window) is a hyperparameter shared by every run of a
benchmark.
The resolved configuration is written as JSON next to each run's results
(:mod:`posenc_bench.experiment.runs`), so a result can always be traced to what produced it.

Defaults are chosen so that the default synthetic benchmark separates encodings on 2 CPU cores
in a few minutes: ``d_model=32``, 4 heads, 2 layers, window 32 at stride 16, 16 epochs
(patience 16: a position-aware model's validation AUPRC often stalls for several epochs before
it learns the order/timing family), batch 16, AdamW ``lr=3e-3``, ``weight_decay=1e-2``,
dropout 0.1. Before 2026-11-22 they were 8 epochs, patience 3, batch 32, ``lr=1e-3``.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from posenc import registry, validate
from posenc_bench.data.instances import check_anomaly_percent
from posenc_bench.data.splits import PROTOCOLS

#: Scale policies of encodings registered with ``scales=True``; see :mod:`posenc_bench.experiment.scale`.
SCALE_POLICIES = ("native", "unit", "matched", "learned")
#: What early stopping watches on the validation set.
MONITORS = ("auprc", "loss")
#: Benchmark tasks: supervised window classification, unsupervised detection (:mod:`posenc_bench.experiment.detect`).
TASKS = ("classify", "detect")
#: Detectors of the detect task (:class:`posenc_bench.detectors.SequenceDetector`).
DETECTORS = ("forecast", "reconstruct")
#: Classifiers: :class:`posenc_bench.models.TransformerClassifier` or :class:`posenc_bench.models.SpatioTemporalClassifier`.
MODELS = ("transformer", "spatiotemporal")


def _check_encoding_options(options: object) -> None:
    """Options must be a mapping of option names to JSON values (they are recorded in config.json)."""
    if not isinstance(options, Mapping):
        raise TypeError(f"encoding_options must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"encoding_options keys must be option names, got {key!r}")
        if key in registry.MODEL_SIZES:
            raise ValueError(
                f"encoding option {key!r} is set by the model's sizes ({', '.join(registry.MODEL_SIZES)})"
            )
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(
                f"encoding option {key}={value!r} must be a JSON value (it is recorded per run)"
            ) from None


def resolve_encoding_options(
    encodings: tuple[str, ...], items: list[tuple[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Assign ``KEY=VALUE`` items to encodings: ``NAME.KEY`` targets encoding ``NAME``; a bare ``KEY``
    the one requested encoding whose constructor takes it (imports the encoding classes).

    Raises ``ValueError`` naming the item when no requested encoding takes the option, or when
    several do (then ``NAME.KEY`` says which).
    """
    resolved: dict[str, dict[str, Any]] = {}
    for item, value in items:
        name, dot, key = item.rpartition(".")
        item = f"{item}={value if isinstance(value, str) else json.dumps(value)}"
        if key in registry.MODEL_SIZES:
            raise ValueError(
                f"--encoding-option {item}: {key!r} comes from the bench's size flags "
                "(--d-model, --heads, --window), not from --encoding-option"
            )
        targets = [name] if dot else [e for e in encodings if key in registry.get(e).option_names()]
        if dot and name not in encodings:
            raise ValueError(
                f"--encoding-option {item}: {name!r} is not among --encodings ({', '.join(encodings)})"
            )
        if dot and key not in registry.get(name).option_names():
            known = ", ".join(registry.get(name).option_names()) or "none"
            raise ValueError(
                f"--encoding-option {item}: encoding {name!r} has no option {key!r}; its options: {known}"
            )
        if not targets:
            raise ValueError(
                f"--encoding-option {item}: no encoding of {', '.join(encodings)} takes an option {key!r}"
            )
        if len(targets) > 1:
            raise ValueError(
                f"--encoding-option {item}: {', '.join(targets)} all take {key!r}; "
                f"name one as ENCODING.{key}=VALUE (e.g. {targets[-1]}.{key})"
            )
        for target in targets:
            resolved.setdefault(target, {})[key] = value
    return resolved


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one training run.

    Attributes:
        dataset: dataset spec for :func:`posenc_bench.data.load_dataset` (``"synthetic"``, ``"msl"``, a path, …).
        dataset_options: keyword options for ``load_dataset`` (e.g. the synthetic generator's size).
        subset: the part of the dataset the run uses, ``""`` for all of it (probes: ``"k5"``, distance 5).
        window: window length ``s`` (time steps per example).
        stride: step between window starts.
        split_seed: seed of the blocked train/val/test assignment (:func:`posenc_bench.data.make_splits`).
        protocol: split protocol, ``"blocked"`` (leakage-free, default) or ``"random_windows"``
            (LEAKY; only to measure how much leakage inflates scores — :data:`posenc_bench.data.PROTOCOLS`).
        encoding: registry name of the positional encoding.
        encoding_options: constructor options of that encoding (e.g. ``{"layout": "adjacent"}`` for
            ``rope``, ``{"num_buckets": 16}`` for ``t5``); the model's sizes are not options.
        scale: scale policy of an additive encoding (:data:`SCALE_POLICIES`; ``"native"`` for others).
        seed: seed of model initialisation, batch order and dropout.
        d_model, n_heads, n_layers, dropout: the :class:`posenc_bench.models.TransformerClassifier`.
        epochs: maximum number of epochs; patience: epochs without improvement before stopping.
        batch_size, lr, weight_decay: AdamW training.
        monitor: validation quantity for early stopping: ``"auprc"`` (higher is better) or ``"loss"``.
        task: ``"classify"`` (labelled windows) or ``"detect"`` (train on nominal data, score test steps).
        detector, horizon, smoothing, holdout: the detect task's model (``"forecast"`` or
            ``"reconstruct"``), forecast horizon (< ``window``), EWMA span of the errors and the
            held-out fraction of each nominal training array (:mod:`posenc_bench.experiment.detect`).
        model: ``"transformer"`` or ``"spatiotemporal"`` (:data:`MODELS`).
        n_windows, window_length: the spatio-temporal model's windows per instance and steps per
            window (``window`` must equal their product).
        anomaly_percent: protocol ``"dfstrans"``: anomalous instances kept, percent of all, in (0, 100].
    """

    dataset: str = "synthetic"
    dataset_options: Mapping[str, Any] = field(default_factory=dict)
    subset: str = ""
    window: int = 32
    stride: int = 16
    split_seed: int = 0
    protocol: str = "blocked"
    encoding: str = "sinusoidal"
    encoding_options: Mapping[str, Any] = field(default_factory=dict)
    scale: str = "native"
    seed: int = 0
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 2
    dropout: float = 0.1
    epochs: int = 16
    patience: int = 16
    batch_size: int = 16
    lr: float = 3e-3
    weight_decay: float = 1e-2
    monitor: str = "auprc"
    task: str = "classify"
    detector: str = "forecast"
    horizon: int = 4
    smoothing: float = 8.0
    holdout: float = 0.2
    model: str = "transformer"
    n_windows: int = 8
    window_length: int = 16
    anomaly_percent: float = 100.0

    def __post_init__(self) -> None:
        if not isinstance(self.dataset, str) or not self.dataset:
            raise ValueError(f"dataset must be a non-empty string, got {self.dataset!r}")
        if not isinstance(self.subset, str) or not re.fullmatch(r"[A-Za-z0-9._-]*", self.subset):
            raise ValueError(
                f"subset must be a string of letters, digits, '.', '_' or '-', got {self.subset!r}"
            )
        if not isinstance(self.dataset_options, Mapping):
            raise TypeError(f"dataset_options must be a mapping, got {type(self.dataset_options).__name__}")
        for name in (
            "window",
            "stride",
            "d_model",
            "n_heads",
            "n_layers",
            "epochs",
            "patience",
            "batch_size",
        ):
            validate.positive_int(name, getattr(self, name))
        validate.non_negative_int("split_seed", self.split_seed)
        validate.non_negative_int("seed", self.seed)
        registry.get(self.encoding)
        _check_encoding_options(self.encoding_options)
        validate.choice("scale", self.scale, SCALE_POLICIES)
        validate.choice("protocol", self.protocol, PROTOCOLS)
        validate.choice("monitor", self.monitor, MONITORS)
        validate.choice("task", self.task, TASKS)
        validate.choice("detector", self.detector, DETECTORS)
        validate.positive_int("horizon", self.horizon)
        if self.task == "detect" and self.horizon >= self.window:
            raise ValueError(
                f"horizon must be < window (a forecast of at least a whole window from one window), "
                f"got horizon={self.horizon}, window={self.window}"
            )
        if (
            isinstance(self.smoothing, bool)
            or not isinstance(self.smoothing, numbers.Real)
            or not self.smoothing >= 1
        ):
            raise ValueError(f"smoothing (EWMA span) must be a number >= 1, got {self.smoothing!r}")
        if (
            isinstance(self.holdout, bool)
            or not isinstance(self.holdout, numbers.Real)
            or not 0 < self.holdout < 1
        ):
            raise ValueError(f"holdout must be a fraction in (0, 1), got {self.holdout!r}")
        validate.choice("model", self.model, MODELS)
        validate.positive_int("n_windows", self.n_windows)
        validate.positive_int("window_length", self.window_length)
        check_anomaly_percent(self.anomaly_percent)
        if self.model == "spatiotemporal":
            if self.window != self.n_windows * self.window_length:
                raise ValueError(
                    f"window (segment length) must equal n_windows × window_length = {self.n_windows} × "
                    f"{self.window_length} = {self.n_windows * self.window_length} for model 'spatiotemporal', "
                    f"got window={self.window}"
                )
            if self.window_length < 8:
                raise ValueError(
                    f"window_length must be >= 8 for model 'spatiotemporal': its CNN halves it three "
                    f"times, so window_length={self.window_length} leaves 0 features"
                )
            if self.d_model % (self.window_length // 8):
                raise ValueError(
                    f"d_model must be a multiple of window_length // 8 = {self.window_length // 8} for "
                    f"model 'spatiotemporal' (CNN channels × {self.window_length // 8}), "
                    f"got d_model={self.d_model}"
                )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, n_heads={self.n_heads}"
            )
        if (
            isinstance(self.dropout, bool)
            or not isinstance(self.dropout, numbers.Real)
            or not 0 <= self.dropout < 1
        ):
            raise ValueError(f"dropout must be a number in [0, 1), got {self.dropout!r}")
        validate.positive_float("lr", self.lr)
        wd = self.weight_decay
        if isinstance(wd, bool) or not isinstance(wd, numbers.Real) or not 0 <= wd < float("inf"):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay!r}")

    @property
    def encoding_label(self) -> str:
        """``encoding`` followed by its options, e.g. ``"rope+layout=adjacent"`` (names the run's directory)."""
        return self.encoding + "".join(
            f"+{k}={json.dumps(v)}" for k, v in sorted(self.encoding_options.items())
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field; ``encoding_options`` only when there are any and the detect
        task's fields only when ``task == "detect"``, so runs recorded before these fields existed keep their identity."""
        out = dataclasses.asdict(self)
        out["dataset_options"] = dict(self.dataset_options)
        out["encoding_options"] = dict(self.encoding_options)
        if not out["encoding_options"]:
            del out["encoding_options"]
        if self.task == "classify":
            for name in ("task", "detector", "horizon", "smoothing", "holdout"):
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """The config :meth:`to_dict` wrote (fields it left out take their defaults); ``TypeError`` names an unknown key."""
        unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"run config has no field {', '.join(map(repr, unknown))}")
        return cls(**data)


@dataclass(frozen=True)
class BenchPlan:
    """A benchmark grid: every (encoding, scale, split seed, seed) on one dataset.

    Attributes:
        base: hyperparameters shared by every run (its ``encoding``/``scale``/seeds are replaced).
        encodings: registry names, in table order.
        scales: scale policies applied to additive encodings; other families run once, at ``"native"``.
        seeds: number of training seeds (``0 … seeds-1``).
        splits: number of split seeds (``0 … splits-1``).
        shuffle_control: also evaluate each model on time-shuffled test windows.
        baseline: also evaluate the baselines without positional training per split.
        encoding_options: constructor options per encoding name (:func:`resolve_encoding_options`).
        detectors: the detect task's models (default: ``base.detector`` alone); ignored by classify.
    """

    base: RunConfig
    encodings: tuple[str, ...]
    scales: tuple[str, ...] = ("native",)
    seeds: int = 5
    splits: int = 1
    shuffle_control: bool = True
    baseline: bool = True
    encoding_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    detectors: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in self.detectors:
            validate.choice("detector", name, DETECTORS)
        if not self.encodings:
            raise ValueError("encodings must name at least one encoding")
        for name in self.encodings:
            registry.get(name)
        if len(set(self.encodings)) != len(self.encodings):
            raise ValueError(f"encodings must not repeat a name, got {', '.join(self.encodings)}")
        if not self.scales:
            raise ValueError(f"scales must name at least one policy of {', '.join(SCALE_POLICIES)}")
        for scale in self.scales:
            validate.choice("scale", scale, SCALE_POLICIES)
        validate.positive_int("seeds", self.seeds)
        validate.positive_int("splits", self.splits)
        for name, options in self.encoding_options.items():
            if name not in self.encodings:
                raise ValueError(
                    f"encoding_options name {name!r}, which is not among encodings {self.encodings}"
                )
            _check_encoding_options(options)

    def options_for(self, encoding: str) -> dict[str, Any]:
        """The constructor options of ``encoding`` in this plan (``{}`` when none were given)."""
        return dict(self.encoding_options.get(encoding, {}))

    def scales_for(self, encoding: str) -> tuple[str, ...]:
        """The scale policies that apply to ``encoding``: all requested when its registry entry scales, else ``native``."""
        return self.scales if registry.get(encoding).scales else ("native",)

    def runs(self) -> Iterator[RunConfig]:
        """Every run of the grid, split seed outermost (so one split's data is reused), then detector."""
        detectors = (
            (self.detectors or (self.base.detector,)) if self.base.task == "detect" else (self.base.detector,)
        )
        for split_seed in range(self.splits):
            for detector in detectors:
                for encoding in self.encodings:
                    for scale in self.scales_for(encoding):
                        for seed in range(self.seeds):
                            yield dataclasses.replace(
                                self.base,
                                encoding=encoding,
                                encoding_options=self.options_for(encoding),
                                scale=scale,
                                split_seed=split_seed,
                                seed=seed,
                                detector=detector,
                            )
