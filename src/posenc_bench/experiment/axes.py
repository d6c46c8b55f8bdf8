"""The axes of one training run, one frozen dataclass each: data, split protocol, model, task, training.

Each axis checks its own fields once, declaratively (its ``_parameter_constraints`` table, checked by
:func:`posenc_bench.experiment.constraints.check_parameters`), plus the rules between its own fields;
rules between axes live in :class:`posenc_bench.experiment.config.RunConfig`, which composes them.
Field names are those of ``RunConfig`` (and of the run's ``config.json``), so an error names the
field a user set.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from posenc import registry
from posenc.errors import UsageError
from posenc_bench.data.splits import PROTOCOLS
from posenc_bench.experiment.constraints import (
    LEARNING_RATE,
    POSITIVE_INT,
    SEED,
    WEIGHT_DECAY,
    Constraints,
    Interval,
    Options,
    Pattern,
    Satisfies,
    Type,
    check_parameters,
    option,
)

#: Scale policies of encodings registered with ``scales=True``; see :mod:`posenc_bench.experiment.scale`.
SCALE_POLICIES = ("native", "unit", "matched", "learned")
#: What early stopping watches on the validation set.
MONITORS = ("auprc", "loss")
#: Benchmark tasks: supervised window classification, unsupervised detection (:mod:`posenc_bench.experiment.detect`),
#: length generalisation of a causal decoder on algorithmic tasks (:mod:`posenc_bench.experiment.lengthgen`).
TASKS = ("classify", "detect", "lengthgen")
#: Detectors of the detect task (:class:`posenc_bench.detectors.SequenceDetector`).
DETECTORS = ("forecast", "reconstruct")
#: Classifiers: :class:`posenc_bench.models.TransformerClassifier` or :class:`posenc_bench.models.SpatioTemporalClassifier`.
MODELS = ("transformer", "spatiotemporal")
#: The spatio-temporal model's CNN halves each window three times (Labaien et al. 2023).
CNN_REDUCTION = 8


def check_encoding_names(name: str, names: Iterable[str]) -> None:
    """Each of ``names`` must be a registered encoding; the error lists the unknown ones and the valid ones."""
    unknown = [e for e in names if e not in registry.ENCODINGS]
    if unknown:
        raise UsageError(
            f"{name}: unknown {', '.join(map(repr, unknown))}; valid: {', '.join(registry.names())}"
        )


def check_encoding_options(name: str, options: object) -> None:
    """Options must be a mapping of option names to JSON values (they are recorded in config.json)."""
    if not isinstance(options, Mapping):
        raise TypeError(f"{name} must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ValueError(f"{name} keys must be option names, got {key!r}")
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


@dataclass(frozen=True)
class DataAxis:
    """What a run reads.

    Attributes:
        dataset: dataset spec for :func:`posenc_bench.data.load_dataset` (``"synthetic"``, ``"msl"``, a path, …).
        dataset_options: keyword options for ``load_dataset`` (e.g. the synthetic generator's size).
        subset: the part of the dataset the run uses, ``""`` for all of it (probes: ``"k5"``, distance 5).
        window: window length ``s`` (time steps per example).
        stride: step between window starts.
    """

    dataset: str = option("synthetic", "msl, smd, synthetic, probes or a PATH")
    dataset_options: Mapping[str, Any] = field(default_factory=dict)
    subset: str = ""
    window: int = option(32, "window length")
    stride: int = option(16, "window stride")

    _parameter_constraints: ClassVar[Constraints] = {
        "dataset": Pattern(r".+", "a non-empty string"),
        "subset": Pattern(r"[A-Za-z0-9._-]*", "a string of letters, digits, '.', '_' or '-'"),
        "dataset_options": Type(Mapping, "a mapping of keyword options"),
        "window": POSITIVE_INT,
        "stride": POSITIVE_INT,
    }

    def __post_init__(self) -> None:
        check_parameters(self)

    @property
    def probes(self) -> bool:
        """Whether the data is the probe suite (:mod:`posenc_bench.data.probes`), not an anomaly dataset."""
        return self.dataset == "probes"


@dataclass(frozen=True)
class ProtocolAxis:
    """How windows are dealt to train/validation/test (:func:`posenc_bench.data.make_splits`).

    Attributes:
        protocol: ``"blocked"`` (leakage-free, default), ``"random_windows"`` (LEAKY; only to measure
            how much leakage inflates scores) or ``"dfstrans"`` (:data:`posenc_bench.data.PROTOCOLS`).
        split_seed: seed of the assignment.
        anomaly_percent: protocol ``"dfstrans"``: anomalous instances kept, percent of all, in (0, 100].
    """

    protocol: str = option(
        "blocked",
        "split protocol: blocked (leakage-free), random_windows (LEAKY: windows dealt "
        "at random as in much of the literature; only to measure how much leakage inflates scores) "
        "or dfstrans (LEAKY: Labaien et al. 2023 — stratified random split of non-overlapping "
        "segments 70/15/15, min-max scaling, threshold 0.5)",
    )
    split_seed: int = 0
    anomaly_percent: float = option(
        100.0,
        "--protocol dfstrans: keep anomalous instances up to this percent of all, in (0, 100] (default {default:g})",
    )

    _parameter_constraints: ClassVar[Constraints] = {
        "protocol": Options(PROTOCOLS),
        "split_seed": SEED,
        "anomaly_percent": Interval(float, 0, 100, closed="right"),
    }

    def __post_init__(self) -> None:
        check_parameters(self)

    @property
    def blocked(self) -> bool:
        """Whether the split is the leakage-free blocked one."""
        return self.protocol == "blocked"

    @property
    def dfstrans(self) -> bool:
        """Whether the split is Labaien et al. (2023)'s: stratified segments, a threshold of 0.5."""
        return self.protocol == "dfstrans"


@dataclass(frozen=True)
class ModelAxis:
    """The network and its positional encoding.

    Attributes:
        model: ``"transformer"`` or ``"spatiotemporal"`` (:data:`MODELS`).
        d_model, n_heads, n_layers, dropout: width, heads, layers and dropout.
        n_windows, window_length: the spatio-temporal model's windows per instance and steps per window.
        encoding: registry name of the positional encoding.
        encoding_options: constructor options of that encoding (e.g. ``{"layout": "adjacent"}`` for
            ``rope``, ``{"num_buckets": 16}`` for ``t5``); the model's sizes are not options.
        scale: scale policy of an additive encoding (:data:`SCALE_POLICIES`; ``"native"`` for others).
    """

    model: str = option(
        "transformer",
        "transformer or spatiotemporal (DFStrans: per-sensor CNN per window, attention "
        "across windows and across sensors; the encoding acts on the window axis)",
    )
    d_model: int = option(32, "model width")
    n_heads: int = option(4, "attention heads", flag="--heads")
    n_layers: int = option(2, "encoder layers", flag="--layers")
    dropout: float = option(0.1, "dropout")
    n_windows: int = option(
        8, "--model spatiotemporal: windows per instance (default {default}; the paper 80)"
    )
    window_length: int = option(
        16, "--model spatiotemporal: steps per window, >= 8 (default {default}; the paper 100)"
    )
    encoding: str = "sinusoidal"
    encoding_options: Mapping[str, Any] = field(default_factory=dict)
    scale: str = "native"

    _parameter_constraints: ClassVar[Constraints] = {
        "model": Options(MODELS),
        "d_model": POSITIVE_INT,
        "n_heads": POSITIVE_INT,
        "n_layers": POSITIVE_INT,
        "dropout": Interval(float, 0, 1, closed="left"),
        "n_windows": POSITIVE_INT,
        "window_length": POSITIVE_INT,
        "encoding": Satisfies(lambda _, name: registry.get(name)),
        "encoding_options": Satisfies(check_encoding_options),
        "scale": Options(SCALE_POLICIES),
    }

    def __post_init__(self) -> None:
        check_parameters(self)
        if self.spatiotemporal:
            self._check_cnn()
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model must be divisible by n_heads, got d_model={self.d_model}, n_heads={self.n_heads}"
            )

    def _check_cnn(self) -> None:
        reduced = self.window_length // CNN_REDUCTION
        if not reduced:
            raise ValueError(
                f"window_length must be >= {CNN_REDUCTION} for model 'spatiotemporal': its CNN halves it "
                f"three times, so window_length={self.window_length} leaves 0 features"
            )
        if self.d_model % reduced:
            raise ValueError(
                f"d_model must be a multiple of window_length // {CNN_REDUCTION} = {reduced} for "
                f"model 'spatiotemporal' (CNN channels × {reduced}), got d_model={self.d_model}"
            )

    @property
    def spatiotemporal(self) -> bool:
        """Whether the model is the spatio-temporal classifier, whose encoding indexes windows, not steps."""
        return self.model == "spatiotemporal"


