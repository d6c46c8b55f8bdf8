"""The built-in synthetic dataset: deterministic, fast, three documented anomaly families, useful splits."""

from __future__ import annotations

import time

import numpy as np
import pytest

from posenc_bench.data import SPLIT_NAMES, load_dataset, make_splits, make_synthetic
from posenc_bench.data.synthetic import (
    FAMILIES,
    LAG,
    ORDER_LAG,
    RESPONSE,
    SHIFT_SIZE,
    SPIKE_SIZE,
    TIMING_LAGS,
)
from posenc_bench.experiment.config import RunConfig

SMALL = {"n_series": 3, "length": 4096}


def _response_starts(response: np.ndarray) -> np.ndarray:
    """Steps where a ``RESPONSE`` pulse begins (the pattern matched in full), from the column itself."""
    n = len(RESPONSE)
    windows = np.lib.stride_tricks.sliding_window_view(response, n)
    return np.flatnonzero((windows == RESPONSE).all(axis=1))


def test_deterministic_by_seed():
    a, b, c = (make_synthetic(seed=seed, **SMALL) for seed in (5, 5, 6))
    for sa, sb in zip(a.series, b.series):
        np.testing.assert_array_equal(sa.values, sb.values)
        assert sa.events == sb.events and sa.event_kinds == sb.event_kinds
    assert not np.array_equal(a.series[0].values, c.series[0].values)


def test_default_is_fast_and_splits_are_informative():
    t0 = time.perf_counter()
    ds = load_dataset("synthetic")
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, f"generation took {elapsed:.3f} s"
    bench = RunConfig()  # the window and stride of the default `posenc bench`
    sp = make_splits(ds, window=bench.window, stride=bench.stride)
    total = sum(sp.summary[name]["windows"] for name in SPLIT_NAMES)
    assert 1200 <= total <= 2500, sp.summary  # sized for the 3-minute default benchmark
    kinds = [k for s in ds.series for k in s.event_kinds]
    for name in SPLIT_NAMES:
        assert sp.summary[name]["positives"] >= 24 and sp.summary[name]["events"] >= 10, sp.summary
        windows = getattr(sp, name)
        families = {FAMILIES[kinds[e]] for e in windows.event[windows.event >= 0]}
        assert families == {"point", "order/timing", "long-range"}, (name, families)


def test_counts_per_family_follow_the_rates():
    ds = make_synthetic(n_series=4, length=5000, spikes=2.0, order=1.0, timing=3.0, long_range=0.4, seed=1)
    assert ds.n_features == 4 + 2
    for i, s in enumerate(ds.series):
        kinds = s.event_kinds
        assert kinds.count("spike") == 10 and kinds.count("order") == 5 and kinds.count("timing") == 15
        long_kinds = [k for (st, _), k in sorted(zip(s.events, kinds)) if FAMILIES[k] == "long-range"]
        first = ("level_shift", "frequency")[i % 2]
        assert long_kinds == [first, ("level_shift", "frequency")[1 - i % 2]]
        assert all(e - st + 1 >= 96 for (st, e), k in zip(s.events, kinds) if FAMILIES[k] == "long-range")
        gaps = [b - a_end for (_, a_end), (b, _) in zip(s.events[:-1], s.events[1:])]
        assert min(gaps) > 4  # events never touch


def test_point_anomalies_are_single_steps():
    ds, clean = make_synthetic(seed=2, **SMALL), make_synthetic(seed=2, spikes=0, **SMALL)
    n_sensors = ds.n_features - 2
    for s, c in zip(ds.series, clean.series):
        spikes = [st for (st, en), k in zip(s.events, s.event_kinds) if k == "spike"]
        assert spikes and all(st == en for (st, en), k in zip(s.events, s.event_kinds) if k == "spike")
        differs = np.argwhere(s.values != c.values)  # (step, feature) pairs
        # one feature at each spike step, nothing else
        assert sorted(differs[:, 0].tolist()) == sorted(spikes)
        assert (differs[:, 1] < n_sensors).all()
        size = np.abs(s.values[differs[:, 0], differs[:, 1]] - c.values[differs[:, 0], differs[:, 1]])
        # the spike-free series still holds its level shifts, which inflate σ a little: ≥ 0.8 of the size
        assert (size >= 0.8 * SPIKE_SIZE * c.values[:, differs[:, 1]].std(axis=0)).all()


