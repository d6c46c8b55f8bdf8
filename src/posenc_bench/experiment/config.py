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
import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, TypeVar

from posenc import registry, validate
from posenc_bench.experiment.axes import (
    DETECTORS,
    SCALE_POLICIES,
    DataAxis,
    ModelAxis,
    ProtocolAxis,
    TaskAxis,
    TrainingAxis,
    check_encoding_options,
)
from posenc_bench.experiment.constraints import REPEATS, SEED, Constraints, check_parameters


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


_Axis = TypeVar("_Axis", DataAxis, ProtocolAxis, ModelAxis, TaskAxis, TrainingAxis)


def _project(config: RunConfig, kind: type[_Axis]) -> _Axis:
    """The fields of ``config`` that make up one axis."""
    return kind(**{f.name: getattr(config, f.name) for f in dataclasses.fields(kind)})


class Axes(NamedTuple):
    """A run's configuration per axis (:mod:`posenc_bench.experiment.axes`)."""

    data: DataAxis
    protocol: ProtocolAxis
    model: ModelAxis
    task: TaskAxis
    training: TrainingAxis


IDENTITY_VERSION = 1
"""The format of a run's identity, the ``config`` of its ``config.json`` (:meth:`RunConfig.identity`).

Version 1 is the format of every run recorded before the identity was versioned: it records no version,
leaves ``encoding_options`` out when there are none and the detect task's fields out of classify runs. A
later format records ``"identity_version": N`` beside the settings; a stored run is compared with its
config's identity in the version it records (:func:`identity_version`), so run folders written in an
older format are still found and resumed.
"""

IDENTITY_VERSIONS = (1,)
"""The identity formats :meth:`RunConfig.identity` writes (every one a stored run may record)."""


def identity_version(identity: Mapping[str, Any]) -> int:
    """The format a stored identity is written in: its ``identity_version``, 1 when it records none;
    ``ValueError`` naming the value when this code does not know it."""
    version = identity.get("identity_version", 1)
    if version not in IDENTITY_VERSIONS:
        raise ValueError(
            f"identity_version {version!r} of a stored run is not one this code writes "
            f"({', '.join(map(str, IDENTITY_VERSIONS))}); it was recorded by a newer posenc_bench"
        )
    return int(version)


@dataclass(frozen=True)
class RunConfig(TrainingAxis, TaskAxis, ModelAxis, ProtocolAxis, DataAxis):
    """Everything that determines one training run: the flat view of its :class:`Axes`, as recorded.

    The fields are those of the five axes (:class:`~posenc_bench.experiment.axes.DataAxis`,
    :class:`~posenc_bench.experiment.axes.ProtocolAxis`, :class:`~posenc_bench.experiment.axes.ModelAxis`,
    :class:`~posenc_bench.experiment.axes.TaskAxis`, :class:`~posenc_bench.experiment.axes.TrainingAxis`),
    inherited, so each is declared, documented and checked once, in its axis (the bases are listed in
    reverse, so the fields run data, protocol, model, task, training). This class checks only the rules
    between axes.
    """

    def __post_init__(self) -> None:
        data, protocol, model, task, _ = self.axes  # each axis checks its own fields
        if model.spatiotemporal and data.window != model.n_windows * model.window_length:
            raise ValueError(
                f"window={data.window} must equal n_windows × window_length = {model.n_windows} × "
                f"{model.window_length} = {model.n_windows * model.window_length} for model 'spatiotemporal'"
            )
        if task.detect:
            self._check_detect(protocol, model)
        if task.lengthgen:
            raise ValueError(
                "task=lengthgen trains a causal decoder on algorithmic sequences, not on windows of a dataset: "
                "its runs are posenc_bench.experiment.lengthgen.LengthgenConfig (posenc bench --task lengthgen)"
            )

    def _check_detect(self, protocol: ProtocolAxis, model: ModelAxis) -> None:
        """The detect task forecasts within a window, from each series' own nominal training array."""
        if self.horizon >= self.window:
            raise ValueError(
                f"horizon must be < window, got horizon={self.horizon} with window={self.window} "
                "(a forecast of at least a whole window from one window)"
            )
        if not protocol.blocked:
            raise ValueError(
                f"protocol={protocol.protocol} applies to task=classify only: task=detect trains on each "
                "series' nominal training array and tests on its test array, so it has no split protocol; "
                "leave protocol out (blocked)"
            )
        if model.spatiotemporal:
            raise ValueError("model=spatiotemporal is a classifier: it applies to task=classify only")

    @classmethod
    def from_axes(cls, *axes: DataAxis | ProtocolAxis | ModelAxis | TaskAxis | TrainingAxis) -> RunConfig:
        """The run of the given axes (an axis left out takes its defaults)."""
        return cls(**{f.name: getattr(axis, f.name) for axis in axes for f in dataclasses.fields(axis)})

    @functools.cached_property
    def axes(self) -> Axes:
        """This run per axis (built, and so checked, when the run is)."""
        return Axes(
            _project(self, DataAxis),
            _project(self, ProtocolAxis),
            _project(self, ModelAxis),
            _project(self, TaskAxis),
            _project(self, TrainingAxis),
        )

    @property
    def encoding_label(self) -> str:
        """``encoding`` followed by its options, e.g. ``"rope+layout=adjacent"`` (names the run's directory)."""
        return self.encoding + "".join(
            f"+{k}={json.dumps(v)}" for k, v in sorted(self.encoding_options.items())
        )

    def identity(self, version: int = IDENTITY_VERSION) -> dict[str, Any]:
        """The run's identity in format ``version`` (:data:`IDENTITY_VERSION`): a JSON-ready dict of every
        field; in version 1, ``encoding_options`` only when there are any and the detect task's fields only
        when ``task == "detect"``, so runs recorded before these fields existed keep their identity."""
        if version not in IDENTITY_VERSIONS:
            raise ValueError(
                f"version must be one of {', '.join(map(str, IDENTITY_VERSIONS))}, got {version!r}"
            )
        out = dataclasses.asdict(self)
        out["dataset_options"] = dict(self.dataset_options)
        out["encoding_options"] = dict(self.encoding_options)
        if not out["encoding_options"]:
            del out["encoding_options"]
        if self.axes.task.classify:
            for name in ("task", "detector", "horizon", "smoothing", "holdout"):
                del out[name]
        return out

    def to_dict(self) -> dict[str, Any]:
        """:meth:`identity` in the current format: what a new run records."""
        return self.identity()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """The config :meth:`to_dict` wrote (fields it left out take their defaults); ``TypeError`` names an unknown key."""
        identity_version(data)
        fields = {k: v for k, v in data.items() if k != "identity_version"}
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise TypeError(f"run config has no field {', '.join(map(repr, unknown))}")
        return cls(**fields)


