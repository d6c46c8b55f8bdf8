"""Aggregation: mean ± std per (encoding, scale), paired differences, outputs on disk."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from posenc_bench.experiment.compare import (
    BASELINE,
    NO_SKILL,
    NOT_ABOVE_NO_SKILL,
    compare,
    from_json,
    markdown,
    write,
)
from posenc_bench.experiment.stats import holm, sign_flip_p


def record(encoding, scale, split, seed, f1, auprc=0.5, shuffled=None):
    r = {
        "encoding": encoding,
        "scale": scale,
        "split_seed": split,
        "seed": seed,
        "test": {"precision": 0.5, "recall": 0.6, "f1": f1, "auprc": auprc},
        "test_windows": 100,
        "test_positive_windows": 10 + split,
        "test_events": 3,
    }
    if shuffled is not None:
        r["shuffled_test"] = {"precision": 0.4, "recall": 0.4, "f1": shuffled, "auprc": auprc - 0.1}
    return r


def grid():
    rng = np.random.default_rng(0)
    ref = {(k, s): 0.6 + 0.05 * rng.random() for k in range(2) for s in range(3)}
    runs = []
    for (k, s), v in ref.items():
        runs.append(record("sinusoidal", "native", k, s, v, shuffled=v - 0.2))
        runs.append(record("dft", "native", k, s, v + 0.01 * (s + 1), shuffled=v))
        runs.append(record("sinusoidal", "matched", k, s, v + 0.02))
        runs.append(record("dft", "matched", k, s, v + 0.02 - 0.005 * (k + 1)))
        runs.append(record("rope", "native", k, s, v + 0.03))
    return runs, ref


def test_rows_mean_std_and_shuffle_drop():
    runs, ref = grid()
    c = compare(runs)
    row = {(r.encoding, r.scale): r for r in c.rows}
    f1 = np.array([v + 0.01 * (s + 1) for (k, s), v in ref.items()])
    assert row["dft", "native"].n == 6
    assert row["dft", "native"].mean["f1"] == pytest.approx(f1.mean())
    assert row["dft", "native"].std["f1"] == pytest.approx(f1.std(ddof=1))
    assert row["sinusoidal", "native"].shuffle_drop["f1"] == pytest.approx(0.2)
    assert row["sinusoidal", "native"].shuffle_drop["auprc"] == pytest.approx(0.1)
    assert row["rope", "native"].shuffle_drop is None


def test_paired_differences_match_by_split_and_seed():
    runs, _ = grid()
    paired = compare(runs).paired
    tests = {(t.encoding, t.scale, t.metric): t for t in paired}
    d = np.array([0.01 * (s + 1) for k in range(2) for s in range(3)])
    t = tests["dft", "native", "f1"]
    assert t.n == 6 and t.mean_diff == pytest.approx(d.mean())
    assert t.p_sign_flip == pytest.approx(sign_flip_p(d))
    # both splits hold the same differences: the t interval of the two split means has no width
    assert (t.ci_low, t.ci_high) == pytest.approx((0.02, 0.02)) and t.ci == "t, 2 splits (means)"
    # Holm over the whole table's family of sign-flip p's
    assert [x.p_holm for x in paired] == pytest.approx(list(holm([x.p_sign_flip for x in paired])))
    assert t.p_holm >= t.p_sign_flip
    assert t.min_p == pytest.approx(2 / 64)
    assert tests["dft", "matched", "f1"].mean_diff == pytest.approx(-0.0075)
    # rope has no scale policy: compared as defined against the reference at every scale
    assert tests["rope", "native", "f1"].mean_diff == pytest.approx(0.03)
    assert tests["rope", "matched", "f1"].mean_diff == pytest.approx(0.01)
    assert tests["dft", "native", "auprc"].mean_diff == pytest.approx(0.0)
    assert math.isnan(tests["dft", "native", "auprc"].p_wilcoxon)
    assert ("sinusoidal", "native", "f1") not in tests


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_every_row_is_also_paired_with_the_order_blind_control():
    """With a ``none`` row present each encoding gets a second paired test, encoding − none, per scale."""
    runs, ref = grid()
    runs += [record("none", "native", k, s, v - 0.04 * (k + 1)) for (k, s), v in ref.items()]
    paired = compare(runs).paired
    vs_none = {(t.encoding, t.scale, t.metric): t for t in paired if t.reference == "none"}
    vs_sin = {(t.encoding, t.scale, t.metric): t for t in paired if t.reference == "sinusoidal"}
    d = np.array([0.01 * (s + 1) + 0.04 * (k + 1) for k in range(2) for s in range(3)])
    assert vs_none["dft", "native", "f1"].mean_diff == pytest.approx(d.mean())
    assert vs_none["dft", "native", "f1"].p_sign_flip == pytest.approx(sign_flip_p(d))
    assert vs_none["sinusoidal", "native", "f1"].mean_diff == pytest.approx(0.06)
    assert vs_sin["none", "native", "f1"].mean_diff == pytest.approx(-0.06)
    # none exists at native scale only: no matched-scale reference, so no matched pairs against it
    assert not any(scale == "matched" for _, scale, _ in vs_none)
    assert ("none", "native", "f1") not in vs_none
    md = markdown(compare(runs))
    assert "Paired differences against `sinusoidal`" in md and "Paired differences against `none`" in md


def test_outputs_written(tmp_path):
    runs, _ = grid()
    baseline = [
        {"split_seed": k, "test": {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "auprc": 0.7}}
        for k in range(2)
    ]
    c = compare(runs, baseline=baseline)
    paths = write(c, tmp_path)
    assert {p.name for p in paths.values()} == {"results.md", "results.csv", "results.json", "results.png"}
    md = paths["md"].read_text()
    assert md == markdown(c)
    assert (
        "| dft | native | 6 |" in md
        and BASELINE in md
        and "split 1: 100 windows, 11 positive, 3 events" in md
    )
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [(r["encoding"], r["scale"]) for r in rows][-2:] == [(BASELINE, "-"), (NO_SKILL, "-")]
    dft = next(r for r in rows if (r["encoding"], r["scale"]) == ("dft", "native"))
    assert float(dft["f1_minus_sinusoidal_mean"]) == pytest.approx(0.02)  # mean of 0.01·(seed+1)
    data = json.loads(paths["json"].read_text())
    assert len(data["runs"]) == len(runs) and data["baseline"][0]["test"]["f1"] == pytest.approx(2 / 3)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_skill_row_is_flag_all_per_split_and_marks_rows_not_above_it():
    """flag-all: precision p, recall 1, F1 2p/(1+p), AUPRC p per split (p = 10/100 and 11/100 here)."""
    runs = [record("sinusoidal", "native", k, s, f1=0.15, auprc=0.5) for k in range(2) for s in range(3)]
    runs += [record("dft", "native", k, s, f1=0.6 + 0.01 * s, auprc=0.09) for k in range(2) for s in range(3)]
    c = compare(runs)
    row = {r.encoding: r for r in c.rows}
    p = np.array([0.10, 0.11])
    flag = row[NO_SKILL]
    assert flag.n == 2
    assert flag.mean["f1"] == pytest.approx(np.mean(2 * p / (1 + p)))
    assert flag.mean["auprc"] == pytest.approx(p.mean()) and flag.mean["precision"] == pytest.approx(p.mean())
    assert flag.mean["recall"] == 1.0 and flag.std["auprc"] == pytest.approx(np.std(p, ddof=1))
    # sinusoidal F1 0.15 < 2p/(1+p) ≈ 0.18–0.20: marked; AUPRC 0.5 ≫ p: not marked
    assert (
        row["sinusoidal"].clears_no_skill("f1") is False
        and row["sinusoidal"].clears_no_skill("auprc") is True
    )
    assert row["sinusoidal"].vs_no_skill["f1"][0] == pytest.approx(0.15 - np.mean(2 * p / (1 + p)))
    assert row["dft"].clears_no_skill("f1") is True and row["dft"].clears_no_skill("auprc") is False
    md = markdown(c)
    assert f"0.150 ± 0.000 {NOT_ABOVE_NO_SKILL}" in md and f"0.090 ± 0.000 {NOT_ABOVE_NO_SKILL}" in md
    assert f"| {NO_SKILL} | - | 2 |" in md
    # the note lists the rows per metric: sinusoidal is marked in F1 only, dft in AUPRC only
    assert "F1: not above `flag-all`: sinusoidal." in md and "AUPRC: not above `flag-all`: dft." in md
    # a row marked in F1 only must not read as if it were below flag-all in AUPRC too
    alone = markdown(compare([r for r in runs if r["encoding"] == "sinusoidal"]))
    assert (
        "F1: not above `flag-all`: sinusoidal." in alone and "AUPRC: every row is above `flag-all`." in alone
    )
    assert "in F1 or AUPRC" not in alone


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_from_json_rebuilds_the_same_table(tmp_path):
    runs, _ = grid()
    baseline = [
        {"split_seed": k, "test": {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "auprc": 0.7}}
        for k in range(2)
    ]
    c = compare(runs, baseline=baseline)
    c.meta.update(dataset="synthetic")
    paths = write(c, tmp_path)
    again = from_json(paths["json"].read_text())
    assert markdown(again) == markdown(c) and again.meta["dataset"] == "synthetic"


def _family_grid():
    """The classify table with three event families (it printed 145 columns)."""
    runs, _ = grid()
    for r in runs:
        r["test"].update({"auprc:level shift": 0.4, "auprc:spike": 0.7, "auprc:wrong timing": 0.3})
    families = ("auprc:level shift", "auprc:spike", "auprc:wrong timing")
    return compare(runs, metrics=("precision", "recall", "f1", "auprc", *families))


def test_tables_fit_100_columns_and_a_legend_explains_every_column(tmp_path):
    comparison = _family_grid()
    text = markdown(comparison)
    lines = text.splitlines()
    table = [line for line in lines if line.startswith("|")]
    assert max(map(len, table)) <= 100, max(table, key=len)
    titles = {cell.strip() for line in lines if line.startswith("| ") for cell in line.strip("|").split("|")}
    for title in (
        "F1",
        "AUPRC level shift",
        "AUPRC wrong timing",
        "shuffle ΔF1",
        "shuffle ΔAUPRC",
        "p Wilcoxon",
    ):
        assert title in titles, title
    rows = [line for line in lines if line.startswith("| dft | native | 6 |")]
    assert len(rows) >= 2  # the split table repeats the row names
    legend = next(line for line in lines if line.startswith("Columns — "))
    for term in (
        "n: runs averaged",
        "AUPRC <family>: AUPRC of the positive windows of that event family",
        "shuffle Δ<metric>: mean of metric(test) − metric(test with each window's time steps shuffled)",
    ):
        assert term in legend, term
    paths = write(comparison, tmp_path)
    assert paths["md"].read_text() == text  # the same table and legend in results.md


def test_probe_table_with_many_lags_fits_100_columns():
    from posenc_bench.experiment.probes import ProbeResult
    from posenc_bench.experiment.probes import markdown as probe_markdown

    ks = range(1, 31)
    accuracy = {name: {k: 0.5 + k / 100 for k in ks} for name in ("none", "sinusoidal (matched)", "rope")}
    result = ProbeResult(accuracy, accuracy, [], "order", 32, 1.0, {})
    table = [line for line in probe_markdown(result, n_seeds=1).splitlines() if line.startswith("|")]
    assert max(map(len, table)) <= 100
    cells = {c.strip() for line in table for c in line.strip("|").split("|")}
    assert {f"k={k}" for k in ks} <= cells and "0.80" in cells


def test_an_untrained_baseline_on_one_split_is_compared_with_flag_all_exactly():
    """A baseline has one deterministic value per split: on one split its difference from flag-all is
    exact (no interval to estimate), so it is marked ‡ exactly when it is not above flag-all."""
    runs = [record("sinusoidal", "native", 0, s, f1=0.5, auprc=0.5) for s in range(3)]
    p = 0.10  # split 0's prevalence: flag-all F1 2p/(1+p) ≈ 0.18, AUPRC 0.10
    below_in_f1 = {"name": "hgb-summary", "split_seed": 0, "test": {"precision": 0.1, "recall": 0.1, "f1": 0.1,
                                                                     "auprc": 0.3}}  # fmt: skip
    row = {r.encoding: r for r in compare(runs, baseline=[below_in_f1]).rows}["hgb-summary"]
    assert row.vs_no_skill["f1"] == pytest.approx((0.1 - 2 * p / (1 + p),) * 3)
    assert row.clears_no_skill("f1") is False and row.clears_no_skill("auprc") is True


def test_one_trained_run_is_not_shown_above_flag_all():
    """With one seed on one split there is no interval: the row is marked ‡ even where its value is
    above flag-all, since nothing shows it better than flagging everything."""
    row = {r.encoding: r for r in compare([record("sinusoidal", "native", 0, 0, f1=0.9, auprc=0.9)]).rows}
    assert (
        row["sinusoidal"].clears_no_skill("auprc") is False and row[NO_SKILL].clears_no_skill("auprc") is None
    )


def test_md_table_right_aligns_numeric_columns_and_keeps_one_table_without_a_width():
    from posenc_bench.experiment.compare import WIDTH, md_table

    wide = [(f"c{i}", ["x" * 30]) for i in range(5)]  # 5 × 33 characters: wider than WIDTH
    assert WIDTH < 5 * 33
    one = md_table(["encoding"], [("rope",)], wide, numeric=True, width=None)
    assert one[:2] == ["| encoding | c0 | c1 | c2 | c3 | c4 |", "|---|---:|---:|---:|---:|---:|"]
    assert len(one) == 3
    split = md_table(["encoding"], [("rope",)], wide)
    assert split[1] == "|---|---|---|" and "" in split  # split into several tables, left-aligned
    assert all(line.startswith("| rope |") for line in split if line.startswith("| rope"))


def test_csv_text_writes_rows_as_the_csv_module_does():
    from posenc_bench.experiment.compare import csv_text

    assert csv_text([["a", "b"], [1, "x,y"]]) == 'a,b\r\n1,"x,y"\r\n'
