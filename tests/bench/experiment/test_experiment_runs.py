"""Runs on disk: files, determinism, resume after interruption, skip when finished, val-only threshold."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest
import torch

from posenc_bench.data import Splits, WindowSet
from posenc_bench.experiment import runs
from posenc_bench.experiment.claims import LOCK
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.runs import CHECKPOINT, CONFIG, LOG, METRICS, execute, run_dir

CPU = torch.device("cpu")
TIMING = ("train_seconds", "windows_per_s")


def _log(directory):
    with open(directory / LOG) as f:
        return [{k: v for k, v in row.items() if k not in TIMING} for row in csv.DictReader(f)]


def _result(record):
    data = record.to_json()
    return {k: data[k] for k in ("test", "val", "threshold", "best_epoch", "epochs_run", "shuffled_test")}


def test_run_writes_config_log_checkpoint_metrics(tmp_path, tiny_splits, tiny_config):
    record = execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    d = run_dir(tmp_path, tiny_config)
    assert d.relative_to(tmp_path).parts == ("runs", "synthetic", "sinusoidal-native", "split0-seed0")
    assert {p.name for p in d.iterdir()} == {CONFIG, LOG, CHECKPOINT, METRICS, LOCK}  # no .tmp left behind
    resolved = json.loads((d / CONFIG).read_text())
    assert resolved["config"] == tiny_config.to_dict() and resolved["encoding_options"] == {}
    assert len(_log(d)) == record.training.epochs_run == 3
    stored = json.loads((d / METRICS).read_text())
    assert stored["test"] == record.test and record.skipped is False
    assert RunRecord.from_json(stored) == dataclasses.replace(record, skipped=None)
    assert stored["test_positive_windows"] == tiny_splits.summary["test"]["positives"]
    assert set(stored["test"]) == {"precision", "recall", "f1", "auprc", "accuracy"}


def test_same_seed_gives_identical_results_other_seed_does_not(tmp_path, tiny_splits, tiny_config):
    a = execute(tiny_config, tiny_splits, root=tmp_path / "a", device=CPU, progress=False)
    b = execute(tiny_config, tiny_splits, root=tmp_path / "b", device=CPU, progress=False)
    assert _result(a) == _result(b)
    assert _log(run_dir(tmp_path / "a", tiny_config)) == _log(run_dir(tmp_path / "b", tiny_config))
    other = dataclasses.replace(tiny_config, seed=1)
    execute(other, tiny_splits, root=tmp_path / "c", device=CPU, progress=False)
    assert _log(run_dir(tmp_path / "c", other)) != _log(run_dir(tmp_path / "a", tiny_config))


def test_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path, tiny_splits, tiny_config):
    full = execute(tiny_config, tiny_splits, root=tmp_path / "full", device=CPU, progress=False)

    def interrupt_after_first_epoch(checkpoint, row):
        if row["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute(
            tiny_config,
            tiny_splits,
            root=tmp_path / "cut",
            device=CPU,
            progress=False,
            on_epoch=interrupt_after_first_epoch,
        )
    d = run_dir(tmp_path / "cut", tiny_config)
    assert (d / CHECKPOINT).is_file() and not (d / METRICS).exists()
    assert len(_log(d)) == 1
    epochs_seen = []
    resumed = execute(
        tiny_config,
        tiny_splits,
        root=tmp_path / "cut",
        device=CPU,
        progress=False,
        on_epoch=lambda ckpt, row: epochs_seen.append(row["epoch"]),
    )
    assert epochs_seen == [2, 3]  # epoch 1 was not trained again
    assert _result(resumed) == _result(full)
    assert _log(d) == _log(run_dir(tmp_path / "full", tiny_config))


def test_finished_run_is_skipped_not_retrained(tmp_path, tiny_splits, tiny_config, monkeypatch):
    first = execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    d = run_dir(tmp_path, tiny_config)
    mtimes = {p.name: p.stat().st_mtime_ns for p in d.iterdir()}

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(runs, "fit_loop", no_training)
    again = execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    assert again.skipped is True and _result(again) == _result(first)
    assert {p.name: p.stat().st_mtime_ns for p in d.iterdir()} == mtimes


def test_changed_settings_in_the_same_directory_are_refused(tmp_path, tiny_splits, tiny_config):
    execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    with pytest.raises(ValueError, match="different settings.*epochs"):
        execute(
            dataclasses.replace(tiny_config, epochs=2), tiny_splits, root=tmp_path, device=CPU, progress=False
        )


def test_threshold_is_chosen_on_validation_only(tmp_path, tiny_splits, tiny_config):
    t = tiny_splits.test
    flipped = WindowSet(t.X, 1 - t.y, t.series, t.start, t.event)
    other = Splits(tiny_splits.train, tiny_splits.val, flipped, tiny_splits.summary)
    a = execute(tiny_config, tiny_splits, root=tmp_path / "a", device=CPU, progress=False)
    b = execute(tiny_config, other, root=tmp_path / "b", device=CPU, progress=False)
    assert a.threshold == b.threshold
    assert a.val == b.val
    assert a.test != b.test  # the test labels did matter for the test metrics


def test_time_shuffle_control_is_recorded(tmp_path, tiny_splits, tiny_config):
    none = dataclasses.replace(tiny_config, encoding="none")
    r = execute(none, tiny_splits, root=tmp_path, device=CPU, progress=False)
    # with no positional encoding and mean pooling the classifier ignores order: shuffling changes nothing
    for m in ("f1", "auprc"):
        assert r.shuffled_test[m] == pytest.approx(r.test[m], abs=1e-9)
    off = execute(
        dataclasses.replace(none, seed=1),
        tiny_splits,
        root=tmp_path,
        device=CPU,
        progress=False,
        shuffle_control=False,
    )
    assert off.shuffled_test is None and "shuffled_test" not in off.to_json()


@pytest.mark.parametrize(
    "spec, slug", [("msl", "msl"), ("../shared/data/x y.csv", "shared_data_x_y.csv"), ("///", "dataset")]
)
def test_dataset_slug(spec, slug):
    assert runs.dataset_slug(spec) == slug


#: ``config.json``'s ``config`` of ``tiny_config``'s run as the code before the identity was versioned
#: (and before ``RunConfig`` inherited its fields from the axes) wrote it.
UNVERSIONED_IDENTITY = {
    "anomaly_percent": 100.0, "batch_size": 32, "d_model": 16, "dataset": "synthetic",
    "dataset_options": {"length": 1024, "n_series": 2}, "dropout": 0.1, "encoding": "sinusoidal", "epochs": 3,
    "lr": 0.003, "model": "transformer", "monitor": "auprc", "n_heads": 2, "n_layers": 1, "n_windows": 8,
    "patience": 5, "protocol": "blocked", "scale": "native", "seed": 0, "split_seed": 0, "stride": 8,
    "subset": "", "weight_decay": 0.01, "window": 16, "window_length": 16,
}  # fmt: skip


def test_a_run_folder_of_the_unversioned_format_is_found_finished(
    tmp_path, tiny_splits, tiny_config, monkeypatch
):
    """A folder whose ``config.json`` holds the identity as written before versioning (no
    ``identity_version``: format 1) is read back, not refused or retrained."""
    first = execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    d = run_dir(tmp_path, tiny_config)
    resolved = json.loads((d / CONFIG).read_text())
    resolved["config"] = UNVERSIONED_IDENTITY
    (d / CONFIG).write_text(json.dumps(resolved))

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(runs, "fit_loop", no_training)
    again = execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    assert again.skipped is True and _result(again) == _result(first)


def test_a_stored_identity_of_an_unknown_version_is_refused_by_name(tmp_path, tiny_splits, tiny_config):
    execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)
    d = run_dir(tmp_path, tiny_config)
    resolved = json.loads((d / CONFIG).read_text())
    resolved["config"]["identity_version"] = 99
    (d / CONFIG).write_text(json.dumps(resolved))
    with pytest.raises(ValueError, match="identity_version 99 .*newer posenc_bench"):
        execute(tiny_config, tiny_splits, root=tmp_path, device=CPU, progress=False)


def test_claim_each_leaves_held_runs_for_last_and_then_waits_for_them():
    """Runs another process holds (``None`` without waiting) come last, taken with ``wait=True``; every
    run is attempted without waiting once and none is yielded twice."""
    calls = []

    def attempt(item, wait):
        calls.append((item, wait))
        return None if item == "b" and not wait else item.upper()

    assert list(runs.claim_each(["a", "b", "c"], attempt)) == [(0, "A"), (2, "C"), (1, "B")]
    assert calls == [("a", False), ("b", False), ("c", False), ("b", True)]
    with pytest.raises(RuntimeError, match="item 0 of the grid was waited for but not claimed"):
        list(runs.claim_each(["x"], lambda item, wait: None))
