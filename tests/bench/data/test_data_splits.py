"""Leakage-free, event-aware, duplicate-aware blocked splits (docs/protocol.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.data import SPLIT_NAMES, Dataset, Series, duplicate_groups, make_splits


def many_events_dataset(seed: int, n_series: int = 3, length: int = 900, gap: int = 60) -> Dataset:
    """Series with an event every ``gap``-ish steps (lengths 1..20), so every split can get some."""
    rng = np.random.default_rng(seed)
    series = []
    for i in range(n_series):
        events, t = [], int(rng.integers(5, gap))
        while t + 20 < length:
            end = t + int(rng.integers(0, 20))
            events.append((t, end))
            t = end + int(rng.integers(gap // 2, gap * 2))
        series.append(Series.from_events(f"s{i}", rng.normal(size=(length, 3)), events))
    return Dataset("toy", series, 3)


def steps(windows, index, window):
    """{(series, t)} of every time step held by a window of ``windows``."""
    return {
        (int(s), int(t0) + j)
        for s, t0 in zip(windows.series[index], windows.start[index])
        for j in range(window)
    }


@given(
    st.integers(0, 10_000),
    st.integers(2, 24),
    st.integers(1, 30),
    st.integers(0, 30),
    st.sampled_from([(0.6, 0.2, 0.2), (0.5, 0.25, 0.25), (0.7, 0.15, 0.15)]),
)
def test_no_time_step_in_train_and_eval_and_gap_at_least_purge(seed, window, stride, purge, fractions):
    ds = many_events_dataset(seed % 7)
    sp = make_splits(ds, window=window, stride=stride, purge=purge, seed=seed, fractions=fractions)
    held = {name: steps(sp[name], np.arange(len(sp[name])), window) for name in SPLIT_NAMES}
    assert not held["train"] & held["val"]
    assert not held["train"] & held["test"]
    assert not held["val"] & held["test"]
    # purge: between steps of different splits in one series lie at least `purge` steps of no split
    for i in range(len(ds.series)):
        owner = {t: name for name in SPLIT_NAMES for (s, t) in held[name] if s == i}
        ordered = sorted(owner)
        for t0, t1 in zip(ordered[:-1], ordered[1:]):
            if owner[t0] != owner[t1]:
                assert t1 - t0 - 1 >= purge
    # every window lies inside its series
    for name in SPLIT_NAMES:
        w = sp[name]
        lengths = np.array([s.length for s in ds.series])[w.series]
        assert (w.start >= 0).all() and (w.start + window <= lengths).all()


@given(st.integers(0, 10_000), st.integers(4, 40), st.integers(1, 16))
def test_events_never_have_windows_in_two_splits(seed, window, stride):
    ds = many_events_dataset(seed % 5)
    sp = make_splits(ds, window=window, stride=stride, seed=seed)
    where: dict[tuple[int, int], set[str]] = {}
    for name in SPLIT_NAMES:
        w = sp[name]
        for s, t0 in zip(w.series, w.start):
            for e_start, e_end in ds.series[s].events:
                if e_start <= t0 + window - 1 and e_end >= t0:  # independent overlap test
                    where.setdefault((int(s), e_start), set()).add(name)
    assert all(len(v) == 1 for v in where.values())
    assert sum(sp.summary[name]["events"] for name in SPLIT_NAMES) == len(where)
    # with stride <= window every event gets windows
    if stride <= window:
        assert len(where) == sum(len(s.events) for s in ds.series)


def test_grouping_off_can_split_an_event():
    values = np.random.default_rng(0).normal(size=(2000, 1))
    ds = Dataset("long", [Series.from_events("x", values, [(100, 1900)])], 1)
    with pytest.raises(ValueError, match="no positive windows"):
        make_splits(ds, window=16, stride=8, seed=0)  # one event can only feed one split
    sp = make_splits(ds, window=16, stride=8, seed=0, group_events=False, block=128)
    assert all(sp.summary[name]["events"] == 1 for name in SPLIT_NAMES)


@pytest.mark.parametrize("method", ["robust", "zscore"])
def test_normalisation_uses_training_steps_only(method):
    ds = many_events_dataset(3)
    sp = make_splits(ds, window=16, stride=4, seed=1, normalisation=method)
    held = np.zeros((len(ds.series), ds.series[0].length), dtype=bool)
    for s, t0 in zip(sp.train.series, sp.train.start):
        held[s, t0 : t0 + 16] = True
    rows = np.concatenate([ds.series[i].values[held[i]] for i in range(len(ds.series))])
    assert sp.protocol["train_time_steps"] == rows.shape[0]
    if method == "zscore":
        np.testing.assert_allclose(sp.center, rows.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(sp.scale, rows.std(axis=0), rtol=1e-12)
    else:
        np.testing.assert_allclose(sp.center, np.median(rows, axis=0), rtol=1e-12)
    # changing every non-training step leaves the statistics unchanged
    changed = Dataset(
        "toy",
        [
            Series(s.name, np.where(held[i][:, None], s.values, 1e6), s.labels, s.events)
            for i, s in enumerate(ds.series)
        ],
        3,
    )
    sp2 = make_splits(changed, window=16, stride=4, seed=1, normalisation=method)
    np.testing.assert_array_equal(sp2.center, sp.center)
    np.testing.assert_array_equal(sp2.scale, sp.scale)
    # and the windows of every split are normalised with them
    for name in ("train", "test"):
        s, t0 = sp[name].series[0], sp[name].start[0]
        expected = (ds.series[s].values[t0 : t0 + 16] - sp.center) / sp.scale
        np.testing.assert_allclose(sp[name].X[0], expected.astype(np.float32))


def test_constant_training_feature_gives_no_division_by_zero():
    ds = many_events_dataset(4)
    for s in ds.series:
        s.values[:, 1] = 2.5
    sp = make_splits(ds, window=16, stride=8, seed=0)
    assert sp.scale[1] == 1.0 and sp.center[1] == 2.5
    assert np.isfinite(sp.train.X).all() and (sp.train.X[:, :, 1] == 0).all()


def test_duplicate_series_move_together():
    base = many_events_dataset(5, n_series=4)
    twin = Series.from_events("twin", base.series[1].values.copy(), [(300, 340)])
    ds = Dataset("dup", [*base.series, twin], 3)
    assert duplicate_groups(ds) == [[0], [1, 4], [2], [3]]
    for seed in range(6):
        sp = make_splits(ds, window=16, stride=4, seed=seed)
        assert sp.protocol["duplicate_groups"] == [["s1", "twin"]]
        owner = {}
        for name in SPLIT_NAMES:
            w = sp[name]
            for s, t0 in zip(w.series, w.start):
                if s in (1, 4):
                    for t in range(t0, t0 + 16):
                        owner.setdefault(t, set()).add(name)
        assert all(len(v) == 1 for v in owner.values())
        # the twin's windows sit exactly where the original's do
        for name in SPLIT_NAMES:
            w = sp[name]
            assert sorted(w.start[w.series == 1]) == sorted(w.start[w.series == 4])


def test_seeded_and_repeatable():
    ds = many_events_dataset(6)
    a = make_splits(ds, window=16, stride=4, seed=3)
    b = make_splits(ds, window=16, stride=4, seed=3)
    c = make_splits(ds, window=16, stride=4, seed=4)
    for name in SPLIT_NAMES:
        np.testing.assert_array_equal(a[name].X, b[name].X)
        np.testing.assert_array_equal(a[name].start, b[name].start)
    assert a.protocol["segments"] != c.protocol["segments"]


def test_summary_counts():
    ds = many_events_dataset(7)
    sp = make_splits(ds, window=16, stride=4, seed=0)
    for name in SPLIT_NAMES:
        w = sp[name]
        assert sp.summary[name]["windows"] == len(w)
        assert sp.summary[name]["positives"] == int(w.y.sum()) > 0
        assert sp.summary[name]["events"] == len({int(e) for e in w.event if e >= 0})


def test_train_only_series_go_to_train():
    base = many_events_dataset(8)
    extra = Series("s0:train", np.ones((500, 3)), np.zeros(500, dtype=bool), [], train_only=True)
    ds = Dataset("t", [*base.series, extra], 3)
    sp = make_splits(ds, window=16, stride=16, seed=0)
    # the whole series: starts 0, 16, …, 480 plus the window ending at step 499 (start 484)
    assert sorted(sp.train.start[sp.train.series == 3]) == [*range(0, 481, 16), 484]
    assert not (sp.val.series == 3).any() and not (sp.test.series == 3).any()


def test_no_positives_anywhere_or_in_one_split_is_a_clear_error():
    values = np.random.default_rng(0).normal(size=(600, 2))
    with pytest.raises(ValueError, match="no labelled anomalies"):
        make_splits(Dataset("n", [Series.from_labels("a", values, np.zeros(600))], 2), window=16, stride=8)
    two = Dataset("two", [Series.from_events("a", values, [(50, 60), (400, 410)])], 2)
    with pytest.raises(ValueError, match=r"split 'test' of dataset 'two' has no positive windows \(seed=0"):
        make_splits(two, window=16, stride=8, seed=0)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"window": 0}, ValueError, "window must be a positive int"),
        ({"window": 16.0}, TypeError, "window must be an int"),
        ({"stride": -1}, ValueError, "stride must be a positive int"),
        ({"purge": -2}, ValueError, "purge must be an int >= 0"),
        ({"fractions": (0.5, 0.5, 0.5)}, ValueError, "summing to 1"),
        ({"fractions": (1.0, 0.0)}, ValueError, "three numbers"),
        ({"block": 20}, ValueError, "block must be at least window \\+ purge = 32"),
        ({"seed": -1}, ValueError, "seed must be an int >= 0"),
        ({"normalisation": "minmax"}, ValueError, "normalisation must be one of"),
        ({"window": 901}, ValueError, "window=901 is longer than series"),
    ],
)
def test_bad_options(kwargs, error, message):
    options = {"window": 16, "stride": 4, **kwargs}
    with pytest.raises(error, match=message):
        make_splits(many_events_dataset(0), **options)


def test_probe_suite_is_refused_with_a_pointer():
    from posenc_bench.data import ProbeSuite

    with pytest.raises(TypeError, match=r"suite.splits\(k\)"):
        make_splits(ProbeSuite(window=8), window=8, stride=1)


def test_random_windows_protocol_is_labelled_leaky_and_does_leak(msl_dir):
    """The LEAKY protocol exists to measure leakage: its windows do share time steps across splits."""
    from posenc_bench.data import load_dataset

    dataset = load_dataset(str(msl_dir))
    splits = make_splits(dataset, window=32, stride=8, seed=0, protocol="random_windows")
    assert splits.protocol["protocol"] == "random_windows" and splits.protocol["leakage_free"] is False
    steps = {}
    for name in ("train", "test"):
        w = getattr(splits, name)
        steps[name] = {(int(s), int(t)) for s, b in zip(w.series, w.start) for t in range(b, b + 32)}
    assert steps["train"] & steps["test"], "random windows of stride < window must overlap across splits"
    n = sum(len(getattr(splits, name)) for name in ("train", "val", "test"))
    assert abs(len(splits.train) / n - 0.6) < 0.01


def test_blocked_protocol_is_recorded_as_leakage_free():
    splits = make_splits(many_events_dataset(0), window=16, stride=8, seed=0)
    assert splits.protocol["protocol"] == "blocked" and splits.protocol["leakage_free"] is True


def test_unknown_protocol_names_the_allowed_ones():
    with pytest.raises(
        ValueError, match=r"protocol must be one of 'blocked', 'random_windows', 'dfstrans'; got 'random'"
    ):
        make_splits(many_events_dataset(0), window=16, protocol="random")