def _check_distinct(name: str, item: str, values: tuple[str, ...]) -> None:
    """A grid axis names each value once: a repeated one would train the same runs twice."""
    repeated = next((v for v in values if values.count(v) > 1), None)
    if repeated is not None:
        raise ValueError(f"{name} must not repeat {item}, got {repeated} twice")


@dataclass(frozen=True)
class BenchPlan:
    """A benchmark grid: every (encoding, scale, split seed, seed) on one dataset.

    Attributes:
        base: hyperparameters shared by every run (its ``encoding``/``scale``/seeds are replaced).
        encodings: registry names, in table order.
        scales: scale policies applied to additive encodings; other families run once, at ``"native"``.
        seeds: number of training seeds (``seed_start … seed_start + seeds − 1``).
        seed_start: the first training seed (default 0); each run's seed is part of its identity, so a
            grid of seeds ``5 … 9`` adds runs beside those of ``0 … 4`` and finds any already done.
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
    seed_start: int = 0
    shuffle_control: bool = True
    baseline: bool = True
    encoding_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    detectors: tuple[str, ...] = ()

    _parameter_constraints: ClassVar[Constraints] = {"seeds": REPEATS, "splits": REPEATS, "seed_start": SEED}

    def __post_init__(self) -> None:
        check_parameters(self)
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
        _check_distinct("scales", "a policy", self.scales)
        _check_distinct("detectors", "a name", self.detectors)
        for name, options in self.encoding_options.items():
            if name not in self.encodings:
                raise ValueError(
                    f"encoding_options name {name!r}, which is not among encodings {self.encodings}"
                )
            check_encoding_options(f"encoding_options[{name!r}]", options)

    def options_for(self, encoding: str) -> dict[str, Any]:
        """The constructor options of ``encoding`` in this plan (``{}`` when none were given)."""
        return dict(self.encoding_options.get(encoding, {}))

    def scales_for(self, encoding: str) -> tuple[str, ...]:
        """The scale policies that apply to ``encoding``: all requested when its registry entry scales, else ``native``."""
        return self.scales if registry.get(encoding).scales else ("native",)

    def runs(self) -> Iterator[RunConfig]:
        """Every run of the grid, split seed outermost (so one split's data is reused), then detector."""
        detectors = (
            (self.detectors or (self.base.detector,)) if self.base.axes.task.detect else (self.base.detector,)
        )
        for split_seed in range(self.splits):
            for detector in detectors:
                for encoding in self.encodings:
                    for scale in self.scales_for(encoding):
                        for seed in range(self.seed_start, self.seed_start + self.seeds):
                            yield dataclasses.replace(
                                self.base,
                                encoding=encoding,
                                encoding_options=self.options_for(encoding),
                                scale=scale,
                                split_seed=split_seed,
                                seed=seed,
                                detector=detector,
                            )