def test_order_and_timing_anomalies_only_move_the_response():
    ds, nominal = make_synthetic(seed=3, **SMALL), make_synthetic(seed=3, order=0, timing=0, **SMALL)
    n_sensors = ds.n_features - 2
    seen = set()
    for s, n in zip(ds.series, nominal.series):
        other = [(ev, k) for ev, k in zip(s.events, s.event_kinds) if k not in ("order", "timing")]
        assert other == list(zip(n.events, n.event_kinds))  # spikes and long ranges untouched
        # sensors and command untouched
        np.testing.assert_array_equal(s.values[:, : n_sensors + 1], n.values[:, : n_sensors + 1])
        commands = np.flatnonzero(s.values[:, n_sensors])
        nominal_starts = _response_starts(n.values[:, n_sensors + 1])
        np.testing.assert_array_equal(nominal_starts, commands + LAG)  # normal operation: lag LAG
        starts = set(_response_starts(s.values[:, n_sensors + 1]).tolist())
        for (st, en), kind in zip(s.events, s.event_kinds):
            if kind not in ("order", "timing"):
                continue
            (c,) = commands[(commands >= st) & (commands <= en)]
            (r,) = [t for t in starts if st <= t <= en]
            lag = r - c
            assert (lag == ORDER_LAG and r + len(RESPONSE) - 1 < c) if kind == "order" else lag in TIMING_LAGS
            assert (st, en) == (min(c, r), max(c, r + len(RESPONSE) - 1))
            seen.add(kind)
            # a window holding both patterns: per feature the same multiset of values as in normal operation
            lo, hi = min(st, c + LAG) - 3, max(en, c + LAG + len(RESPONSE) - 1) + 3
            np.testing.assert_array_equal(
                np.sort(s.values[lo : hi + 1], axis=0), np.sort(n.values[lo : hi + 1], axis=0)
            )
            assert not np.array_equal(s.values[lo : hi + 1], n.values[lo : hi + 1])
    assert seen == {"order", "timing"}


def test_long_range_anomalies():
    ds = make_synthetic(seed=4, spikes=0, order=0, timing=0, **SMALL)
    flat = make_synthetic(seed=4, spikes=0, order=0, timing=0, long_range=0, **SMALL)
    n_sensors = ds.n_features - 2
    kinds_seen, shifts_checked = set(), 0
    for s, f in zip(ds.series, flat.series):
        assert f.events == [] and all(FAMILIES[k] == "long-range" for k in s.event_kinds)
        diff = s.values[:, :n_sensors] - f.values[:, :n_sensors]
        np.testing.assert_array_equal(s.values[:, n_sensors:], f.values[:, n_sensors:])  # procedures as usual
        first = min(st for st, _ in s.events)
        assert not diff[:first].any()
        slowed = min(
            [st for (st, _), k in zip(s.events, s.event_kinds) if k == "frequency"], default=s.length
        )
        for (st, en), kind in zip(s.events, s.event_kinds):
            kinds_seen.add(kind)
            if kind == "level_shift" and en < slowed:  # (a slowed source leaves a phase offset behind it)
                shifts_checked += 1  # two sensors, a constant shift of SHIFT_SIZE σ over the range
                inside = diff[st : en + 1]
                moved = np.flatnonzero(np.abs(inside).max(axis=0) > 0)
                assert len(moved) == 2
                np.testing.assert_allclose(
                    inside[:, moved], np.tile(inside[0, moved], (len(inside), 1)), rtol=1e-9
                )
                # σ is measured before the shifts (with a slowed source if the series has one): within 10 %
                expected = SHIFT_SIZE * f.values[:, moved].std(axis=0)
                np.testing.assert_allclose(inside[0, moved], expected, rtol=0.1)
            elif kind == "frequency":  # the fast source slows down: less step-to-step motion
                assert np.abs(diff[st : en + 1]).max() > 0.1
                assert (
                    np.abs(np.diff(s.values[st : en + 1, :n_sensors], axis=0)).mean()
                    < np.abs(np.diff(f.values[st : en + 1, :n_sensors], axis=0)).mean()
                )
    assert kinds_seen == {"level_shift", "frequency"} and shifts_checked >= 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_series": 0}, "n_series must be a positive int"),
        ({"length": 100}, "length must be at least 512"),
        ({"spikes": -1}, r"spikes must be a finite number >= 0 \(events per 1,000 steps\), got -1"),
        ({"order": float("nan")}, "order must be a finite number >= 0"),
        ({"seed": -2}, "seed must be an int >= 0, got -2"),
        ({"length": 1024, "order": 40}, "too short for 41 order"),
        ({"length": 1024, "long_range": 6}, "too short for 6 long-range"),
    ],
)
def test_bad_options(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_synthetic(**kwargs)
