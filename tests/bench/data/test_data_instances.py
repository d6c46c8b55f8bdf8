"""The DFStrans instance protocol: segments, labels, subsampling, stratified 70/15/15, min–max, leakage count."""

from __future__ import annotations

import numpy as np
import pytest

from posenc_bench.data import Dataset, Series, make_splits
from posenc_bench.data.instances import instance_splits

SEG = 10


def dataset(n_series: int = 3, length: int = 400, events_per_series: int = 6, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    series = []
    for i in range(n_series):
        starts = np.sort(rng.choice(np.arange(0, length - 40, 60), events_per_series, replace=False))
        events = [(int(s), int(s) + int(rng.integers(3, 25))) for s in starts]
        values = rng.normal(size=(length, 3)) * np.array([1.0, 5.0, 0.0]) + np.array([0, 2, 7])
        series.append(Series.from_events(f"s{i}", values, events))
    return Dataset("toy", series, 3)


def test_instances_are_the_non_overlapping_segments_labelled_by_any_step():
    data = dataset()
    splits = instance_splits(data, segment=SEG, seed=0)
    everything = {
        (int(s), int(t))
        for part in (splits.train, splits.val, splits.test)
        for s, t in zip(part.series, part.start)
    }
    assert everything == {(i, t) for i in range(3) for t in range(0, 400 - SEG + 1, SEG)}
    for part in (splits.train, splits.val, splits.test):
        for series, start, y in zip(part.series, part.start, part.y):
            assert y == int(data.series[series].labels[start : start + SEG].any())


def test_stratified_70_15_15_and_min_max_on_training_instances():
    data = dataset()
    splits = instance_splits(data, segment=SEG, seed=3)
    n = {name: len(splits[name].y) for name in ("train", "val", "test")}
    total = sum(n.values())
    assert abs(n["train"] - 0.7 * total) <= 1 and abs(n["val"] - n["test"]) <= 1
    rates = [splits[name].y.mean() for name in ("train", "val", "test")]
    assert max(rates) - min(rates) < 0.06
    raw = np.concatenate(
        [data.series[s].values[t : t + SEG] for s, t in zip(splits.train.series, splits.train.start)]
    )
    lo, hi = raw.min(axis=0), raw.max(axis=0)
    np.testing.assert_allclose(splits.center, lo)
    np.testing.assert_allclose(splits.scale, [hi[0] - lo[0], hi[1] - lo[1], 1.0])  # constant feature: scale 1
    X = splits.train.X.reshape(-1, 3)
    np.testing.assert_allclose(X.min(axis=0), [0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(X.max(axis=0), [1, 1, 0], atol=1e-6)
    assert splits.protocol["leakage_free"] is False and splits.protocol["normalisation"] == "minmax"


def test_anomalies_subsampled_to_the_percentage_of_all_instances():
    data = dataset()
    full = instance_splits(data, segment=SEG, seed=1)
    n_all = full.protocol["instances"]
    reduced = instance_splits(data, segment=SEG, seed=1, anomaly_percent=5)
    kept = sum(int(reduced[name].y.sum()) for name in ("train", "val", "test"))
    assert kept == int(5 * n_all / 100) == reduced.protocol["anomalous_kept"]
    normals = sum(int((reduced[name].y == 0).sum()) for name in ("train", "val", "test"))
    assert normals == n_all - full.protocol["anomalous_instances"]  # every normal instance is kept


def test_seeds_give_different_splits_and_one_seed_the_same():
    data = dataset()
    a, b, c = (instance_splits(data, segment=SEG, seed=s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a.test.start, b.test.start)
    assert not np.array_equal(a.test.start, c.test.start) or not np.array_equal(a.test.series, c.test.series)


def test_leakage_indicator_counts_test_events_with_training_instances():
    data = dataset()
    splits = instance_splits(data, segment=SEG, seed=0)
    offsets = data.event_offsets()

    def events(part):
        out = set()
        for s, t in zip(part.series, part.start):
            out |= {
                int(offsets[s]) + j
                for j, (a, e) in enumerate(data.series[s].events)
                if a < t + SEG and e >= t
            }
        return out

    expected = len(events(splits.test) & events(splits.train))
    assert splits.summary["test"]["events_in_train"] == expected == splits.protocol["test_events_in_train"]
    assert expected > 0  # events longer than a segment are cut across splits


def test_make_splits_dispatches_the_protocol():
    data = dataset()
    a = make_splits(data, window=SEG, protocol="dfstrans", seed=2, anomaly_percent=50)
    b = instance_splits(data, segment=SEG, seed=2, anomaly_percent=50)
    np.testing.assert_array_equal(a.test.X, b.test.X)


@pytest.mark.parametrize("percent", [0, -1, 100.5, float("nan"), True])
def test_bad_anomaly_percent_names_the_option(percent):
    with pytest.raises(ValueError, match="anomaly_percent must be a number in \\(0, 100\\]"):
        instance_splits(dataset(), segment=SEG, anomaly_percent=percent)


def test_too_few_positives_names_the_option_and_counts():
    with pytest.raises(ValueError, match="fewer than 2 positive instances.*anomaly_percent"):
        instance_splits(dataset(), segment=SEG, anomaly_percent=0.5)
    with pytest.raises(ValueError, match="segment=500 is longer than every series"):
        instance_splits(dataset(), segment=500)
