"""Window starts, the label rule (any anomalous step), first events and normalisation."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.data import Dataset, Series, fit_normalisation, make_windows
from posenc_bench.data.windows import events_covered, first_events, segment_starts, window_labels


@given(st.integers(0, 50), st.integers(1, 80), st.integers(1, 20), st.integers(1, 25))
def test_segment_starts_stay_inside_and_cover(begin, size, window, stride):
    end = begin + size
    starts = segment_starts(begin, end, window=window, stride=stride)
    if size < window:
        assert starts.size == 0
        return
    assert starts[0] == begin and starts[-1] == end - window
    assert (np.diff(starts) > 0).all() and (np.diff(starts)[:-1] == stride).all()
    covered = {t for s in starts for t in range(s, s + window)}
    assert covered <= set(range(begin, end))
    if stride <= window:
        assert covered == set(range(begin, end))


@given(st.lists(st.booleans(), min_size=5, max_size=80), st.integers(1, 12), st.integers(1, 7))
def test_window_label_is_any_anomalous_step(labels, window, stride):
    labels = np.array(labels)
    if window > labels.size:
        return
    starts = segment_starts(0, labels.size, window=window, stride=stride)
    expected = [1 if any(labels[s : s + window]) else 0 for s in starts]
    assert window_labels(labels, starts, window).tolist() == expected


@given(st.lists(st.booleans(), min_size=5, max_size=80), st.integers(1, 12))
def test_first_event_and_coverage_by_brute_force(labels, window):
    series = Series.from_labels("s", np.zeros((len(labels), 1)), labels)
    if window > len(labels):
        return
    starts = np.arange(len(labels) - window + 1)
    got = first_events(series.events, starts, window)
    for t, g in zip(starts, got):
        hits = [i for i, (s, e) in enumerate(series.events) if s <= t + window - 1 and e >= t]
        assert g == (hits[0] if hits else -1)
    sub = starts[::3]
    covered = events_covered(series.events, sub, window)
    for (s, e), c in zip(series.events, covered):
        assert c == any(s <= t + window - 1 and e >= t for t in sub)


def test_normalisation_formulas_and_constant_features():
    rng = np.random.default_rng(0)
    rows = np.column_stack(
        [
            rng.normal(size=101),
            np.full(101, 0.1),
            (rng.random(101) < 0.05) * 1.0,
            np.r_[rng.normal(size=100), 258.0],
        ]
    )
    for j in range(rows.shape[1]):  # independent formulas, column by column, in plain Python
        col = [float(v) for v in rows[:, j]]
        m = sum(col) / len(col)
        sd = (sum((v - m) ** 2 for v in col) / len(col)) ** 0.5
        q1, q2, q3 = statistics.quantiles(col, n=4, method="inclusive")
        constant = min(col) == max(col)
        center, scale = fit_normalisation(rows, method="robust")
        assert center[j] == pytest.approx(col[0] if constant else q2, abs=1e-12)
        expected = 1.0 if constant else ((q3 - q1) / 1.3489795003921634 if q3 > q1 else max(col) - min(col))
        assert scale[j] == pytest.approx(expected, rel=1e-9)
        center, scale = fit_normalisation(rows, method="zscore")
        assert center[j] == pytest.approx(col[0] if constant else m, abs=1e-12)
        assert scale[j] == pytest.approx(1.0 if constant else sd, rel=1e-9)
    center, scale = fit_normalisation(rows, method="robust")
    assert scale[1] == 1.0 and center[1] == 0.1  # constant: exactly its value, no division by zero
    assert scale[2] == 1.0 and center[2] == 0.0  # sparse binary: stays 0/1
    assert scale[3] < 2.0  # one outlier of 258 does not set the robust scale …
    assert fit_normalisation(rows, method="zscore")[1][3] > 20  # … but does set the standard deviation
    np.testing.assert_array_equal(fit_normalisation(rows, method="none")[1], np.ones(4))
    with pytest.raises(ValueError, match="zero training time steps"):
        fit_normalisation(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="normalisation must be one of 'robust', 'zscore', 'none'"):
        fit_normalisation(rows, method="minmax")


def test_make_windows_values_labels_and_event_ids():
    rng = np.random.default_rng(1)
    a = Series.from_events("a", rng.normal(size=(30, 2)), [(4, 6), (20, 20)])
    b = Series.from_events("b", rng.normal(size=(25, 2)), [(10, 12)])
    ds = Dataset("d", [a, b], 2)
    w = make_windows(ds, window=8, stride=5, center=np.array([1.0, -1.0]), scale=np.array([2.0, 4.0]))
    for i in range(len(w)):
        src = ds.series[w.series[i]]
        t = w.start[i]
        expected = (src.values[t : t + 8] - [1.0, -1.0]) / [2.0, 4.0]
        np.testing.assert_allclose(w.X[i], expected.astype(np.float32))
        assert w.y[i] == int(src.labels[t : t + 8].any())
        assert (w.event[i] >= 0) == bool(w.y[i])
    # event ids are global: series b's only event is id 2
    assert set(w.event[w.series == 1].tolist()) == {-1, 2}
    with pytest.raises(ValueError, match="window=26 is longer than series 'b'.*use window <= 25"):
        make_windows(ds, window=26, stride=1)
