"""Per-series scoring and the per-series paired comparison (wins/ties/losses, Wilcoxon, bootstrap)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import average_precision_score

from posenc_bench.experiment.compare import compare, markdown
from posenc_bench.experiment.events import ScoredChannel
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.series import detect_series, score_one, window_series
from posenc_bench.experiment.series_compare import paired
from posenc_bench.experiment.vus import vus_pr


def _channel(name: str, labels: list[int], score: list[float]) -> ScoredChannel:
    y = np.array(labels, dtype=bool)
    return ScoredChannel(name, np.array(score, dtype=np.float64), y, [], [])


def test_score_one_is_auprc_and_vus_pr_of_the_series():
    y = np.array([0, 0, 1, 1, 0, 0, 0, 1, 0, 0])
    s = np.array([0.1, 0.2, 0.9, 0.3, 0.5, 0.0, 0.2, 0.8, 0.1, 0.4])
    got = score_one(y, s, max_buffer=4)
    assert got == {
        "auprc": pytest.approx(average_precision_score(y, s), abs=1e-15),
        "vus_pr": pytest.approx(vus_pr(y, s, max_buffer=4), abs=1e-15),
    }


def test_unscored_steps_rank_last_and_series_without_anomaly_are_left_out():
    nan = float("nan")
    a = _channel("a", [1, 0, 0, 1, 0], [nan, nan, 0.2, 0.9, 0.1])
    b = _channel("b", [0, 0, 0, 0, 0], [0.1, 0.2, 0.3, 0.4, 0.5])
    out = detect_series([a, b], max_buffer=2)
    assert set(out) == {"a"}
    filled = np.array([0.1, 0.1, 0.2, 0.9, 0.1])
    assert out["a"]["auprc"] == pytest.approx(average_precision_score(a.labels, filled), abs=1e-15)


def test_infinite_scores_keep_their_rank():
    inf = float("inf")
    a = _channel("a", [0, 1, 0, 0, 1, 0], [0.1, inf, 0.3, -inf, 0.2, float("nan")])
    ranked = np.array([0.1, 1.3, 0.3, 0.1, 0.2, 0.1])
    got = detect_series([a], max_buffer=2)["a"]
    assert got["auprc"] == pytest.approx(average_precision_score(a.labels, ranked), abs=1e-15)
    assert got["vus_pr"] == pytest.approx(vus_pr(a.labels, ranked, max_buffer=2), abs=1e-15)


def test_flag_all_scores_the_prevalence():
    out = detect_series([_channel("a", [0, 1, 1, 0, 0, 0, 0, 0], [0.0] * 8)], max_buffer=0, flag_all=True)
    assert out["a"]["auprc"] == pytest.approx(0.25)


def test_window_series_orders_each_series_by_start():
    rng = np.random.default_rng(0)
    series = np.repeat([0, 1], 20)
    start = np.tile(np.arange(20) * 8, 2)
    y = (rng.random(40) < 0.3).astype(int)
    y[[3, 25]] = 1
    s = rng.random(40)
    perm = rng.permutation(40)
    sorted_result = window_series(series, start, y, s, ["x", "y"], max_buffer=2)
    shuffled = window_series(series[perm], start[perm], y[perm], s[perm], ["x", "y"], max_buffer=2)
    assert sorted_result == shuffled
    assert sorted_result["y"]["vus_pr"] == pytest.approx(vus_pr(y[20:], s[20:], max_buffer=2))


def _run(encoding: str, seed: int, values: dict[str, float]) -> RunRecord:
    series = {k: {"auprc": v, "vus_pr": v / 2} for k, v in values.items()}
    return RunRecord(
        "model", 0, {"auprc": 0.5}, name=encoding, scale="native", seed=seed, extra={"series": series}
    )


def test_paired_counts_wins_ties_losses_and_tests_across_series():
    names = [f"c{i}" for i in range(8)]
    ref = [_run("none", k, {n: 0.5 for n in names}) for k in range(3)]
    deltas = [0.10, 0.20, 0.05, 0.0, -0.02, 0.30, 0.15, 0.08]
    mine = [_run("rope", k, {n: 0.5 + d + 0.01 * (k - 1) for n, d in zip(names, deltas)}) for k in range(3)]
    t = paired("", "rope", mine, "none", ref, "auprc")
    assert t is not None
    assert (t.n_series, t.wins, t.ties, t.losses) == (8, 6, 1, 1)
    assert t.mean_diff == pytest.approx(np.mean(deltas))
    assert t.p_wilcoxon == pytest.approx(sps.wilcoxon(np.array(deltas), alternative="two-sided").pvalue)
    assert t.ci_low < t.mean_diff < t.ci_high


def test_an_untrained_reference_pairs_with_every_seed():
    base = RunRecord("baseline", 0, {"auprc": 0.4}, name="max-abs", extra={"series": {"a": {"auprc": 0.4}}})
    mine = [_run("rope", k, {"a": 0.4 + 0.1 * (k + 1)}) for k in range(3)]
    t = paired("", "rope", mine, "max-abs", [base], "auprc")
    assert t is not None and t.n_series == 1 and t.wins == 1
    assert t.mean_diff == pytest.approx(0.2)  # mean of 0.1, 0.2, 0.3


def test_the_table_puts_the_per_series_section_first():
    names = ["a", "b", "c"]
    runs = [
        _run(e, k, {n: 0.5 + 0.1 * (e == "rope") for n in names}) for e in ("none", "rope") for k in range(2)
    ]
    runs = [
        RunRecord.from_json({**r.to_json(), "test_windows": 10, "test_positive_windows": 2, "test_events": 1})
        for r in runs
    ]
    text = markdown(compare(runs, metrics=("auprc",), paired_metrics=("auprc",)))
    assert (
        text.index("## Per series") < text.index("## Pooled over series") < text.index("| encoding | scale |")
    )
    assert "| rope | none | auprc | 3 | 3/0/0 | +0.1000 |" in text


def test_records_without_per_series_scores_give_no_section():
    r = RunRecord.from_json(
        {
            "encoding": "none",
            "scale": "native",
            "seed": 0,
            "split_seed": 0,
            "test": {"auprc": 0.5},
            "test_windows": 10,
            "test_positive_windows": 2,
            "test_events": 1,
        }
    )
    assert "Per series" not in markdown(compare([r], metrics=("auprc",), paired_metrics=("auprc",)))


def test_rows_away_from_native_scale_name_their_scale():
    runs = []
    for scale in ("native", "matched"):
        for k in range(2):
            r = _run("sinusoidal", k, {"a": 0.5, "b": 0.6})
            runs.append(
                RunRecord.from_json(
                    {
                        **r.to_json(),
                        "scale": scale,
                        "test_windows": 10,
                        "test_positive_windows": 2,
                        "test_events": 1,
                    }
                )
            )
    names = [row.name for row in compare(runs, metrics=("auprc",), paired_metrics=("auprc",)).series_rows]
    assert names == ["sinusoidal", "sinusoidal (matched)"]
