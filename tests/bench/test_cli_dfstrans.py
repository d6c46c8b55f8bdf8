"""``posenc bench --model spatiotemporal --protocol dfstrans`` end to end: runs, decay in the log, resume, bad input."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import re
from pathlib import Path

import pytest
import torch

from posenc.cli import main
from posenc_bench.data import load_dataset, make_splits
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.runs import CHECKPOINT, METRICS, execute, run_dir

DATA = ["--dataset", "synthetic", "--dataset-option", "n_series=2", "--dataset-option", "length=2048"]
TINY = [
    *DATA,
    "--model",
    "spatiotemporal",
    "--n-windows",
    "4",
    "--window-length",
    "8",
    "--d-model",
    "8",
    "--heads",
    "2",
    "--epochs",
    "3",
    "--patience",
    "5",
    "--seeds",
    "1",
    "--no-progress",
    "--no-baseline",
    "--no-shuffle-control",
]


def bench(out: Path, *extra: str) -> int:
    return main(["bench", *TINY, "--out", str(out), *extra])


def _log(path: Path) -> list[dict[str, str]]:
    with open(path / "log.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_reproduction_runs_logs_the_decay_and_is_skipped_on_rerun(tmp_path, capsys):
    assert bench(tmp_path, "--protocol", "dfstrans", "--encodings", "dfstrans_dft", "--monitor", "loss") == 0
    capsys.readouterr()
    out = (tmp_path / "results.md").read_text()
    for row in ("| none | native | 1 |", "| sinusoidal | native | 1 |", "| dfstrans_dft | native | 1 |"):
        assert row in out
    runs = tmp_path / "runs" / "synthetic-dfstrans"
    decayed = [float(r["encoding_row_norm"]) for r in _log(runs / "dfstrans_dft-native" / "split0-seed0")]
    # every training batch and every evaluation call multiplies the middle rows by sqrt(2/d) = 0.5 again
    assert len(decayed) == 3 and decayed[0] < 0.2 and all(b < 0.1 * a for a, b in itertools.pairwise(decayed))
    sinus = [float(r["encoding_row_norm"]) for r in _log(runs / "sinusoidal-native" / "split0-seed0")]
    assert sinus == [pytest.approx(2.0)] * 3  # sqrt(d/2), d = 8, constant
    assert all(math.isnan(float(r["encoding_row_norm"])) for r in _log(runs / "none-native" / "split0-seed0"))
    record = json.loads((runs / "dfstrans_dft-native" / "split0-seed0" / METRICS).read_text())
    assert record["threshold"] == 0.5
    leaked = record["test_events_in_train"]  # the leakage indicator is printed with the test split when > 0
    assert (
        (f"events ({leaked} also in training: LEAKY)" in out) if leaked else ("also in training" not in out)
    )
    config = json.loads((runs / "dfstrans_dft-native" / "split0-seed0" / "config.json").read_text())["config"]
    assert config["model"] == "spatiotemporal" and config["window"] == config["stride"] == 32

    assert bench(tmp_path, "--protocol", "dfstrans", "--encodings", "dfstrans_dft", "--monitor", "loss") == 0
    assert capsys.readouterr().out.count("(finished earlier, skipped)") == 3


def test_interrupted_run_resumes_with_the_decayed_table(tmp_path):
    """The decayed table is state: a resumed run must end exactly where an uninterrupted one does."""
    config = RunConfig(
        dataset="synthetic",
        window=32,
        stride=32,
        model="spatiotemporal",
        n_windows=4,
        window_length=8,
        d_model=8,
        n_heads=2,
        encoding="dfstrans_dft",
        epochs=3,
        patience=5,
        protocol="dfstrans",
        monitor="loss",
    )
    splits = make_splits(load_dataset("synthetic", n_series=2, length=2048), window=32, protocol="dfstrans")
    cpu = torch.device("cpu")
    full = execute(config, splits, root=tmp_path / "full", device=cpu, progress=False)

    def interrupt(checkpoint, row):
        if row["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(config, splits, root=tmp_path / "cut", device=cpu, progress=False, on_epoch=interrupt)
    assert (run_dir(tmp_path / "cut", config) / CHECKPOINT).is_file()
    resumed = execute(config, splits, root=tmp_path / "cut", device=cpu, progress=False)
    assert resumed.test == full.test
    keys = ("epoch", "train_loss", "val_loss", "encoding_row_norm")  # not the timings
    cut, whole = (_log(run_dir(tmp_path / name, config)) for name in ("cut", "full"))
    assert [[r[k] for k in keys] for r in cut] == [[r[k] for k in keys] for r in whole]


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_blocked_protocol_with_the_spatiotemporal_model(tmp_path, capsys):
    assert bench(tmp_path, "--encodings", "dft,rope", "--scale", "native,matched", "--epochs", "1") == 0
    out = (tmp_path / "results.md").read_text()
    for row in ("| dft | matched | 1 |", "| rope | native | 1 |"):
        assert row in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "30"], r"--window 30 must equal --n-windows × --window-length = 4 × 8 = 32"),
        (["--window-length", "7", "--window", "28"], r"--window-length must be >= 8.*7 leaves 0 features"),
        (
            ["--protocol", "dfstrans", "--anomaly-percent", "0"],
            r"--anomaly-percent must be a number in \(0, 100\]; got 0\.0",
        ),
        (
            ["--protocol", "dfstrans", "--anomaly-percent", "120"],
            r"--anomaly-percent must be a number in \(0, 100\]; got 120\.0",
        ),
        (
            ["--protocol", "dfstrans", "--anomaly-percent", "0.5"],
            r"--anomaly-percent 0.5: fewer than 2 positive",
        ),
        (
            ["--d-model", "9", "--heads", "3", "--window-length", "16", "--window", "64"],
            r"--d-model must be a multiple of --window-length // 8 = 2",
        ),
        (
            ["--encodings", "dft", "--n-windows", "12", "--window", "96"],
            r"--n-windows 12: encoding 'dft' is faithful only for 8 positions at --d-model 8",
        ),
    ],
)
def test_bad_input_fails_before_training(tmp_path, capsys, args, message):
    assert bench(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert not (tmp_path / "runs").exists()


def test_default_model_stays_the_transformer():
    import argparse

    from posenc_bench.cli import plan_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    plan = plan_from_args(parser.parse_args(["bench"]))
    assert plan.base.model == "transformer" and plan.base.window == 32 and plan.base.d_model == 32
    st = plan_from_args(parser.parse_args(["bench", "--model", "spatiotemporal"]))
    assert dataclasses.astuple(st.base)[0] == "synthetic"
    assert (st.base.window, st.base.stride, st.base.d_model, st.base.n_heads) == (128, 128, 16, 2)


def test_the_comparison_table_prints_the_leakage_indicator():
    from posenc_bench.experiment.compare import compare, markdown

    record = {
        "dataset": "toy",
        "subset": "",
        "encoding": "none",
        "scale": "native",
        "split_seed": 0,
        "seed": 0,
        "test": {"f1": 0.5, "precision": 0.5, "recall": 0.5, "auprc": 0.5, "accuracy": 0.5},
        "test_windows": 10,
        "test_positive_windows": 3,
        "test_events": 4,
        "test_events_in_train": 3,
    }
    assert "4 events (3 also in training: LEAKY)" in markdown(compare([record]))
    assert "also in training" not in markdown(compare([{**record, "test_events_in_train": 0}]))


def test_the_authors_protocol_stops_on_validation_loss_unless_told_otherwise():
    import argparse

    from posenc_bench.cli import plan_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())

    def monitor(*argv: str) -> str:
        return plan_from_args(parser.parse_args(["bench", "--model", "spatiotemporal", *argv])).base.monitor

    assert monitor() == "auprc" and monitor("--protocol", "blocked") == "auprc"
    assert monitor("--protocol", "dfstrans") == "loss"
    assert monitor("--protocol", "dfstrans", "--monitor", "auprc") == "auprc"
