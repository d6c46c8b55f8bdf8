"""MSL from the real data (skipped when absent): counts from its README, labels, splits."""

from __future__ import annotations

import csv
import json
from itertools import combinations

import numpy as np
import pytest

from posenc_bench.data import SPLIT_NAMES, duplicate_groups, load_dataset, load_telemanom, make_splits


@pytest.fixture(scope="module")
def msl(msl_dir):
    return load_telemanom(msl_dir)


def test_counts_match_the_readme(msl, msl_dir):
    assert msl.name == "msl" and len(msl.series) == 27 and msl.n_features == 55
    assert sum(s.length for s in msl.series) == 73_729
    assert sum(int(s.labels.sum()) for s in msl.series) == 7_766
    assert sum(len(s.events) for s in msl.series) == 36
    kinds = [k for s in msl.series for k in s.event_kinds]
    assert len(kinds) == 36 and set(kinds) == {"point", "contextual"}


def test_labels_are_the_inclusive_csv_ranges_of_the_test_arrays(msl, msl_dir):
    test = np.load(msl_dir / "test.npz")
    with (msl_dir / "labeled_anomalies.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [s.name for s in msl.series] == [r["chan_id"] for r in rows]
    for series, row in zip(msl.series, rows):
        np.testing.assert_array_equal(series.values, test[row["chan_id"]])
        expected = np.zeros(int(row["num_values"]), dtype=bool)
        for start, end in json.loads(row["anomaly_sequences"]):
            expected[start : end + 1] = True
        np.testing.assert_array_equal(series.labels, expected)


def test_duplicate_test_arrays_are_detected_without_names(msl, msl_dir):
    with np.load(msl_dir / "test.npz") as archive:
        test = dict(archive)
    keys = list(test)
    identical = [
        (a, b)
        for a, b in combinations(keys, 2)
        if test[a].shape == test[b].shape and test[a].tobytes() == test[b].tobytes()
    ]
    assert identical  # the README documents one such pair
    names = [s.name for s in msl.series]
    found = [tuple(names[i] for i in g) for g in duplicate_groups(msl) if len(g) > 1]
    assert sorted(found) == sorted(identical)


@pytest.fixture(scope="module")
def default_splits(msl):
    return make_splits(msl)


def test_default_split_is_leakage_free_and_complete(msl, default_splits):
    sp = default_splits
    window = sp.protocol["window"]
    held = {
        name: {(int(s), int(t) + j) for s, t in zip(sp[name].series, sp[name].start) for j in range(window)}
        for name in SPLIT_NAMES
    }
    assert not held["train"] & held["val"]
    assert not held["train"] & held["test"]
    assert not held["val"] & held["test"]
    events = {}
    for name in SPLIT_NAMES:
        assert sp.summary[name]["positives"] > 0 and sp.summary[name]["events"] > 0
        for s, t in zip(sp[name].series, sp[name].start):
            for e_start, e_end in msl.series[s].events:
                if e_start <= t + window - 1 and e_end >= t:
                    events.setdefault((int(s), e_start), set()).add(name)
    assert len(events) == 36 and all(len(v) == 1 for v in events.values())
    assert sum(sp.summary[name]["events"] for name in SPLIT_NAMES) == 36
    # duplicated series share every split decision
    for group in duplicate_groups(msl):
        for name in SPLIT_NAMES:
            starts = [sorted(sp[name].start[sp[name].series == i]) for i in group]
            assert all(s == starts[0] for s in starts)
    assert np.isfinite(sp.train.X).all() and sp.train.X.dtype == np.float32


def test_repeated_splits_differ_and_keep_positives(msl):
    a, b = make_splits(msl, seed=1), make_splits(msl, seed=2)
    assert a.protocol["segments"] != b.protocol["segments"]
    for sp in (a, b):
        assert all(sp.summary[name]["positives"] > 0 for name in SPLIT_NAMES)


def test_named_resolution_and_train_arrays(msl_dir, monkeypatch):
    monkeypatch.setenv("POSENC_DATA", str(msl_dir.parent))
    ds = load_dataset("msl", include_train=True)
    assert len(ds.series) == 54 and sum(s.train_only for s in ds.series) == 27
    assert sum(s.length for s in ds.series if s.train_only) == 58_317
