"""One run on disk: resolved config, per-epoch log, atomic checkpoint, final metrics; resume and skip.

Layout (DESIGN "Conventions"), one directory per ``(dataset, encoding, scale, split seed, seed)``::

    ROOT/runs/<dataset>/[<subset>/]<encoding>-<scale>/split<k>-seed<s>/
        config.json      the resolved configuration (RunConfig + encoding options + environment)
        log.csv          one row per completed epoch (losses, validation AUPRC, windows/s)
        checkpoint.pt    model + optimiser + training progress, rewritten after every epoch
        metrics.json     final metrics; its presence marks the run finished

Every file is written to ``NAME.tmp`` and moved into place with ``os.replace`` (atomic on
POSIX), so an interruption at any moment leaves either the old or the new file. A run with
``metrics.json`` is skipped (its stored results are returned); a run with only a checkpoint
resumes from it and, training being a function of ``(seed, epoch)`` and the checkpointed state
(:mod:`posenc.experiment.train`), ends exactly where an uninterrupted run would have.
Under data parallelism only rank 0 writes.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from posenc.experiment.config import RunConfig
from posenc.experiment.controls import shuffle_time
from posenc.experiment.distributed import World
from posenc.experiment.files import write_atomic, write_text_atomic
from posenc.experiment.metrics import best_f1_threshold, binary_metrics
from posenc.experiment.scale import build_classifier
from posenc.experiment.train import EpochHook, fit, predict_scores

CONFIG, LOG, CHECKPOINT, METRICS = "config.json", "log.csv", "checkpoint.pt", "metrics.json"


def dataset_slug(spec: str) -> str:
    """``spec`` (a dataset name or path) as one safe directory name: ``"../data/x.csv"`` → ``"data_x.csv"``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_.") or "dataset"


def run_dir(root: Path, config: RunConfig) -> Path:
    """The directory of ``config``'s run under ``root`` (see the module docstring)."""
    data = dataset_slug(config.dataset) + ("" if config.protocol == "blocked" else f"-{config.protocol}")
    return (Path(root) / "runs" / data / config.subset / f"{config.encoding}-{config.scale}"
            / f"split{config.split_seed}-seed{config.seed}")


def _log_csv(history: list[dict[str, float]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    return buf.getvalue()


def _check_same_config(directory: Path, config: RunConfig) -> None:
    stored = json.loads((directory / CONFIG).read_text(encoding="utf-8"))["config"]
    if stored != config.to_dict():
        differing = sorted(k for k in config.to_dict() if stored.get(k) != config.to_dict()[k])
        raise ValueError(
            f"{directory} holds a run with different settings ({', '.join(differing)}); "
            f"use another --out directory or delete that run"
        )


def execute(
    config: RunConfig,
    splits: Any,
    *,
    root: Path,
    device: torch.device,
    world: World = World(),
    shuffle_control: bool = True,
    progress: bool = True,
    on_epoch: EpochHook | None = None,
) -> dict[str, Any]:
    """Train and evaluate ``config``'s run on ``splits`` (a :class:`posenc.data.Splits`) unless it is finished.

    Returns the run's metrics record (what ``metrics.json`` holds), with ``"skipped": True``
    added when it was read from a finished run instead of trained. ``on_epoch`` is called
    after each epoch's checkpoint is on disk.
    """
    directory = run_dir(root, config)
    if (directory / METRICS).is_file():
        _check_same_config(directory, config)
        return {**json.loads((directory / METRICS).read_text(encoding="utf-8")), "skipped": True}
    model, options = build_classifier(config, splits.train.X.shape[2], splits.train.X)
    model.to(device)
    checkpoint = None
    if (directory / CHECKPOINT).is_file():
        _check_same_config(directory, config)
        checkpoint = torch.load(directory / CHECKPOINT, map_location=device, weights_only=True)
    elif world.is_main:
        directory.mkdir(parents=True, exist_ok=True)
        resolved = {
            "config": config.to_dict(),
            "encoding_options": options,
            "n_features": int(splits.train.X.shape[2]),
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "device": str(device),
            "world_size": world.size,
            "torch": torch.__version__,
        }
        write_text_atomic(directory / CONFIG, json.dumps(resolved, indent=2, sort_keys=True))

    def save(ckpt: dict[str, Any], row: dict[str, float]) -> None:
        if world.is_main:
            write_atomic(directory / CHECKPOINT, lambda tmp: torch.save(ckpt, tmp))
            write_text_atomic(directory / LOG, _log_csv(ckpt["fit"]["history"]))
        if on_epoch is not None:
            on_epoch(ckpt, row)

    state = fit(
        model, splits.train, splits.val, config, device=device, world=world,
        checkpoint=checkpoint, on_epoch=save, progress=progress,
    )
    threshold = best_f1_threshold(splits.val.y, predict_scores(model, splits.val.X, device=device))
    test = splits.test
    record: dict[str, Any] = {
        "dataset": config.dataset, "subset": config.subset, "encoding": config.encoding, "scale": config.scale,
        "split_seed": config.split_seed, "seed": config.seed,
        "test": binary_metrics(test.y, predict_scores(model, test.X, device=device), threshold=threshold),
        "val": binary_metrics(splits.val.y, predict_scores(model, splits.val.X, device=device), threshold=threshold),
        "threshold": threshold,
        "best_epoch": state.best_epoch,
        "epochs_run": state.epoch,
        "stopped_early": state.stopped,
        "train_seconds": float(sum(r["train_seconds"] for r in state.history)),
        "windows_per_s": float(np.mean([r["windows_per_s"] for r in state.history])),
        "test_windows": int(splits.summary["test"]["windows"]),
        "test_positive_windows": int(splits.summary["test"]["positives"]),
        "test_events": int(splits.summary["test"]["events"]),
        "encoding_options": options,
    }
    if shuffle_control:
        shuffled = shuffle_time(test.X, seed=config.seed)
        shuffled_scores = predict_scores(model, shuffled, device=device)
        record["shuffled_test"] = binary_metrics(test.y, shuffled_scores, threshold=threshold)
    if world.is_main:
        write_text_atomic(directory / METRICS, json.dumps(record, indent=2, sort_keys=True))
    world.barrier()
    return {**record, "skipped": False}
