"""Recovery from what an interruption, a disk or a user can leave in a run folder.

Corrupt files (truncated, garbled, empty) are moved aside and the run retrains — never a crash
loop; data that changed under the same path retrain the run — never stale results; atomic
writes reach the disk before their name does.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc_bench.data import Splits, WindowSet
from posenc_bench.experiment import files
from posenc_bench.experiment.runs import CHECKPOINT, CONFIG, LOG, METRICS, data_fingerprint, execute, run_dir

CPU = torch.device("cpu")
RESULT = ("test", "val", "threshold", "best_epoch", "epochs_run")


def _result(record):
    return {k: record.to_json()[k] for k in RESULT}


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # garble: overwrite 64 bytes in the middle (tensor data for a checkpoint) with seeded noise
        noise = np.random.default_rng(0).integers(0, 256, 64, dtype=np.uint8).tobytes()
        mid = len(data) // 2
        path.write_bytes(data[:mid] + noise + data[mid + 64 :])


def _run(tiny_config, splits, root, **kwargs):
    messages: list[str] = []
    epochs: list[int] = []
    record = execute(
        tiny_config,
        splits,
        root=root,
        device=CPU,
        progress=False,
        log=messages.append,
        on_epoch=lambda ckpt, row: epochs.append(row["epoch"]),
        **kwargs,
    )
    return record, messages, epochs


@pytest.fixture
def finished(tmp_path, tiny_splits, tiny_config):
    """A finished run under ``tmp_path/"run"`` and its record."""
    record, _, _ = _run(tiny_config, tiny_splits, tmp_path / "run")
    return run_dir(tmp_path / "run", tiny_config), record


def _aside(directory: Path, name: str, kind: str = "corrupt") -> list[Path]:
    return sorted(directory.glob(f"{name}.{kind}-*"))


@pytest.mark.parametrize("how", ["truncate", "garble", "empty"])
def test_corrupt_checkpoint_is_moved_aside_and_the_run_retrains(finished, tiny_splits, tiny_config, how):
    directory, full = finished
    (directory / METRICS).unlink()  # an unfinished run whose checkpoint got damaged
    _damage(directory / CHECKPOINT, how)
    record, messages, epochs = _run(tiny_config, tiny_splits, directory.parents[3])
    assert epochs == [1, 2, 3]  # retrained from scratch, not resumed from garbage
    assert _result(record) == _result(full) and record.skipped is False
    assert len(_aside(directory, CHECKPOINT)) == 1
    assert any(str(directory / CHECKPOINT) in m and "moved aside" in m for m in messages), messages
    assert not any("weights_only" in m for m in messages)
    again, _, epochs = _run(tiny_config, tiny_splits, directory.parents[3])
    assert again.skipped is True and epochs == []


@pytest.mark.parametrize("how", ["truncate", "garble", "empty"])
def test_corrupt_metrics_resumes_from_the_final_checkpoint(finished, tiny_splits, tiny_config, how):
    directory, full = finished
    _damage(directory / METRICS, how)
    record, messages, epochs = _run(tiny_config, tiny_splits, directory.parents[3])
    assert epochs == []  # the checkpoint holds the finished training: only evaluation is redone
    assert _result(record) == _result(full) and record.skipped is False
    assert len(_aside(directory, METRICS)) == 1 and json.loads((directory / METRICS).read_text())["test"]
    assert any(str(directory / METRICS) in m for m in messages), messages


@pytest.mark.parametrize("how", ["truncate", "garble", "empty", "delete"])
def test_corrupt_or_missing_config_moves_the_run_aside(finished, tiny_splits, tiny_config, how):
    directory, full = finished
    if how == "delete":
        (directory / CONFIG).unlink()
    else:
        _damage(directory / CONFIG, how)
    record, messages, epochs = _run(tiny_config, tiny_splits, directory.parents[3])
    assert epochs == [1, 2, 3] and _result(record) == _result(full)
    for name in (CHECKPOINT, METRICS, LOG):  # unverifiable without their config: set aside, not trusted
        assert len(_aside(directory, name)) == 1, name
    assert len(_aside(directory, CONFIG)) == (0 if how == "delete" else 1)
    assert json.loads((directory / CONFIG).read_text())["config"] == tiny_config.to_dict()
    assert any(str(directory / CONFIG) in m for m in messages), messages


def test_checkpoint_of_another_model_is_not_loaded(finished, tiny_splits, tiny_config):
    directory, full = finished
    (directory / METRICS).unlink()
    ckpt = torch.load(directory / CHECKPOINT, weights_only=True)
    ckpt["model"] = {"weight": torch.zeros(2)}
    torch.save(ckpt, directory / CHECKPOINT)
    record, messages, epochs = _run(tiny_config, tiny_splits, directory.parents[3])
    assert epochs == [1, 2, 3] and _result(record) == _result(full)
    assert any("digest" in m or "another model" in m for m in messages), messages


def test_changed_data_retrains_with_a_message(finished, tiny_splits, tiny_config):
    directory, _ = finished
    t = tiny_splits.test
    changed = Splits(
        tiny_splits.train,
        tiny_splits.val,
        WindowSet(t.X + np.float32(1.0), t.y, t.series, t.start, t.event),
        tiny_splits.summary,
    )
    record, messages, epochs = _run(tiny_config, changed, directory.parents[3])
    assert record.skipped is False and epochs == [1, 2, 3]
    assert any("data differ" in m for m in messages), messages
    assert len(_aside(directory, METRICS, "stale")) == 1
    stored = json.loads((directory / CONFIG).read_text())
    assert stored["data_fingerprint"] == data_fingerprint(changed) != data_fingerprint(tiny_splits)
    again, _, _ = _run(tiny_config, changed, directory.parents[3])
    assert again.skipped is True


def test_run_without_recorded_fingerprint_retrains(finished, tiny_splits, tiny_config):
    directory, _ = finished
    stored = json.loads((directory / CONFIG).read_text())
    del stored["data_fingerprint"]  # written before fingerprints existed: its data cannot be vouched for
    (directory / CONFIG).write_text(json.dumps(stored))
    record, messages, _ = _run(tiny_config, tiny_splits, directory.parents[3])
    assert record.skipped is False and any("not recorded" in m for m in messages)


def test_fingerprint_sees_every_array_of_every_split(tiny_splits):
    base = data_fingerprint(tiny_splits)
    assert base == data_fingerprint(tiny_splits) and len(base) == 64
    for part in ("train", "val", "test"):
        w = getattr(tiny_splits, part)
        for field in ("X", "y", "series", "start", "event"):
            arrays = {f: getattr(w, f).copy() for f in ("X", "y", "series", "start", "event")}
            arrays[field].reshape(-1)[-1] += 1
            parts = {p: getattr(tiny_splits, p) for p in ("train", "val", "test")}
            parts[part] = WindowSet(**arrays)
            assert data_fingerprint(Splits(**parts, summary=tiny_splits.summary)) != base, (part, field)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name fsync'ed descriptors")
def test_atomic_write_fsyncs_the_file_before_the_rename_and_the_folder_after(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(
        os, "fsync", lambda fd: (events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}"))), real_fsync(fd))
    )
    monkeypatch.setattr(
        os, "replace", lambda a, b: (events.append(("replace", str(a), str(b))), real_replace(a, b))
    )
    target = tmp_path / "x.json"
    files.write_text_atomic(target, "{}")
    tmp = f"{target}.tmp-{os.getpid()}"  # the writer's own temporary name: concurrent writers never share one
    assert events == [("fsync", tmp), ("replace", tmp, str(target)), ("fsync", str(tmp_path))]
    assert target.read_text() == "{}" and not Path(tmp).exists()


@pytest.mark.parametrize("name", [CHECKPOINT, CONFIG])
def test_trained_run_readers_name_a_corrupt_file(finished, name):
    """``posenc analyze --checkpoint`` / ``report --runs`` read run files too: the same check, a named error."""
    from posenc import UsageError
    from posenc_bench.experiment.trained import load_model, read_run

    directory, _ = finished
    _damage(directory / name, "garble")
    with pytest.raises(UsageError, match=str(directory / name)):
        load_model(read_run(directory), trained=True)
