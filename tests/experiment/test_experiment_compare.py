"""Aggregation: mean ± std per (encoding, scale), paired differences, outputs on disk."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from posenc.experiment.compare import BASELINE, compare, markdown, write
from posenc.experiment.stats import sign_flip_p


def record(encoding, scale, split, seed, f1, auprc=0.5, shuffled=None):
    r = {"encoding": encoding, "scale": scale, "split_seed": split, "seed": seed,
         "test": {"precision": 0.5, "recall": 0.6, "f1": f1, "auprc": auprc},
         "test_windows": 100, "test_positive_windows": 10 + split, "test_events": 3}
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
    tests = {(t.encoding, t.scale, t.metric): t for t in compare(runs).paired}
    d = np.array([0.01 * (s + 1) for k in range(2) for s in range(3)])
    t = tests["dft", "native", "f1"]
    assert t.n == 6 and t.mean_diff == pytest.approx(d.mean())
    assert t.p_sign_flip == pytest.approx(sign_flip_p(d))
    assert t.ci_low <= d.mean() <= t.ci_high
    assert t.min_p == pytest.approx(2 / 64)
    assert tests["dft", "matched", "f1"].mean_diff == pytest.approx(-0.0075)
    # rope has no scale policy: compared as defined against the reference at every scale
    assert tests["rope", "native", "f1"].mean_diff == pytest.approx(0.03)
    assert tests["rope", "matched", "f1"].mean_diff == pytest.approx(0.01)
    assert tests["dft", "native", "auprc"].mean_diff == pytest.approx(0.0)
    assert math.isnan(tests["dft", "native", "auprc"].p_wilcoxon)
    assert ("sinusoidal", "native", "f1") not in tests


def test_outputs_written(tmp_path):
    runs, _ = grid()
    baseline = [{"split_seed": k, "test": {"precision": 1.0, "recall": 0.5, "f1": 2 / 3, "auprc": 0.7}} for k in range(2)]
    c = compare(runs, baseline=baseline)
    paths = write(c, tmp_path)
    assert {p.name for p in paths.values()} == {"results.md", "results.csv", "results.json", "results.png"}
    md = paths["md"].read_text()
    assert md == markdown(c)
    assert "| dft | native | 6 |" in md and BASELINE in md and "split 1: 100 windows, 11 positive, 3 events" in md
    rows = list(csv.DictReader(paths["csv"].open()))
    assert [(r["encoding"], r["scale"]) for r in rows][-1] == (BASELINE, "-")
    dft = next(r for r in rows if (r["encoding"], r["scale"]) == ("dft", "native"))
    assert float(dft["f1_diff"]) == pytest.approx(0.02)  # mean of 0.01·(seed+1)
    data = json.loads(paths["json"].read_text())
    assert len(data["runs"]) == len(runs) and data["baseline"][0]["test"]["f1"] == pytest.approx(2 / 3)
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
