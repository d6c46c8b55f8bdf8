"""Typed results: one frozen :class:`RunRecord` per trained run, baseline or no-skill row, and one
:class:`LengthgenRecord` per ``--task lengthgen`` run (its ``metrics.json``; see that class).

A record is what ``metrics.json`` holds for a trained run and what ``results.json`` lists
under ``runs``, ``baseline`` and ``no_skill``. :meth:`RunRecord.to_json` writes exactly the
keys those files have always had, and :meth:`RunRecord.from_json` reads every file written so
far (older ones lack ``subset``, ``encoding_options`` or ``test_events_in_train``; NaN was
written as ``null``); keys this version does not model are kept in ``extra`` and written back.

Keys of a trained run (``kind="model"``)::

    dataset subset encoding scale split_seed seed detector encoding_options
    test val shuffled_test threshold                       metric name → value
    test_windows test_positive_windows test_events test_events_in_train    (TestSplit)
    best_epoch epochs_run stopped_early train_seconds windows_per_s        (Training)
    score_seconds skipped
    series series_seconds           per-series scores (in ``extra``; :meth:`RunRecord.per_series`)

A baseline (``kind="baseline"``) has ``name``, ``split_seed``, ``test`` (and ``seconds``); the
no-skill row (``kind="no-skill"``) ``split_seed`` and ``test``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

RecordKind = Literal["model", "baseline", "no-skill"]
KINDS: tuple[str, ...] = get_args(RecordKind)

Metrics = Mapping[str, float]
"""Metric name → value; per-family metrics are named ``"<metric>:<family>"`` (e.g. ``"auprc:spike"``)."""


def _metrics(value: Any, key: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ValueError(f"record key {key!r} must be an object of metric → number, got {value!r}")
    out = {}
    for name, v in value.items():
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"record key {key!r}: metric {name!r} must be a number, got {v!r}")
        out[str(name)] = math.nan if v is None else float(v)
    return out


@dataclass(frozen=True)
class TestSplit:
    """Size of the test split a run was scored on: windows, positive windows, events (and those also in training)."""

    windows: int
    positive_windows: int
    events: int
    events_in_train: int | None = None

    KEYS = ("test_windows", "test_positive_windows", "test_events", "test_events_in_train")


@dataclass(frozen=True)
class Training:
    """How a run trained: best and last epoch, early stop, seconds of training and windows per second."""

    best_epoch: int
    epochs_run: int
    stopped_early: bool
    train_seconds: float
    windows_per_s: float

    KEYS = ("best_epoch", "epochs_run", "stopped_early", "train_seconds", "windows_per_s")


_SCALARS = (
    "dataset",
    "subset",
    "scale",
    "seed",
    "detector",
    "threshold",
    "score_seconds",
    "seconds",
    "skipped",
)


@dataclass(frozen=True)
class RunRecord:
    """One row's worth of results (module docstring); ``None`` marks a key the record does not have.

    Attributes:
        kind: ``"model"`` (a trained run), ``"baseline"`` or ``"no-skill"``.
        split_seed: the split it was scored on.
        test: test metrics, per-family ones included (:data:`Metrics`).
        name: the encoding of a trained run, the baseline's name (``None``: unnamed, the
            order-free baseline of older files).
        scale, seed, dataset, subset, detector: a trained run's identity.
        encoding_options: the encoding's constructor options.
        val, shuffled_test: validation metrics and those on time-shuffled test windows.
        threshold: the score threshold chosen on validation (classify).
        test_split: the test split's size.
        training: epochs and timings of training.
        score_seconds: seconds to score the test data (detect); seconds: a baseline's seconds.
        skipped: whether the run was read from disk instead of trained.
        extra: keys this version does not model (kept and written back).
    """

    kind: RecordKind
    split_seed: int
    test: Metrics
    name: str | None = None
    scale: str | None = None
    seed: int | None = None
    dataset: str | None = None
    subset: str | None = None
    detector: str | None = None
    encoding_options: Mapping[str, Any] | None = None
    val: Metrics | None = None
    shuffled_test: Metrics | None = None
    threshold: float | None = None
    test_split: TestSplit | None = None
    training: Training | None = None
    score_seconds: float | None = None
    seconds: float | None = None
    skipped: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if isinstance(self.split_seed, bool) or not isinstance(self.split_seed, int) or self.split_seed < 0:
            raise ValueError(f"split_seed must be an int >= 0, got {self.split_seed!r}")
        if self.kind == "model" and (self.name is None or self.scale is None or self.seed is None):
            raise ValueError("a model record needs its encoding (name), scale and seed")

    @property
    def encoding(self) -> str:
        """The encoding of a trained run (``name``); ``ValueError`` for other kinds."""
        if self.kind != "model" or self.name is None:
            raise ValueError(f"a {self.kind} record has no encoding")
        return self.name

    def per_family(self, metric: str = "auprc") -> dict[str, float]:
        """``{family: value}`` of the test metrics named ``"<metric>:<family>"``."""
        return {k.split(":", 1)[1]: v for k, v in self.test.items() if k.startswith(f"{metric}:")}

    def per_series(self, metric: str) -> dict[str, float]:
        """``{series: value}`` of a per-series metric (``extra["series"]``; :mod:`posenc_bench.experiment.series`).

        Empty when the record has no per-series scores (files written before they existed); a value
        stored as ``null`` (NaN) is left out.
        """
        table = self.extra.get("series") or {}
        out = {}
        for name, values in table.items():
            v = values.get(metric) if isinstance(values, Mapping) else None
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out[str(name)] = float(v)
        return out

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object ``metrics.json`` / ``results.json`` hold (NaN stays a float)."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["encoding" if self.kind == "model" else "name"] = self.name
        out["split_seed"] = self.split_seed
        out["test"] = dict(self.test)
        for key in _SCALARS:
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.encoding_options is not None:
            out["encoding_options"] = dict(self.encoding_options)
        for key in ("val", "shuffled_test"):
            if getattr(self, key) is not None:
                out[key] = dict(getattr(self, key))
        for part in (self.test_split, self.training):
            if part is not None:
                values = [getattr(part, f.name) for f in fields(part)]
                out.update({k: v for k, v in zip(part.KEYS, values) if v is not None})
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, kind: RecordKind = "model") -> RunRecord:
        """Read a record of ``kind`` from its JSON object (module docstring); ``ValueError`` naming a bad key."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a record must be a JSON object, got {type(data).__name__}")
        rest = dict(data)
        name_key = "encoding" if kind == "model" else "name"
        if "test" not in rest or "split_seed" not in rest:
            raise ValueError(f"a {kind} record needs 'split_seed' and 'test', got keys {sorted(rest)}")
        values: dict[str, Any] = {
            "kind": kind,
            "split_seed": rest.pop("split_seed"),
            "test": _metrics(rest.pop("test"), "test"),
            "name": rest.pop(name_key, None),
        }
        for key in _SCALARS:
            values[key] = rest.pop(key, None)
        if "encoding_options" in rest:
            values["encoding_options"] = dict(rest.pop("encoding_options"))
        for key in ("val", "shuffled_test"):
            if key in rest:
                values[key] = _metrics(rest.pop(key), key)
        if all(k in rest for k in TestSplit.KEYS[:3]):
            values["test_split"] = TestSplit(*(rest.pop(k, None) for k in TestSplit.KEYS))
        if all(k in rest for k in Training.KEYS):
            values["training"] = Training(*(rest.pop(k) for k in Training.KEYS))
        return cls(**values, extra=rest)


