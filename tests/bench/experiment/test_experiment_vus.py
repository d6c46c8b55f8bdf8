"""VUS-PR (Paparrizos et al. 2022) against a brute-force transcription of its definition and worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from posenc_bench.experiment.vus import buffered_labels, buffered_segments, range_ap, vus_pr


def brute_range_ap(y: list[int], s: list[float], ell: int, taus: list[float] | None = None) -> float:
    """The definition, one threshold and one step at a time, in plain Python floats."""
    T = len(y)
    half = ell // 2
    w = [float(v) for v in y]
    runs, t = [], 0
    while t < T:
        if y[t]:
            a = t
            while t + 1 < T and y[t + 1]:
                t += 1
            runs.append((a, t))
        t += 1
    for a, b in runs:
        for d in range(1, half + 1):
            if b + d < T:
                w[b + d] += math.sqrt(1 - d / ell)
            if a - d >= 0:
                w[a - d] += math.sqrt(1 - d / ell)
    w = [min(v, 1.0) for v in w]
    segs: list[list[int]] = []
    for a, b in runs:
        lo, hi = max(a - half, 0), min(b + half, T - 1)
        if segs and lo <= segs[-1][1]:
            segs[-1][1] = max(segs[-1][1], hi)
        else:
            segs.append([lo, hi])
    P = sum(y)
    ap, last_recall = 0.0, 0.0
    for tau in taus if taus is not None else sorted(set(s), reverse=True):
        pred = [v >= tau for v in s]
        tp = sum(w[i] for i in range(T) if pred[i])
        extra = sum(w[i] for i in range(T) if pred[i] and not y[i])
        found = sum(any(pred[i] for i in range(a, b + 1)) for a, b in segs)
        recall = min(tp / (P + extra / 2), 1.0) * found / len(segs)
        precision = tp / sum(pred)
        ap += (recall - last_recall) * precision
        last_recall = recall
    return ap


@st.composite
def series(draw):
    T = draw(st.integers(3, 40))
    y = draw(st.lists(st.integers(0, 1), min_size=T, max_size=T).filter(any))
    s = draw(st.lists(st.integers(0, 6), min_size=T, max_size=T))  # small integers: many ties
    return y, [float(v) for v in s], draw(st.integers(0, 12))


@given(series())
def test_range_ap_equals_brute_force(case):
    y, s, ell = case
    assert range_ap(y, s, ell) == pytest.approx(brute_range_ap(y, s, ell), abs=1e-12)


@given(series(), st.integers(1, 30))
def test_sampled_thresholds_equal_brute_force(case, n):
    y, s, ell = case
    ranked = sorted(s, reverse=True)
    taus = [ranked[int(i)] for i in np.linspace(0, len(s) - 1, n).astype(int)]
    assert range_ap(y, s, ell, n_thresholds=n) == pytest.approx(brute_range_ap(y, s, ell, taus), abs=1e-12)


@given(series())
def test_vus_pr_is_the_mean_over_buffers(case):
    y, s, L = case
    expected = np.mean([brute_range_ap(y, s, ell) for ell in range(L + 1)])
    assert vus_pr(y, s, max_buffer=L) == pytest.approx(expected, abs=1e-12)


def test_worked_example_buffer_weights():
    # one anomaly at steps 4-5 of 10, ℓ = 4: h = 2 steps each side, weights √(1 − 1/4), √(1 − 2/4)
    w = buffered_labels([0, 0, 0, 0, 1, 1, 0, 0, 0, 0], 4)
    a, b = math.sqrt(0.75), math.sqrt(0.5)
    np.testing.assert_allclose(w, [0, 0, b, a, 1, 1, a, b, 0, 0], rtol=0, atol=1e-15)
    assert buffered_segments([0, 0, 0, 0, 1, 1, 0, 0, 0, 0], 4) == [(2, 7)]
    # two anomalies whose buffers overlap: weights add and are clipped at 1, the segments merge
    w2 = buffered_labels([1, 0, 0, 1], 4)
    np.testing.assert_allclose(w2, [1, 1, 1, 1], atol=1e-15)
    assert buffered_segments([1, 0, 0, 1], 4) == [(0, 3)]
    assert buffered_segments([1, 0, 0, 0, 0, 0, 1], 4) == [(0, 2), (4, 6)]


def test_worked_example_perfect_score():
    y = [0, 0, 0, 1, 1, 0, 0, 0]
    s = [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert range_ap(y, s, 0) == 1.0  # threshold 1: P=R=1; threshold 0 adds no recall
    # ℓ = 2: one buffer step each side, weight √(1/2). Threshold 1: TP 2, P' = 2, R = 1, Pr = 1 → AP 1;
    # threshold 0 flags all 8: TP = 2 + 2√½, P' = 2 + √½, recall stays 1 (clipped)
    assert range_ap(y, s, 2) == 1.0
    # ℓ = 4: h = 2, weights √¾ and √½ each side; same argument, AP 1
    assert vus_pr(y, s, max_buffer=4) == 1.0


def test_worked_example_early_detection_earns_buffer_credit():
    # the score peaks one step before the anomaly: point-wise it is a miss until the lowest threshold,
    # in the buffer it is a partial hit
    y = [0, 0, 0, 1, 0, 0]
    s = [0.0, 0.0, 1.0, 0.5, 0.0, 0.0]
    assert range_ap(y, s, 0) == pytest.approx(0.5)  # τ=1: R 0; τ=0.5: R 1, Pr 1/2
    # ℓ = 2: step 2 has weight √½. τ=1: TP √½, P' = 1 + √½/2, found 1/1, Pr √½
    w = math.sqrt(0.5)
    r1 = w / (1 + w / 2)
    # τ=0.5: TP 1 + √½, P' = 1 + √½/2 → recall clipped at 1; Pr (1 + √½)/2
    expected = r1 * w + (1 - r1) * (1 + w) / 2
    assert range_ap(y, s, 2) == pytest.approx(expected, abs=1e-15)
    assert range_ap(y, s, 2) > range_ap(y, s, 0)


@given(st.lists(st.floats(-5, 5), min_size=5, max_size=60), st.data())
def test_buffer_zero_one_range_is_average_precision(s, data):
    T = len(s)
    a = data.draw(st.integers(0, T - 1))
    b = data.draw(st.integers(a, T - 1))
    y = np.zeros(T, dtype=int)
    y[a : b + 1] = 1
    if y.all():
        return
    assert range_ap(y, s, 0) == pytest.approx(average_precision_score(y, s), abs=1e-12)


@pytest.mark.parametrize(
    ("labels", "scores", "kwargs", "match"),
    [
        ([0, 0, 0], [1.0, 2.0, 3.0], {"max_buffer": 2}, "no anomalous step"),
        ([0, 1, 2], [1.0, 2.0, 3.0], {"max_buffer": 2}, "0/1"),
        ([0, 1, 0], [1.0, 2.0], {"max_buffer": 2}, "shape"),
        ([0, 1, 0], [1.0, np.nan, 3.0], {"max_buffer": 2}, "finite"),
        ([0, 1, 0], [1.0, 2.0, 3.0], {"max_buffer": -1}, "max_buffer"),
        ([0, 1, 0], [1.0, 2.0, 3.0], {"max_buffer": 2, "n_thresholds": 0}, "n_thresholds"),
    ],
)
def test_refuses_bad_input(labels, scores, kwargs, match):
    with pytest.raises(ValueError, match=match):
        vus_pr(labels, scores, **kwargs)
