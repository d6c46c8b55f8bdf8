"""Series / Dataset / WindowSet invariants: events are inclusive, sorted, disjoint, match labels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.data import Dataset, Series, WindowSet, label_runs


def runs_by_loop(labels: list[bool]) -> list[tuple[int, int]]:
    out, start = [], None
    for t, v in enumerate(labels + [False]):
        if v and start is None:
            start = t
        if not v and start is not None:
            out.append((start, t - 1))
            start = None
    return out


@given(st.lists(st.booleans(), min_size=1, max_size=60))
def test_label_runs_match_a_loop(labels):
    assert label_runs(np.array(labels)) == runs_by_loop(labels)


def test_from_events_labels_are_inclusive_and_sorted():
    s = Series.from_events("a", np.zeros((10, 2)), [(6, 6), (1, 3)], event_kinds=["x", "y"])
    assert s.events == [(1, 3), (6, 6)] and s.event_kinds == ["y", "x"]
    assert np.flatnonzero(s.labels).tolist() == [1, 2, 3, 6]


@pytest.mark.parametrize(
    "events, message",
    [([(3, 10)], "out of bounds"), ([(-1, 2)], "out of bounds"), ([(4, 2)], "out of bounds")],
)
def test_from_events_rejects_bad_ranges(events, message):
    with pytest.raises(ValueError, match=message):
        Series.from_events("chan", np.zeros((10, 1)), events)


def test_series_rejects_overlap_mismatch_nan_and_bad_labels():
    labels = np.zeros(10, dtype=bool)
    labels[2:6] = True
    with pytest.raises(ValueError, match="sorted and disjoint"):
        Series("c", np.zeros((10, 1)), labels, [(2, 4), (4, 5)])
    with pytest.raises(ValueError, match="disagree with its events at time step 5"):
        Series("c", np.zeros((10, 1)), labels, [(2, 4)])
    values = np.zeros((10, 2))
    values[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"series 'c' values must be finite.*\(3, 1\)"):
        Series.from_labels("c", values, labels)
    with pytest.raises(ValueError, match="0 or 1"):
        Series.from_labels("c", np.zeros((3, 1)), [0, 2, 1])
    with pytest.raises(ValueError, match="2 events but 1 event_kinds"):
        Series.from_events("c", np.zeros((10, 1)), [(0, 0), (4, 4)], event_kinds=["x"])


def test_dataset_checks_features_and_names():
    a = Series.from_labels("a", np.zeros((5, 2)), np.zeros(5))
    b = Series.from_labels("b", np.zeros((5, 3)), np.zeros(5))
    with pytest.raises(ValueError, match="series 'b' has 3 features, the dataset 2"):
        Dataset("d", [a, b], 2)
    with pytest.raises(ValueError, match="unique"):
        Dataset("d", [a, a], 2)
    c = Series.from_events("c", np.zeros((9, 2)), [(1, 2), (5, 5)])
    d = Dataset("d", [a, c], 2)
    assert d.event_table() == [(1, 1, 2), (1, 5, 5)]
    assert d.event_offsets().tolist() == [0, 0, 2]


def test_windowset_checks_shapes():
    ints = np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match="float32"):
        WindowSet(np.zeros((3, 4, 2)), ints, ints, ints, ints)
    with pytest.raises(ValueError, match="event must be int64 of shape"):
        WindowSet(np.zeros((3, 4, 2), np.float32), ints, ints, ints, np.zeros(2, dtype=np.int64))


def test_data_layer_imports_neither_torch_nor_matplotlib():
    import subprocess
    import sys

    code = (
        "import sys, posenc_bench.data; bad = [m for m in ('torch', 'matplotlib') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