def as_record(record: RunRecord | Mapping[str, Any], *, kind: RecordKind = "model") -> RunRecord:
    """``record`` itself, or read from its JSON object as ``kind``."""
    return record if isinstance(record, RunRecord) else RunRecord.from_json(record, kind=kind)


def _floats(value: Any, key: str) -> dict[str, float]:
    """A JSON object of length (or depth) → number, as floats; ``ValueError`` naming ``key`` otherwise."""
    if not isinstance(value, Mapping) or any(
        isinstance(v, bool) or not isinstance(v, (int, float)) for v in value.values()
    ):
        raise ValueError(f"record key {key!r} must be an object of name → number, got {value!r}")
    return {str(k): float(v) for k, v in value.items()}


@dataclass(frozen=True)
class FitReached:
    """Where a run trained to a fit criterion stopped: its held-out exact match at ``L``, the step, and
    whether the criterion was reached there (else the step is the budget)."""

    accuracy: float
    step: int
    reached: bool


@dataclass(frozen=True)
class LengthgenRecord:
    """A finished ``--task lengthgen`` run's results: its ``metrics.json``, typed and frozen.

    :meth:`to_json` writes exactly the keys those files have always had, and :meth:`from_json` reads
    every one written so far (the keys ``scaled`` and ``fit`` only exist for runs tested with rotary
    scaling and runs trained to a fit criterion); keys this version does not model are kept in ``extra``.

    Attributes:
        accuracy: exact match per test length (``"16"`` → share of the test set).
        depths: per test length, exact match per passkey depth (``{}`` for the other tasks).
        final_loss: the training loss at the last logged step (``None``: no step logged).
        train_seconds, train_tokens, tokens_per_s: how long training took, on how many tokens.
        scaled: exact match per test length with the rotary frequencies scaled at test time, or ``None``.
        fit: where training stopped against the fit criterion, or ``None`` (a fixed number of steps).
        skipped: whether the run was read from disk instead of trained (not written).
        extra: keys this version does not model (kept and written back).
    """

    accuracy: Mapping[str, float]
    depths: Mapping[str, Mapping[str, float]]
    final_loss: float | None
    train_seconds: float
    train_tokens: int
    tokens_per_s: float
    scaled: Mapping[str, float] | None = None
    fit: FitReached | None = None
    skipped: bool | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as ``metrics.json`` holds it."""
        out: dict[str, Any] = {
            "accuracy": dict(self.accuracy),
            "depths": {n: dict(d) for n, d in self.depths.items()},
            "final_loss": self.final_loss,
            "train_seconds": self.train_seconds,
            "train_tokens": self.train_tokens,
            "tokens_per_s": self.tokens_per_s,
        }
        if self.scaled is not None:
            out["scaled"] = dict(self.scaled)
        if self.fit is not None:
            out["fit"] = {"accuracy": self.fit.accuracy, "step": self.fit.step, "reached": self.fit.reached}
        return {**out, **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LengthgenRecord:
        """Read a record from its JSON object; ``ValueError`` naming a missing or bad key."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a record must be a JSON object, got {type(data).__name__}")
        rest = dict(data)
        needed = ("accuracy", "depths", "final_loss", "train_seconds", "train_tokens", "tokens_per_s")
        missing = [k for k in needed if k not in rest]
        if missing:
            raise ValueError(f"a lengthgen record needs {', '.join(needed)}; missing {', '.join(missing)}")
        depths = rest.pop("depths")
        if not isinstance(depths, Mapping):
            raise ValueError(f"record key 'depths' must be an object, got {depths!r}")
        fit = rest.pop("fit", None)
        if fit is not None and (not isinstance(fit, Mapping) or set(fit) != {"accuracy", "step", "reached"}):
            raise ValueError(f"record key 'fit' must hold accuracy, step and reached, got {fit!r}")
        scaled = rest.pop("scaled", None)
        final_loss = rest.pop("final_loss")
        return cls(
            accuracy=_floats(rest.pop("accuracy"), "accuracy"),
            depths={str(n): _floats(d, f"depths[{n}]") for n, d in depths.items()},
            final_loss=None if final_loss is None else float(final_loss),
            train_seconds=float(rest.pop("train_seconds")),
            train_tokens=int(rest.pop("train_tokens")),
            tokens_per_s=float(rest.pop("tokens_per_s")),
            scaled=None if scaled is None else _floats(scaled, "scaled"),
            fit=None
            if fit is None
            else FitReached(float(fit["accuracy"]), int(fit["step"]), bool(fit["reached"])),
            extra=rest,
        )
