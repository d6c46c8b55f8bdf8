"""Metrics against hand-computed values; the threshold rule on a worked example."""

from __future__ import annotations

import numpy as np
import pytest

from posenc_bench.experiment.metrics import best_f1_threshold, binary_metrics


def test_binary_metrics_hand_computed():
    y = [0, 0, 1, 1, 0, 1]
    s = [0.1, 0.4, 0.35, 0.8, 0.2, 0.9]
    m = binary_metrics(y, s, threshold=0.3)
    # predictions at 0.3: [0, 1, 1, 1, 0, 1] → TP 3, FP 1, FN 0
    assert m["precision"] == pytest.approx(3 / 4)
    assert m["recall"] == pytest.approx(1.0)
    assert m["f1"] == pytest.approx(2 * 0.75 * 1.0 / 1.75)
    # ranked: 0.9(+) 0.8(+) 0.4(−) 0.35(+) …: AP = (1/1 + 2/2 + 3/4) / 3
    assert m["auprc"] == pytest.approx((1 + 1 + 0.75) / 3)
    assert m["accuracy"] == pytest.approx(5 / 6)


def test_threshold_is_inclusive_and_nothing_predicted_gives_zero_precision():
    m = binary_metrics([0, 1], [0.2, 0.5], threshold=0.5)
    assert m["recall"] == 1.0 and m["precision"] == 1.0
    m = binary_metrics([0, 1], [0.2, 0.5], threshold=0.9)
    assert m["precision"] == 0.0 and m["recall"] == 0.0 and m["f1"] == 0.0


def test_best_f1_threshold_worked_example():
    # thresholds 0.5, 0.4, 0.3, 0.2, 0.1 give F1 = 0.5, 0.8, 2/3, 6/7, 0.75 → 0.2
    assert best_f1_threshold([0, 1, 0, 1, 1], [0.1, 0.2, 0.3, 0.4, 0.5]) == pytest.approx(0.2)


def test_best_f1_threshold_ties_go_to_the_higher_threshold():
    # τ=0.9: TP1 FP0 FN1 → F1 2/3; τ=0.8: 1/2; τ=0.7: P 1/3, R 1/2 → 0.4; τ=0.6: P 1/2, R 1 → 2/3
    assert best_f1_threshold([1, 0, 0, 1], [0.9, 0.8, 0.7, 0.6]) == pytest.approx(0.9)


@pytest.mark.parametrize(
    "y, s, match",
    [
        ([0, 0], [0.1, 0.2], "no positive"),
        ([0, 2], [0.1, 0.2], "0/1"),
        ([0, 1], [0.1, np.nan], "finite"),
        ([0, 1], [0.1], "equal length"),
    ],
)
def test_bad_input_is_named(y, s, match):
    with pytest.raises(ValueError, match=match):
        binary_metrics(y, s, threshold=0.5)


def test_family_auprc_scores_each_family_against_all_negatives():
    from posenc_bench.experiment.metrics import family_auprc

    y = np.array([0, 0, 1, 1, 0, 1, 0])
    s = np.array([0.1, 0.5, 0.9, 0.2, 0.3, 0.6, 0.4])
    fam = np.array(["", "", "a", "b", "", "a", ""])
    out = family_auprc(y, s, fam)
    # family a: positives 0.9, 0.6 rank above every negative → AP 1; b: 0.2 is below 3 of the 4 negatives
    assert out["auprc:a"] == pytest.approx(1.0)
    assert out["auprc:b"] == pytest.approx(1 / 4)  # the lone positive ranks 4th (below 0.5, 0.4, 0.3)
    with pytest.raises(ValueError, match="families must have the shape"):
        family_auprc(y, s, fam[:3])
