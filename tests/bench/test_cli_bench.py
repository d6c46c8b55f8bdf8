"""``posenc bench`` end to end through the CLI: a tiny benchmark, resume/skip, bad input, DDP."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from bench_args import tiny_bench

from posenc.cli import main

TINY = tiny_bench(length=1024, epochs=2, seeds=2)


def bench(tmp_path: Path, *extra: str) -> int:
    return main(["bench", *TINY, "--out", str(tmp_path), *extra])


@pytest.mark.slow  # trains 6 runs, twice the wall time of most files
def test_tiny_benchmark_end_to_end_then_skipped_on_rerun(tmp_path, capsys):
    assert bench(tmp_path, "--encodings", "sinusoidal,dft") == 0
    capsys.readouterr()
    out = (tmp_path / "results.md").read_text()
    for ext in ("md", "csv", "json", "png"):
        assert (tmp_path / f"results.{ext}").stat().st_size > 0
    for row in (
        "| none | native | 2 |",
        "| sinusoidal | native | 2 |",
        "| dft | native | 2 |",
        "| hgb-summary | - | 1 |",
    ):
        assert row in out
    assert "| dft | native | f1 | 2 |" in out  # the paired test against sinusoidal
    data = json.loads((tmp_path / "results.json").read_text())
    assert len(data["runs"]) == 6 and data["meta"]["runs_trained"] == 6
    metrics = sorted((tmp_path / "runs").rglob("metrics.json"))
    assert len(metrics) == 6
    mtimes = [p.stat().st_mtime_ns for p in metrics]

    assert bench(tmp_path, "--encodings", "sinusoidal,dft") == 0
    assert capsys.readouterr().out.count("(finished earlier, skipped)") == 6
    assert [p.stat().st_mtime_ns for p in metrics] == mtimes
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["meta"]["runs_trained"] == 0 and again["rows"] == data["rows"]


def test_scale_grid_one_row_per_encoding_and_scale(tmp_path, capsys):
    assert (
        bench(
            tmp_path,
            "--encodings",
            "dft,alibi",
            "--scale",
            "native,matched",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--no-baseline",
        )
        == 0
    )
    out = (tmp_path / "results.md").read_text()
    for row in ("| dft | native |", "| dft | matched |", "| sinusoidal | matched |", "| alibi | native |"):
        assert row in out
    assert "| alibi | matched |" not in out.split("Paired")[0]  # alibi has no scale policy: one row
    assert "| alibi | matched | f1 |" in out  # … compared with sinusoidal at matched scale


def test_leaky_protocol_is_kept_apart_and_flagged(tmp_path, capsys):
    """``--protocol random_windows`` measures leakage: its runs live apart and its table says LEAKY."""
    assert (
        bench(
            tmp_path,
            "--encodings",
            "sinusoidal",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--no-baseline",
            "--protocol",
            "random_windows",
        )
        == 0
    )
    assert "LEAKY split protocol random_windows" in capsys.readouterr().out  # in the headline, and
    assert "**LEAKY split protocol `random_windows`" in (tmp_path / "results.md").read_text()
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["synthetic-random_windows"]
    config = json.loads(next((tmp_path / "runs").rglob("config.json")).read_text())
    assert config["config"]["protocol"] == "random_windows"
    assert bench(tmp_path, "--encodings", "sinusoidal", "--seeds", "1", "--epochs", "1", "--no-baseline") == 0
    assert "LEAKY" not in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["synthetic", "synthetic-random_windows"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--dataset", "nosuchdata"], "unknown dataset 'nosuchdata'.*synthetic, probes, msl, smd"),
        (["--encodings", "sinusoidal,fourier"], "unknown 'fourier'; valid: none, sinusoidal, dft"),
        (
            ["--scale", "native,huge"],
            "--scale must be one of 'native', 'unit', 'matched', 'learned'; got 'huge'",
        ),
        (["--splits", "0"], r"--splits must be an int in \[1, 1000\]; got 0"),
        (["--dataset", "probes", "--protocol", "random_windows"], "--protocol random_windows does not apply"),
        (["--seeds", "0"], r"--seeds must be an int in \[1, 1000\]; got 0"),
        (
            ["--task", "detect", "--protocol", "dfstrans"],
            "--protocol dfstrans applies to --task classify only",
        ),
        (
            ["--task", "detect", "--protocol", "random_windows"],
            "--protocol random_windows applies to --task classify only",
        ),
        (["--window", "2000", "--encodings", "rope"], "--window 2000 is longer than series"),
        (
            ["--window", "24", "--encodings", "dft"],
            "'dft' with window=24: it is faithful .*0 … 15 at d_model=16",
        ),
        (
            [
                "--dataset-option",
                "spikes=0",
                "--dataset-option",
                "order=0",
                "--dataset-option",
                "timing=0",
                "--dataset-option",
                "long_range=0",
            ],
            "no labelled anomalies",
        ),
    ],
)
def test_bad_input_fails_before_training(tmp_path, capsys, args, message):
    assert bench(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("posenc bench: error:")
    assert re.search(message, err), err
    assert not (tmp_path / "runs").exists()  # nothing was trained


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None,
    reason="torchrun not installed beside the interpreter",
)
def test_data_parallel_two_cpu_processes(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        torchrun,
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "posenc",
        "bench",
        *TINY,
        "--encodings",
        "sinusoidal",
        "--epochs",
        "1",
        "--seeds",
        "1",
        "--no-baseline",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("sinusoidal ")]
    assert len(rows) == 1, done.stdout  # only rank 0 prints the summary
    assert "| sinusoidal | native | 1 |" in (tmp_path / "results.md").read_text()
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["meta"]["world_size"] == 2
    configs = [json.loads(p.read_text()) for p in (tmp_path / "runs").rglob("config.json")]
    assert len(configs) == 2 and {c["world_size"] for c in configs} == {2}
    assert not list(tmp_path.rglob("*.tmp"))
    for run in data["runs"]:
        base = {"precision", "recall", "f1", "auprc", "accuracy"}  # + per-family AUPRC of the synthetic data
        assert base <= set(run["test"]) and all(k.startswith("auprc:") for k in set(run["test"]) - base)
        assert 0.0 <= run["test"]["auprc"] <= 1.0


def test_repeated_splits_pool_splits_and_seeds(tmp_path, capsys):
    assert (
        bench(
            tmp_path,
            "--encodings",
            "sinusoidal",
            "--splits",
            "2",
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--no-baseline",
            "--no-shuffle-control",
        )
        == 0
    )
    data = json.loads((tmp_path / "results.json").read_text())
    assert [s["split_seed"] for s in data["test_splits"]] == [0, 1]
    assert {r["encoding"]: r["n"] for r in data["rows"]} == {"none": 2, "sinusoidal": 2, "flag-all": 2}
    assert {(r["split_seed"], r["seed"]) for r in data["runs"]} == {(0, 0), (1, 0)}
    assert data["rows"][0]["shuffle_drop"] is None


PROBE = [
    "bench",
    "--dataset",
    "probes",
    "--dataset-option",
    "n_train=64",
    "--dataset-option",
    "n_eval=32",
    "--window",
    "8",
    "--d-model",
    "8",
    "--heads",
    "2",
    "--layers",
    "1",
    "--epochs",
    "1",
    "--seeds",
    "1",
    "--no-progress",
]


def test_probe_suite_accuracy_against_lag(tmp_path, capsys):
    assert main([*PROBE, "--encodings", "dft", "--lags", "1,7", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| encoding | k=1 | k=7 |" in out and "| dft (matched) |" in out and "| none |" in out
    data = json.loads((tmp_path / "probes.json").read_text())
    assert set(data["accuracy"]) == {"none", "sinusoidal (matched)", "dft (matched)"}
    assert set(data["accuracy"]["none"]) == {"1", "7"}
    for ext in ("md", "csv", "png"):
        assert (tmp_path / f"probes.{ext}").stat().st_size > 0
    assert (tmp_path / "runs" / "probes" / "k7" / "dft-matched" / "split0-seed0" / "metrics.json").is_file()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--lags", "1,9"], "--lags must be distances k with 1 <= k < --window 8 (k <= 7), got 9"),
        (["--splits", "2"], "--splits applies to anomaly datasets"),
        (["--scale", "loud"], "--scale must be one of 'native', 'unit', 'matched', 'learned'; got 'loud'"),
        (["--lags", "1,x"], "--lags must be comma-separated integers"),
    ],
)
def test_probe_bad_input_fails_before_training(tmp_path, capsys, args, message):
    assert main([*PROBE, "--out", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_lags_without_probes_is_refused(tmp_path, capsys):
    assert bench(tmp_path, "--lags", "1,2") == 2
    assert "--lags applies to --dataset probes only" in capsys.readouterr().err


def test_interrupted_benchmark_resumes_without_losing_finished_runs(tmp_path, capsys, monkeypatch):
    from posenc_bench.experiment import bench as bench_module

    args = ("--encodings", "sinusoidal", "--seeds", "2", "--no-baseline")
    assert bench(tmp_path / "whole", *args) == 0
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())

    real_execute, calls = bench_module.execute, []

    def execute_then_interrupt(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_execute(*a, **k)

    monkeypatch.setattr(bench_module, "execute", execute_then_interrupt)
    assert bench(tmp_path / "cut", *args) == 130
    assert "interrupted; finished results are kept" in capsys.readouterr().err
    monkeypatch.setattr(bench_module, "execute", real_execute)
    assert bench(tmp_path / "cut", *args) == 0
    assert capsys.readouterr().out.count("(finished earlier, skipped)") == 2
    resumed = json.loads((tmp_path / "cut" / "results.json").read_text())
    assert resumed["rows"] == whole["rows"] and resumed["paired"] == whole["paired"]


DETECT = ["--task", "detect", "--dataset-option", "nominal_length=1024", "--horizon", "2"]


@pytest.mark.slow  # trains detectors end to end
def test_detect_task_end_to_end_then_skipped_on_rerun(tmp_path, capsys):
    """``--task detect`` on synthetic data in seconds: both detectors, paired tests, shuffle control, flag-all, resume."""
    args = [
        *DETECT,
        "--detector",
        "forecast,reconstruct",
        "--encodings",
        "rope",
        "--epochs",
        "1",
        "--no-baseline",
    ]
    assert bench(tmp_path, *args) == 0
    out = (tmp_path / "results.md").read_text()
    for row in (
        "| forecast | none | native | 2 |",
        "| forecast | rope | native | 2 |",
        "| reconstruct | sinusoidal | native | 2 |",
        "| — | flag-all | - | 1 |",
        "| forecast | rope | native | event_f1 | 2 |",
        "| reconstruct | none | native | auprc | 2 |",
    ):
        assert row in out, row
    assert "event F1" in out and "point-adjusted F1 (inflated)" in out and "flags every test step" in out
    # the per-series section comes first, the pooled table second
    assert out.index("## Per series (the unit of replication)") < out.index("## Pooled over series")
    for row in ("| forecast | rope | none | vus_pr | 2 |", "| reconstruct | rope | flag-all | auprc | 2 |"):
        assert row in out, row
    series_csv = (tmp_path / "results-series.csv").read_text().splitlines()
    assert series_csv[0].startswith("kind,model,row,reference,metric,series")
    data = json.loads((tmp_path / "results.json").read_text())
    assert all(set(r["series"]) == {"synthetic-0", "synthetic-1"} for r in data["runs"] + data["baseline"])
    assert all(set(v) == {"auprc", "vus_pr"} for r in data["runs"] for v in r["series"].values())
    assert data["metrics"][:3] == ["event_precision", "event_recall", "event_f1"]
    runs = data["runs"]
    assert len(runs) == 12 and all(
        "shuffled_test" in r and r["detector"] in ("forecast", "reconstruct") for r in runs
    )
    from posenc_bench.data import make_synthetic

    n_events = sum(len(s.events) for s in make_synthetic(n_series=2, length=1024).series)
    assert {r["test"]["events"] for r in runs} == {float(n_events)}
    assert len(list((tmp_path / "runs" / "synthetic" / "detect-reconstruct").rglob("metrics.json"))) == 6
    assert bench(tmp_path, *args) == 0
    assert capsys.readouterr().out.count("(finished earlier, skipped)") == 12


@pytest.mark.parametrize(
    "args, message",
    [
        (["--horizon", "16"], "--horizon must be < --window, got --horizon 16 with --window 16"),
        (
            ["--dataset-option", "nominal_length=0"],
            "needs nominal training arrays.*msl: --dataset-option include_train",
        ),
        (
            ["--dataset-option", "nominal_length=600", "--window", "119", "--encodings", "rope"],
            "'synthetic-0': its held-out part has 120 steps",
        ),
        (["--splits", "2"], "--splits applies to the classify task"),
        (["--detector", "lstm"], "--detector must be one of 'forecast', 'reconstruct'; got 'lstm'"),
    ],
)
def test_detect_bad_input_fails_before_training(tmp_path, capsys, args, message):
    assert bench(tmp_path, *DETECT, *args) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert not (tmp_path / "runs").exists()


def test_model_size_left_to_the_default(tmp_path, capsys):
    """No --d-model/--heads: the resolved default size is used (and checked against memory), not None."""
    args = [
        "bench",
        "--dataset",
        "synthetic",
        "--dataset-option",
        "n_series=2",
        "--dataset-option",
        "length=1024",
        "--window",
        "16",
        "--layers",
        "1",
        "--epochs",
        "1",
        "--seeds",
        "1",
        "--encodings",
        "none",
        "--no-baseline",
        "--no-shuffle-control",
        "--no-progress",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    config = json.loads(next((tmp_path / "runs").rglob("config.json")).read_text())
    from posenc_bench.experiment.config import RunConfig

    assert config["config"]["d_model"] == RunConfig().d_model


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
@pytest.mark.parametrize("task", [[], DETECT])
def test_a_rerun_reads_the_stored_baselines_instead_of_computing_them(tmp_path, capsys, monkeypatch, task):
    """Baselines are stored like runs: re-running a finished benchmark computes none of them again (they
    took 86 of its 103 s), gives the same rows, and recomputes them when the data change."""
    from posenc_bench.experiment import baselines, controls

    args = ["--encodings", "none", "--seeds", "1", "--epochs", "1", "--no-shuffle-control", *task]
    assert bench(tmp_path, *args) == 0
    first = json.loads((tmp_path / "results.json").read_text())
    assert {b["name"] for b in first["baseline"]} >= {"matrix-profile", "max-abs"}
    capsys.readouterr()

    def computed(*a, **k):
        raise AssertionError("a stored baseline was computed again")

    # every classify baseline is scored through scorer_metrics, every detect one through detect_step_scores
    for name in ("scorer_metrics", "detect_step_scores", "classify_window_scores"):
        monkeypatch.setattr(baselines, name, computed)
    monkeypatch.setattr(controls, "hgb_scorer", computed)
    assert bench(tmp_path, *args) == 0
    n = len(first["baseline"])
    assert f"({n} of {n} read from earlier runs)" in capsys.readouterr().out
    again = json.loads((tmp_path / "results.json").read_text())
    assert again["baseline"] == first["baseline"]
    monkeypatch.undo()
    stored = list((tmp_path / "baselines").rglob("record.json"))
    assert len(stored) == n
    for path in stored:  # as if the data had changed since: computed again, stored anew
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "key": {**data["key"], "data_fingerprint": "0" * 64}}))
    assert bench(tmp_path, *args) == 0
    assert "read from earlier runs" not in capsys.readouterr().out
    assert all(json.loads(p.read_text())["key"]["data_fingerprint"] != "0" * 64 for p in stored)


@pytest.mark.slow  # trains 6 tiny runs, then reads them back
def test_the_summary_leads_with_the_headline_and_names_the_full_tables(tmp_path, capsys):
    """The terminal summary was the whole results.md (164 lines, up to 537 characters, a 44-row paired
    table): now a few lines of at most 110 characters, one per encoding, and where the tables are; a
    re-run says first how many runs it found done."""
    args = [
        "--encodings",
        "none,rope",
        "--seeds",
        "2",
        "--epochs",
        "1",
        "--no-baseline",
        "--no-shuffle-control",
    ]
    assert bench(tmp_path, *args) == 0
    out = capsys.readouterr().out
    summary = out[out.index("\nsynthetic: 6 runs") + 1 :].splitlines()
    widths = [len(line.replace(str(tmp_path), "OUT")) for line in summary]  # the folder is the user's
    assert len(summary) <= 10 and max(widths) <= 110, summary
    rows = {
        line.split()[0]: line
        for line in summary
        if line.split() and line.split()[0] in ("none", "rope", "sinusoidal", "flag-all")
    }
    assert set(rows) == {"none", "rope", "sinusoidal", "flag-all"}, summary
    assert re.search(r"[+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] p=", rows["rope"])  # auprc − sinusoidal
    assert f"all tables (every metric, paired tests, baselines, series): {tmp_path / 'results.md'}" in summary
    assert "| rope | native |" in (tmp_path / "results.md").read_text() and "| rope |" not in out
    assert bench(tmp_path, *args) == 0
    again = capsys.readouterr().out
    assert again.splitlines()[1].startswith("resuming: 6 of 6 runs done"), again


def test_no_baseline_drops_every_untrained_baseline_as_its_help_says(tmp_path, capsys):
    assert bench(tmp_path, "--encodings", "none", "--seeds", "1", "--epochs", "1", "--no-baseline") == 0
    assert json.loads((tmp_path / "results.json").read_text())["baseline"] == []
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert (
        "--no-baseline skip the untrained baselines (gradient boosting on order-free summaries and on lagged "
        "cross-channel products, the matrix profile, max |x|, and the synthetic data's oracle)" in help_text
    )


def test_seeds_as_a_range_train_those_seeds_and_a_wider_range_reuses_them(tmp_path, capsys):
    """``--seeds 1-2`` trains seeds 1 and 2; ``--seeds 0-2`` then trains only seed 0's runs and reads the
    others back: a run's seed is its identity, whichever range asked for it."""
    args = ("--encodings", "sinusoidal", "--no-baseline", "--no-shuffle-control")
    assert bench(tmp_path, *args, "--seeds", "1-2") == 0
    data = json.loads((tmp_path / "results.json").read_text())
    assert sorted({r["seed"] for r in data["runs"]}) == [1, 2] and data["meta"]["seed_start"] == 1
    capsys.readouterr()
    assert bench(tmp_path, *args, "--seeds", "0-2") == 0
    out = capsys.readouterr().out
    data = json.loads((tmp_path / "results.json").read_text())
    assert sorted({r["seed"] for r in data["runs"]}) == [0, 1, 2]
    assert out.count("(finished earlier, skipped)") == 4 and data["meta"]["runs_trained"] == 2


@pytest.mark.parametrize("text", ["3-1", "x", "1-", "-2"])
def test_a_bad_seed_range_is_refused_naming_the_flag(tmp_path, capsys, text):
    with pytest.raises(SystemExit):
        bench(tmp_path, "--seeds", text)
    assert f"--seeds must be a count N (seeds 0…N-1) or a range A-B with 0 <= A <= B, got {text!r}" in (
        capsys.readouterr().err
    )
