"""Detection metrics against hand-computed cases and independent float64 formulas."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from posenc_bench.experiment.events import ScoredChannel, detection_metrics, ewma


def ewma_reference(x, span):
    a = 2.0 / (span + 1.0)
    out = []
    for t in range(len(x)):
        w = [(1 - a) ** (t - i) for i in range(t + 1)]
        out.append(sum(wi * xi for wi, xi in zip(w, x[: t + 1])) / sum(w))
    return np.array(out)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=40), st.floats(1.0, 50.0))
def test_ewma_is_the_adjusted_weighted_mean(x, span):
    np.testing.assert_allclose(ewma(np.array(x), span), ewma_reference(x, span), rtol=1e-9, atol=1e-9)


def test_ewma_span_one_is_identity_and_bad_span_refused():
    x = np.array([3.0, -1.0, 2.0])
    np.testing.assert_allclose(ewma(x, 1), x)
    with pytest.raises(ValueError, match="span must be >= 1"):
        ewma(x, 0.5)


def channel(score, events, kinds=()):
    labels = np.zeros(len(score), dtype=bool)
    for s, e in events:
        labels[s : e + 1] = True
    return ScoredChannel("c", np.asarray(score, dtype=np.float64), labels, list(events), list(kinds))


def test_event_metrics_by_hand():
    # 20 steps, events [3,5] and [12,12]; flags at 4 (hits event 0), 8-9 (one FP run), 15 (FP run)
    score = np.zeros(20)
    score[[4, 8, 9, 15]] = 2.0
    m = detection_metrics(
        [channel(score, [(3, 5), (12, 12)], ["spike", "order"])], threshold=1.0, window=4, stride=2
    )
    assert m["event_recall"] == 0.5 and m["false_positive_runs"] == 2
    assert m["event_precision"] == pytest.approx(1 / 3)
    assert m["event_f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert m["event_recall:spike"] == 1.0 and m["event_recall:order"] == 0.0
    # point-adjust: event 0 fully counted (3 steps), event 1 missed (1 step); 3 flagged normal steps
    p, r = 3 / 6, 3 / 4
    assert m["pa_f1"] == pytest.approx(2 * p * r / (p + r))
    # window AUPRC: windows at 0,2,…,16 of 4 steps; score = max step score in the window
    starts = np.arange(0, 17, 2)
    labels = np.zeros(20, dtype=bool)
    labels[3:6] = labels[12] = True
    y = np.array([labels[s : s + 4].any() for s in starts]).astype(int)
    s = np.array([score[st : st + 4].max() for st in starts])
    assert m["auprc"] == pytest.approx(average_precision_score(y, s))


def test_flagged_run_crossing_an_event_leaves_its_outside_parts_as_false_positives():
    score = np.zeros(12)
    score[2:9] = 5.0  # covers the whole event [4, 6] and two steps either side
    m = detection_metrics([channel(score, [(4, 6)])], threshold=1.0, window=4, stride=4)
    assert m["event_recall"] == 1.0 and m["false_positive_runs"] == 2


def test_flag_all_recalls_everything_with_one_false_positive_per_gap():
    ch = channel(np.zeros(30), [(0, 2), (10, 12), (20, 21)])  # normal stretches: 3-9, 13-19, 22-29
    m = detection_metrics([ch], threshold=1.0, window=5, stride=5, flag_all=True)
    assert m["event_recall"] == 1.0 and m["false_positive_runs"] == 3 and m["event_precision"] == 0.5
    q = 8 / 30  # every step flagged: point-adjust changes nothing
    assert m["pa_f1"] == pytest.approx(2 * q / (1 + q))
    starts = np.arange(0, 26, 5)
    assert m["auprc"] == pytest.approx(np.mean([ch.labels[s : s + 5].any() for s in starts]))


def test_unscored_steps_are_never_flagged():
    score = np.full(10, np.nan)
    score[6:] = 0.0
    m = detection_metrics([channel(score, [(1, 2)])], threshold=-1.0, window=5, stride=5)
    assert m["event_recall"] == 0.0 and m["false_positive_runs"] == 1  # steps 6-9 flagged (score 0 > -1)
