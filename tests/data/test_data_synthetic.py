"""The built-in synthetic dataset: deterministic, fast, small, anomalies as documented."""

from __future__ import annotations

import time

import numpy as np
import pytest

from posenc.data import SPLIT_NAMES, load_dataset, make_splits, make_synthetic
from posenc.data.synthetic import LAG, SPIKE_SIZE


def test_deterministic_by_seed():
    a, b, c = make_synthetic(seed=5), make_synthetic(seed=5), make_synthetic(seed=6)
    for sa, sb in zip(a.series, b.series):
        np.testing.assert_array_equal(sa.values, sb.values)
        assert sa.events == sb.events and sa.event_kinds == sb.event_kinds
    assert not np.array_equal(a.series[0].values, c.series[0].values)


def test_fast_and_small_by_default():
    t0 = time.perf_counter()
    ds = load_dataset("synthetic")
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"generation took {elapsed:.3f} s"
    sp = make_splits(ds)
    total = sum(sp.summary[name]["windows"] for name in SPLIT_NAMES)
    assert 500 <= total <= 3000
    assert all(sp.summary[name]["positives"] > 0 for name in SPLIT_NAMES)


def test_anomaly_kinds_and_commands_as_documented():
    ds = make_synthetic(n_series=4, seed=2, spikes=4, order=3, timing=3)
    n_sensors = ds.n_features - 3
    for i, s in enumerate(ds.series):
        kinds = s.event_kinds
        long_kind = ("level_shift", "frequency")[i % 2]
        assert sorted(kinds) == sorted(["spike"] * 4 + ["order"] * 3 + ["timing"] * 3 + [long_kind])
        commands = s.values[:, n_sensors:]
        assert set(np.unique(commands)) <= {0.0, 1.0}
        a_times, b_times = np.flatnonzero(commands[:, 0]), np.flatnonzero(commands[:, 1])
        assert len(a_times) == len(b_times)
        in_event = {(st, en): k for (st, en), k in zip(s.events, kinds)}
        for (st, en), kind in in_event.items():
            a = a_times[(a_times >= st) & (a_times <= en)]
            b = b_times[(b_times >= st) & (b_times <= en)]
            if kind == "order":  # B first, A LAG steps later: same commands, wrong order
                assert len(a) == len(b) == 1 and a[0] - b[0] == LAG
            if kind == "timing":  # A first, B at the wrong lag
                assert len(a) == len(b) == 1 and b[0] - a[0] in (LAG - 3, LAG - 2, LAG + 2, LAG + 3)
            if kind == "spike":
                z = np.abs(s.values[st, :n_sensors] - np.median(s.values[:, :n_sensors], axis=0))
                assert z.max() > 0.5 * SPIKE_SIZE * s.values[:, :n_sensors].std(axis=0).min()
        # outside anomalies every procedure is A then B exactly LAG steps later
        normal = [t for t in a_times if not s.labels[t]]
        assert normal and all(t + LAG in set(b_times) for t in normal)


def test_order_anomaly_is_invisible_to_command_counts():
    ds = make_synthetic(seed=3)
    s = ds.series[0]
    n_sensors = ds.n_features - 3
    for (st, en), kind in zip(s.events, s.event_kinds):
        if kind in ("order", "timing"):
            counts = s.values[st:en + 1, n_sensors:n_sensors + 2].sum(axis=0)
            assert counts.tolist() == [1.0, 1.0]  # one A and one B, as in a normal procedure


def test_long_range_anomalies_move_the_signal():
    ds = make_synthetic(n_series=2, seed=0, spikes=0, order=0, timing=0)
    shift, freq = ds.series
    (st, en), = shift.events
    inside, outside = shift.values[st:en + 1, :-3].mean(axis=0), shift.values[:st, :-3].mean(axis=0)
    assert np.abs(inside - outside).max() > 0.3
    assert freq.event_kinds == ["frequency"]


@pytest.mark.parametrize("kwargs, message", [
    ({"n_series": 0}, "n_series must be a positive int"),
    ({"length": 100}, "length must be at least 512"),
    ({"spikes": -1}, "spikes must be an int >= 0"),
    ({"length": 512, "order": 40}, "too short for 40 order"),
])
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_synthetic(**kwargs)