@dataclass(frozen=True)
class TaskAxis:
    """What the run learns.

    Attributes:
        task: ``"classify"`` (labelled windows), ``"detect"`` (train on nominal data, score test steps) or
            ``"lengthgen"`` (a causal decoder trained on short algorithmic sequences, tested on long ones; its
            runs are :class:`posenc_bench.experiment.lengthgen.LengthgenConfig`, not windows of a dataset).
        detector, horizon, smoothing, holdout: the detect task's model (``"forecast"`` or
            ``"reconstruct"``), forecast horizon, EWMA span of the errors and the held-out fraction of
            each nominal training array (:mod:`posenc_bench.experiment.detect`).
    """

    task: str = "classify"
    detector: str = "forecast"
    horizon: int = option(4, "--task detect: steps forecast from each window (< --window, default {default})")
    smoothing: float = option(
        8.0, "--task detect: EWMA span of the step errors (telemanom smoothing; default {default:g})"
    )
    holdout: float = option(
        0.2, "--task detect: held-out tail of each nominal training array for calibration (default {default})"
    )

    _parameter_constraints: ClassVar[Constraints] = {
        "task": Options(TASKS),
        "detector": Options(DETECTORS),
        "horizon": POSITIVE_INT,
        "smoothing": Interval(float, 1, None),
        "holdout": Interval(float, 0, 1, closed="neither"),
    }

    def __post_init__(self) -> None:
        check_parameters(self)

    @property
    def classify(self) -> bool:
        """Whether the task is supervised window classification (the fields below ``task`` do not apply)."""
        return self.task == "classify"

    @property
    def detect(self) -> bool:
        """Whether the task is unsupervised detection (its fields below ``task`` apply)."""
        return self.task == "detect"

    @property
    def lengthgen(self) -> bool:
        """Whether the task is length generalisation (:mod:`posenc_bench.experiment.lengthgen`), whose runs are
        not windows of a dataset."""
        return self.task == "lengthgen"


@dataclass(frozen=True)
class TrainingAxis:
    """The optimisation.

    Attributes:
        epochs: maximum number of epochs; patience: epochs without improvement before stopping.
        batch_size, lr, weight_decay: AdamW training.
        monitor: validation quantity for early stopping: ``"auprc"`` (higher is better) or ``"loss"``.
        seed: seed of model initialisation, batch order and dropout.
    """

    epochs: int = option(16, "maximum epochs")
    patience: int = option(16, "early-stopping patience")
    batch_size: int = option(16, "batch size")
    lr: float = option(3e-3, "AdamW learning rate")
    weight_decay: float = option(1e-2, "AdamW weight decay")
    monitor: str = option("auprc", "early-stopping quantity on validation")
    seed: int = 0

    _parameter_constraints: ClassVar[Constraints] = {
        "epochs": POSITIVE_INT,
        "patience": POSITIVE_INT,
        "batch_size": POSITIVE_INT,
        "lr": LEARNING_RATE,
        "weight_decay": WEIGHT_DECAY,
        "monitor": Options(MONITORS),
        "seed": SEED,
    }

    def __post_init__(self) -> None:
        check_parameters(self)
