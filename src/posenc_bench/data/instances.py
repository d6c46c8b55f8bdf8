"""The DFStrans evaluation protocol: random stratified splits of non-overlapping segments (LEAKY by design).

Labaien et al. (2023) evaluate their model on *instances*:

1. every series is cut into non-overlapping segments of ``segment`` steps (a shorter tail is
   dropped); an instance is anomalous if any of its steps is;
2. anomalous instances are subsampled at random to ``anomaly_percent`` % of all instances
   (``⌊percent · n / 100⌋``; all are kept when there are fewer);
3. a stratified shuffle split deals the instances 70 / 30, and the 30 % again 50 / 50
   (``sklearn.model_selection.StratifiedShuffleSplit``, ``random_state = seed``; the published
   code splits the second stage without stratification, which can leave a split without
   positives — here both stages are stratified); repeating over seeds is their "CV iterations";
4. each sensor (feature) is min–max scaled by the minimum and maximum over the training
   instances (a constant feature keeps scale 1).

Neighbouring segments of one anomalous event are dealt independently, so an event is usually
seen in training and tested on: :attr:`Splits.summary` ``["test"]["events_in_train"]`` counts
the test events that also have a training instance (the leakage indicator).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc.errors import UsageError
from posenc_bench.data.containers import SPLIT_NAMES, Dataset, Splits
from posenc_bench.data.windows import WindowIndex, materialise, window_index

FRACTIONS = (0.7, 0.15, 0.15)


def check_anomaly_percent(value: object) -> float:
    """``value`` as a float in (0, 100], else ``ValueError`` naming ``anomaly_percent``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) <= 100:
        raise ValueError(
            f"anomaly_percent must be a number in (0, 100] (percent of all instances kept "
            f"anomalous), got {value!r}"
        )
    return float(value)


def _events_per_instance(dataset: Dataset, index: WindowIndex, segment: int) -> list[set[int]]:
    """Ids of every event each instance overlaps (events numbered across the dataset, in order)."""
    offsets = dataset.event_offsets()
    out = []
    for series, start in zip(index.series, index.start):
        events = dataset.series[int(series)].events
        out.append(
            {
                int(offsets[series]) + j
                for j, (s, e) in enumerate(events)
                if s < start + segment and e >= start
            }
        )
    return out


def _require_positives(
    split: str, n: int, percent: float, segment: int, n_instances: int, n_anomalous: int
) -> None:
    if n < 2:  # a UsageError: the bench writes the field as its flag
        raise UsageError(
            f"anomaly_percent={percent:g}: fewer than 2 positive instances for the {split} split ({n}; the dataset "
            f"has {n_anomalous} anomalous of {n_instances} instances of segment={segment} steps); a stratified "
            f"split needs at least 2 per class: raise anomaly_percent or shorten the segment"
        )


def _pick(index: WindowIndex, rows: NDArray[np.int64]) -> WindowIndex:
    rows = np.sort(rows)
    return WindowIndex(*(column[rows] for column in index))


def instance_splits(
    dataset: Dataset,
    *,
    segment: int,
    seed: int = 0,
    anomaly_percent: float = 100.0,
    fractions: Sequence[float] = FRACTIONS,
) -> Splits:
    """Split ``dataset`` into train / val / test instances by the DFStrans protocol (module docstring).

    Args:
        dataset: the labelled series.
        segment: instance length in time steps (non-overlapping segments of every series).
        seed: ``random_state`` of the subsampling and of both stratified splits.
        anomaly_percent: anomalous instances kept, in percent of all instances, in (0, 100].
        fractions: (train, val, test) shares, default 70 / 15 / 15.

    Raises:
        ValueError: bad options, no series as long as ``segment``, or fewer than 2 positive
            instances for a stratified split (all kept, or the val + test part), named with the counts.
    """
    from sklearn.model_selection import StratifiedShuffleSplit

    segment = validate.positive_int("segment", segment)
    percent = check_anomaly_percent(anomaly_percent)
    train_share, val_share, test_share = (float(f) for f in fractions)
    if min(train_share, val_share, test_share) <= 0 or abs(train_share + val_share + test_share - 1) > 1e-9:
        raise ValueError(f"fractions must be three numbers > 0 summing to 1, got {tuple(fractions)!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    longest = max(s.length for s in dataset.series)
    if segment > longest:
        raise ValueError(
            f"segment={segment} is longer than every series of dataset {dataset.name!r} "
            f"(longest {longest} steps); use a shorter segment"
        )
    everything = window_index(
        dataset, [(i, 0, s.length) for i, s in enumerate(dataset.series)], window=segment, stride=segment
    )
    rng = np.random.default_rng(seed)
    positive, negative = np.flatnonzero(everything.y == 1), np.flatnonzero(everything.y == 0)
    n_keep = min(len(positive), int(percent * len(everything.y) / 100))
    kept_positive = rng.permutation(positive)[:n_keep]
    kept = np.concatenate([negative, kept_positive])
    labels = everything.y[kept]
    _require_positives("train + val + test", n_keep, percent, segment, len(everything.y), len(positive))
    outer = StratifiedShuffleSplit(
        n_splits=1, train_size=train_share, test_size=val_share + test_share, random_state=seed
    )
    train_rows, rest = next(outer.split(np.zeros(len(kept)), labels))
    _require_positives(
        "val + test", int(labels[rest].sum()), percent, segment, len(everything.y), len(positive)
    )
    inner = StratifiedShuffleSplit(
        n_splits=1, test_size=test_share / (val_share + test_share), random_state=seed
    )
    val_part, test_part = next(inner.split(np.zeros(len(rest)), labels[rest]))
    indices = {
        "train": _pick(everything, kept[train_rows]),
        "val": _pick(everything, kept[rest[val_part]]),
        "test": _pick(everything, kept[rest[test_part]]),
    }
    events = {name: _events_per_instance(dataset, indices[name], segment) for name in SPLIT_NAMES}
    covered = {name: set().union(*events[name]) for name in SPLIT_NAMES}
    summary = {
        name: {
            "windows": len(indices[name].y),
            "positives": int(indices[name].y.sum()),
            "events": len(covered[name]),
        }
        for name in SPLIT_NAMES
    }
    summary["test"]["events_in_train"] = len(covered["test"] & covered["train"])
    empty = [name for name in SPLIT_NAMES if summary[name]["positives"] == 0]
    if empty:
        raise ValueError(
            f"split {empty[0]!r} has no positive instance (anomaly_percent={percent:g}, seed={seed}, "
            f"{n_keep} anomalous instances kept): counts per split {summary}"
        )

    rows = np.concatenate(
        [
            dataset.series[int(i)].values[s : s + segment]
            for i, s in zip(indices["train"].series, indices["train"].start)
        ]
    )
    low, high = rows.min(axis=0), rows.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    windows = {
        name: materialise(dataset, indices[name], window=segment, center=low, scale=span)
        for name in SPLIT_NAMES
    }
    record = {
        "protocol": "dfstrans",
        "leakage_free": False,
        "dataset": dataset.name,
        "window": segment,
        "stride": segment,
        "fractions": [train_share, val_share, test_share],
        "seed": seed,
        "normalisation": "minmax",
        "anomaly_percent": percent,
        "instances": len(everything.y),
        "anomalous_instances": len(positive),
        "anomalous_kept": n_keep,
        "test_events_in_train": summary["test"]["events_in_train"],
        "test_events": summary["test"]["events"],
    }
    return Splits(windows["train"], windows["val"], windows["test"], summary, low, span, record)
