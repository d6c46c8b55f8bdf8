"""One run on disk: resolved config, per-epoch log, atomic checkpoint, final metrics; resume and skip.

Layout (DESIGN "Conventions"), one directory per ``(dataset, encoding and its options, scale, split seed, seed)``::

    ROOT/runs/<dataset>/[<subset>/]<encoding>[_<option>_<value>…]-<scale>/split<k>-seed<s>/
        config.json      the resolved configuration (RunConfig + encoding options + environment)
        log.csv          one row per completed epoch (losses, validation AUPRC, windows/s)
        checkpoint.pt    model + optimiser + training progress, rewritten after every epoch
        metrics.json     final metrics; its presence marks the run finished
        claim.lock       locked by the process working on the run (:mod:`posenc_bench.experiment.claims`)

Every file is written to ``NAME.tmp-<pid>`` and moved into place with ``os.replace`` (atomic on
POSIX), so an interruption at any moment leaves either the old or the new file. A run with
``metrics.json`` is skipped (its stored results are returned); a run with only a checkpoint
resumes from it and, training being a function of ``(seed, epoch)`` and the checkpointed state
(:mod:`posenc_bench.experiment.train`), ends exactly where an uninterrupted run would have.
Under data parallelism only rank 0 writes (and moves files aside). A process reads or writes a
run only while it holds the run's claim, so concurrent ``posenc bench`` processes on one output
directory never train one run twice: one trains it, the others skip it or wait for it
(:func:`claim_each`, the grid loop of every task).

Every task's runs go through :func:`execute`, which keeps the rules below once; a :class:`RunKind` says
what differs: the folder, the identity, the outputs of a finished run and how it trains. Classify and
detect are epoch-trained (:class:`EpochRuns` of a :class:`RunTask`); ``--task lengthgen``
(:class:`posenc_bench.experiment.lengthgen.LengthgenRuns`) has its own folders
(``ROOT/runs/lengthgen/<task>-L<L>/<encoding>…/seed<s>/``), a step loop, its test settings as the inputs
its identity digests, ``encoding.pt`` beside ``metrics.json`` and no checkpoint once finished.

**What a re-run trusts.** Nothing on disk is trusted unread:

* a ``config.json``, ``metrics.json`` or ``checkpoint.pt`` that cannot be read (truncated,
  garbled, empty, wrong structure; a checkpoint also carries a SHA-256 digest of its content,
  so garbled tensor bytes are caught too) is named in a message, moved aside as
  ``NAME.corrupt-<UTC time>``, and the run resumes from what is left or retrains. A missing or
  unreadable ``config.json`` moves the whole run aside: its other files cannot be checked;
* a folder whose ``config.json`` records other settings holds another run: it is refused by name
  (``ValueError``), never overwritten;
* ``config.json`` records ``data_fingerprint``, a SHA-256 of the run's train/validation/test
  windows and labels (:func:`data_fingerprint`), so it covers the data files' content, the
  loader options and the split. When the data differ from those a run was trained on — the
  files at the same path changed — its files are moved aside as ``NAME.stale-<UTC time>`` and
  it retrains, with a message saying why (the run's *settings* differing is refused instead:
  that is another run, not newer data);
* a finished run's ``metrics.json`` is only returned when its ``config.json`` matches both.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import numpy as np
import torch

from posenc.errors import UsageError
from posenc_bench.data.containers import Splits
from posenc_bench.experiment.claims import claim
from posenc_bench.experiment.config import IDENTITY_VERSION, RunConfig, identity_version
from posenc_bench.experiment.controls import shuffle_time
from posenc_bench.experiment.distributed import World
from posenc_bench.experiment.environment import environment
from posenc_bench.experiment.files import move_aside, write_text_atomic
from posenc_bench.experiment.metrics import best_f1_threshold, binary_metrics, family_auprc
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.scale import build_classifier
from posenc_bench.experiment.series import window_series
from posenc_bench.experiment.torch_files import UnusableFile, load_state, save_state
from posenc_bench.experiment.train import (
    ClassifySteps,
    EpochHook,
    EpochSteps,
    FitState,
    fit_loop,
    predict_scores,
)

Data = TypeVar("Data", contravariant=True)
"""A task's data: :class:`posenc_bench.data.Splits` (classify), :class:`posenc_bench.data.nominal.DetectionData`
(detect), :class:`posenc_bench.experiment.lengthgen.LengthgenPlan` (lengthgen: its test settings)."""
Config = TypeVar("Config", contravariant=True)
"""A run's settings: :class:`~posenc_bench.experiment.config.RunConfig`, or lengthgen's ``LengthgenConfig``."""
Record = TypeVar("Record")
"""What a finished run's ``metrics.json`` holds: :class:`~posenc_bench.experiment.records.RunRecord` or
:class:`~posenc_bench.experiment.records.LengthgenRecord`."""
Item = TypeVar("Item")
Result = TypeVar("Result")

CONFIG, LOG, CHECKPOINT, METRICS = "config.json", "log.csv", "checkpoint.pt", "metrics.json"


def dataset_slug(spec: str) -> str:
    """``spec`` (a dataset name or path) as one safe directory name: ``"../data/x.csv"`` → ``"data_x.csv"``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_.") or "dataset"


def run_dir(root: Path, config: RunConfig) -> Path:
    """The directory of ``config``'s run under ``root`` (see the module docstring; detect runs under ``detect-<detector>/``)."""
    data = dataset_slug(config.dataset) + ("" if config.axes.protocol.blocked else f"-{config.protocol}")
    task = f"detect-{config.detector}" if config.axes.task.detect else ""
    return (
        Path(root)
        / "runs"
        / data
        / task
        / config.subset
        / f"{dataset_slug(config.encoding_label)}-{config.scale}"
        / f"split{config.split_seed}-seed{config.seed}"
    )


def log_csv(history: list[dict[str, float]]) -> str:
    """A run's ``log.csv``: one line per row of ``history``, its columns those of the first row, in order."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(history[0]))
    writer.writeheader()
    writer.writerows(history)
    return buf.getvalue()


_FINGERPRINTS: dict[int, tuple[weakref.ref, str]] = {}  # id(splits) -> (splits, its fingerprint)


def data_fingerprint(splits: Splits) -> str:
    """SHA-256 (hex) of every array of ``splits``' train, validation and test windows (values, labels, origins).

    Two runs with equal fingerprints saw the same numbers in the same splits, whatever path or
    loader options produced them; any change of the data files, loader options or split changes it.
    Computed once per ``splits`` object (every run of a split shares it; about 0.4 s per 60 MiB).
    """
    cached = _FINGERPRINTS.get(id(splits))
    if cached is not None and cached[0]() is splits:
        return cached[1]
    digest = hashlib.sha256()
    for part in ("train", "val", "test"):
        windows = getattr(splits, part)
        for field in dataclasses.fields(windows):
            array = np.ascontiguousarray(getattr(windows, field.name))
            digest.update(f"{part}.{field.name}:{array.dtype.str}:{array.shape};".encode())
            digest.update(array.reshape(-1).view(np.uint8).tobytes())
    key = id(splits)
    _FINGERPRINTS[key] = (weakref.ref(splits, lambda _: _FINGERPRINTS.pop(key, None)), digest.hexdigest())
    return digest.hexdigest()


def _tensor_digest(obj: Any, digest: Any = None) -> str:
    """SHA-256 of a checkpoint's content: every tensor's dtype, shape and bytes, every other leaf's ``repr``."""
    digest = hashlib.sha256() if digest is None else digest
    if isinstance(obj, dict):
        for key in sorted(obj, key=repr):
            digest.update(f"{key!r}:".encode())
            _tensor_digest(obj[key], digest)
    elif isinstance(obj, (list, tuple)):
        digest.update(f"{type(obj).__name__}[{len(obj)}]".encode())
        for item in obj:
            _tensor_digest(item, digest)
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        digest.update(f"tensor:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())
    else:
        digest.update(f"{obj!r};".encode())
    return digest.hexdigest()


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically with the SHA-256 digest of its content (:func:`intact` checks it)."""
    save_state(path, {**state, "sha256": _tensor_digest(state)})


def intact(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint :func:`save_checkpoint` wrote, less its digest; :class:`~posenc_bench.experiment.torch_files.UnusableFile`
    when its content no longer matches the digest (garbled tensor bytes a torch file still loads)."""
    body = {k: v for k, v in checkpoint.items() if k != "sha256"}
    if _tensor_digest(body) != checkpoint["sha256"]:
        raise UnusableFile("does not match its SHA-256 digest (garbled content)")
    return body


def read_json(path: Path, required: dict[str, type]) -> dict[str, Any]:
    """``path``'s JSON object, which must hold ``required`` keys of the given types; else :class:`~posenc_bench.experiment.torch_files.UnusableFile`."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UnusableFile(f"is not readable JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise UnusableFile(f"holds a JSON {type(data).__name__}, not an object")
    wrong = [k for k, kind in required.items() if not isinstance(data.get(k), kind)]
    if wrong:
        raise UnusableFile(f"lacks {', '.join(wrong)} (or has the wrong type)")
    return data


def _read_checkpoint(path: Path, model: torch.nn.Module, device: torch.device) -> dict[str, Any]:
    """The checkpoint at ``path`` if it is complete, intact and fits ``model``; else :class:`~posenc_bench.experiment.torch_files.UnusableFile`."""
    ckpt = load_state(path, device=device)
    if not isinstance(ckpt, dict) or not {"model", "optimizer", "fit", "sha256"} <= set(ckpt):
        raise UnusableFile("is not a posenc checkpoint (expected keys model, optimizer, fit, sha256)")
    body = intact(ckpt)
    expected = {k: (v.dtype, v.shape) for k, v in model.state_dict().items()}
    stored = {k: (getattr(v, "dtype", None), getattr(v, "shape", None)) for k, v in ckpt["model"].items()}
    if stored != expected:
        raise UnusableFile("holds weights of another model (parameter names or shapes differ)")
    if not isinstance(ckpt["fit"], dict) or set(ckpt["fit"]) != {
        f.name for f in dataclasses.fields(FitState)
    }:
        raise UnusableFile("lacks the training progress (fit state)")
    return body


def _read_record(path: Path) -> RunRecord:
    """The finished run's record in ``path`` (``metrics.json``); :class:`~posenc_bench.experiment.torch_files.UnusableFile` if it is not one."""
    try:
        return RunRecord.from_json(read_json(path, {"test": dict, "val": dict}))
    except (ValueError, TypeError) as exc:
        raise UnusableFile(f"is not a run record ({exc})") from None


def read_config(directory: Path) -> dict[str, Any]:
    """A run's resolved ``config.json``; :class:`~posenc.UsageError` naming the file when it is unreadable."""
    try:
        return read_json(Path(directory) / CONFIG, {"config": dict})
    except UnusableFile as exc:
        raise UsageError(f"{Path(directory) / CONFIG} {exc}") from None


def read_checkpoint(
    path: Path, model: torch.nn.Module, *, device: torch.device | str = "cpu"
) -> dict[str, Any]:
    """A run's ``checkpoint.pt``, checked intact and fitting ``model``; :class:`~posenc.UsageError` naming it if not."""
    try:
        return _read_checkpoint(Path(path), model, torch.device(device))
    except UnusableFile as exc:
        raise UsageError(f"{path} {exc}") from None


def discard(
    directory: Path, names: tuple[str, ...], kind: str, why: str, *, tidy: bool, log: Callable[[str], None]
) -> None:
    """Move ``names`` aside (rank 0: ``tidy``) and say why through ``log``, ending "the run retrains"."""
    if tidy:
        moved = move_aside(directory, names, kind)
        log(f"{why}; moved aside: {', '.join(moved) or 'nothing'}; the run retrains")


@dataclass(frozen=True)
class Identity:
    """What a run folder's ``config.json`` must say for the folder to hold this run.

    Attributes:
        settings: the run's settings; a folder recording other settings holds another run, which is
            refused by name (``ValueError``), never overwritten.
        inputs: a digest of what the run is trained and tested on (classify: :func:`data_fingerprint`;
            lengthgen: its test settings); a folder recording another one is stale: its files are moved
            aside as ``NAME.stale-<UTC time>`` and the run retrains.
        stale, inputs_name, stale_reason: that message's words (what differs, what ``inputs`` digests, why).
    """

    settings: dict[str, Any]
    inputs: str | None
    stale: str = "the data differ from those this run was trained on"
    inputs_name: str = "data fingerprint"
    stale_reason: str = "the dataset files, loader options or split changed"


@runtime_checkable
class RunKind(Protocol[Config, Data, Record]):
    """One kind of run as the store keeps it: its folder, its identity, what a finished one holds, how it trains.

    :func:`execute` claims the run, checks the folder against :meth:`identity` (refusing another run's
    settings, moving stale or unreadable files aside), returns the record of a finished run, and else
    calls :meth:`train` and writes the record it returns as ``metrics.json``. Epoch-trained tasks
    (classify, detect) are a :class:`RunTask` (:class:`EpochRuns`); ``--task lengthgen`` is
    :class:`posenc_bench.experiment.lengthgen.LengthgenRuns`.

    Attributes:
        outputs: the files of a finished run, ``metrics.json`` first.
        keeps_checkpoint: whether ``checkpoint.pt`` stays once the run is finished.
    """

    outputs: tuple[str, ...]
    keeps_checkpoint: bool

    def directory(self, root: Path, config: Config) -> Path:
        """The run's folder under ``root``."""
        ...

    def identity(self, config: Config, data: Data, stored: Mapping[str, Any] | None) -> Identity:
        """The run's identity, in the format ``stored`` (a ``config.json`` as read) records; ``None``: the newest.
        ``ValueError`` naming the format when this code does not know it."""
        ...

    def recorded(self, stored: Mapping[str, Any]) -> Identity:
        """The identity a ``config.json`` records; :class:`~posenc_bench.experiment.torch_files.UnusableFile`
        if it holds none."""
        ...

    def read_record(self, directory: Path, config: Config) -> Record:
        """A finished run's record; :class:`UnusableOutput` naming the output that is not what it claims."""
        ...

    def train(
        self, config: Config, data: Data, directory: Path, *, resume: bool, session: Session
    ) -> Record | None:
        """Train and test the claimed run (writing its ``config.json`` when it starts afresh, its checkpoints
        and its outputs but ``metrics.json``), resuming from ``checkpoint.pt`` when ``resume``; its record,
        or ``None`` when it stopped before the end (tests)."""
        ...

    def metrics_text(self, record: Record) -> str:
        """What ``metrics.json`` holds for ``record``."""
        ...


class UnusableOutput(UnusableFile):
    """An output of a finished run (:attr:`RunKind.outputs`) that is not what it claims; ``name`` is its file."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(reason)
        self.name = name


@dataclass(frozen=True)
class Session:
    """How :func:`execute` runs: the device, the data-parallel world, progress, the hooks and the log."""

    device: torch.device
    world: World = World()
    shuffle_control: bool = True
    progress: bool = True
    on_epoch: EpochHook | None = None
    say: Callable[[str], None] = print


def _stored_run(
    directory: Path, kind: RunKind[Config, Data, Record], config: Config, data: Data, *, tidy: bool,
    log: Callable[[str], None],
) -> tuple[Record, bool] | tuple[None, bool]:  # fmt: skip
    """``(finished record or None, whether a checkpoint may be resumed)`` from ``directory`` (module docstring).

    Unusable files are moved aside when ``tidy`` (rank 0) and reported through ``log``; run
    settings different from ``config`` raise ``ValueError``.
    """
    files = (CONFIG, LOG, CHECKPOINT, *kind.outputs)
    if not any((directory / name).is_file() for name in (CONFIG, CHECKPOINT, *kind.outputs)):
        return None, False
    try:
        if not (directory / CONFIG).is_file():
            raise UnusableFile("is missing")
        stored = read_json(directory / CONFIG, {})
        recorded = kind.recorded(stored)
    except UnusableFile as exc:
        discard(
            directory,
            files,
            "corrupt",
            f"{directory / CONFIG} {exc}, so the run's other files cannot be checked",
            tidy=tidy,
            log=log,
        )
        return None, False
    wanted = kind.identity(config, data, stored)
    if recorded.settings != wanted.settings:
        differing = sorted(
            k
            for k in set(wanted.settings) | set(recorded.settings)
            if recorded.settings.get(k) != wanted.settings.get(k)
        )
        raise ValueError(
            f"{directory} holds a run with different settings ({', '.join(differing)}); "
            f"use another --out directory or delete that run"
        )
    if recorded.inputs != wanted.inputs:
        was, now = recorded.inputs, str(wanted.inputs)
        discard(
            directory,
            files,
            "stale",
            f"{directory}: {wanted.stale} ({wanted.inputs_name} "
            f"{was[:12] + '…' if was else 'not recorded'}, now {now[:12]}…: {wanted.stale_reason})",
            tidy=tidy,
            log=log,
        )
        return None, False
    if all((directory / name).is_file() for name in kind.outputs):
        try:
            return kind.read_record(directory, config), False
        except UnusableOutput as exc:
            discard(directory, (exc.name,), "corrupt", f"{directory / exc.name} {exc}", tidy=tidy, log=log)
    return None, (directory / CHECKPOINT).is_file()


class RunTask(Protocol[Data]):
    """What a task gives :func:`execute` for its data (``Data``): fingerprint, model, epoch steps, evaluation."""

    def fingerprint(self, data: Data) -> str: ...

    def n_features(self, data: Data) -> int: ...

    def build(self, config: RunConfig, data: Data) -> tuple[torch.nn.Module, dict[str, Any]]: ...

    def steps(self, config: RunConfig, data: Data, *, device: torch.device, world: World) -> EpochSteps: ...

    def evaluate(
        self,
        model: torch.nn.Module,
        data: Data,
        config: RunConfig,
        *,
        device: torch.device,
        shuffle_control: bool,
    ) -> dict[str, Any]: ...


class ClassifyTask(RunTask[Splits]):
    """Window classification on :class:`posenc_bench.data.Splits` (threshold on validation, metrics on test).

    ``families[split seed]``, when given, names each test window's event family; the test metrics
    then include ``auprc:<family>`` (:func:`posenc_bench.experiment.metrics.family_auprc`).
    ``series_names``, when given, names the dataset's series: the record then holds each test
    series' own scores (``series``; :func:`posenc_bench.experiment.series.window_series`).
    """

    def __init__(
        self, families: dict[int, np.ndarray] | None = None, series_names: list[str] | None = None
    ) -> None:
        self.families = families or {}
        self.series_names = series_names

    def fingerprint(self, data: Splits) -> str:
        return data_fingerprint(data)

    def n_features(self, data: Splits) -> int:
        return int(data.train.X.shape[2])

    def build(self, config: RunConfig, data: Splits) -> tuple[torch.nn.Module, dict[str, Any]]:
        return build_classifier(config, data.train.X.shape[2], data.train.X)

    def steps(self, config: RunConfig, data: Splits, *, device: torch.device, world: World) -> EpochSteps:
        return ClassifySteps(data.train, data.val, config, device=device, world=world)

    def evaluate(
        self,
        model: torch.nn.Module,
        data: Splits,
        config: RunConfig,
        *,
        device: torch.device,
        shuffle_control: bool,
    ) -> dict[str, Any]:
        # protocol "dfstrans" thresholds the sigmoid at 0.5, as Labaien et al. (2023) do; others pick the best val F1
        threshold = (
            0.5
            if config.axes.protocol.dfstrans
            else best_f1_threshold(data.val.y, predict_scores(model, data.val.X, device=device))
        )
        test = data.test
        families = self.families.get(config.split_seed)

        def metrics(scores: np.ndarray) -> dict[str, float]:
            by_family = family_auprc(test.y, scores, families) if families is not None else {}
            return {**binary_metrics(test.y, scores, threshold=threshold), **by_family}

        test_scores = predict_scores(model, test.X, device=device)
        record: dict[str, Any] = {
            "test": metrics(test_scores),
            "val": binary_metrics(
                data.val.y, predict_scores(model, data.val.X, device=device), threshold=threshold
            ),
            "threshold": threshold,
            "test_windows": int(data.summary["test"]["windows"]),
            "test_positive_windows": int(data.summary["test"]["positives"]),
            "test_events": int(data.summary["test"]["events"]),
            "test_events_in_train": int(data.summary["test"].get("events_in_train", 0)),
        }
        if self.series_names is not None:
            record["series"] = test_series(test, test_scores, self.series_names, config)
        if shuffle_control:
            shuffled = shuffle_time(test.X, seed=config.seed)
            shuffled_scores = predict_scores(model, shuffled, device=device)
            record["shuffled_test"] = metrics(shuffled_scores)
        return record


def test_series(
    test: Any, scores: np.ndarray, names: list[str], config: RunConfig
) -> dict[str, dict[str, float]]:
    """Per-series AUPRC and VUS-PR of test window scores, buffers up to ``⌈window / stride⌉`` windows."""
    return window_series(
        test.series, test.start, test.y, scores, names, max_buffer=-(-config.window // config.stride)
    )


def claim_each(
    items: Sequence[Item], attempt: Callable[[Item, bool], Result | None]
) -> Iterator[tuple[int, Result]]:
    """Every item of a grid once under its run's claim, so that processes on one ``--out`` share the grid.

    First every item no other process holds: ``attempt(item, False)`` returns ``None`` for one held
    elsewhere, which is left for later; then those, waiting for their holders (``attempt(item, True)``,
    which then reads back what the holder finished, or resumes what a killed holder left). Yields
    ``(index in items, result)`` as results come, so every process ends with the whole grid.
    """
    held = []
    for i, item in enumerate(items):
        result = attempt(item, False)
        if result is None:
            held.append(i)
        else:
            yield i, result
    for i in held:
        result = attempt(items[i], True)
        if result is None:
            raise RuntimeError(f"item {i} of the grid was waited for but not claimed")
        yield i, result


class EpochRuns(RunKind[RunConfig, Data, RunRecord]):
    """The runs of an epoch-trained :class:`RunTask` (classify, detect) as the store keeps them: the folder
    of :func:`run_dir`, ``config.json`` holding the run's :meth:`~posenc_bench.experiment.config.RunConfig.identity`
    and its data fingerprint, :func:`~posenc_bench.experiment.train.fit_loop` with an epoch checkpoint, and
    a :class:`~posenc_bench.experiment.records.RunRecord` as ``metrics.json``."""

    outputs = (METRICS,)
    keeps_checkpoint = True  # the best weights are read back from it (``posenc bench --trained``)

    def __init__(self, task: RunTask[Data]) -> None:
        self.task = task

    def directory(self, root: Path, config: RunConfig) -> Path:
        return run_dir(root, config)

    def identity(self, config: RunConfig, data: Data, stored: Mapping[str, Any] | None) -> Identity:
        version = IDENTITY_VERSION if stored is None else identity_version(stored["config"])
        return Identity(config.identity(version), self.task.fingerprint(data))

    def recorded(self, stored: Mapping[str, Any]) -> Identity:
        if not isinstance(stored.get("config"), dict):
            raise UnusableFile("lacks config (or has the wrong type)")
        return Identity(stored["config"], stored.get("data_fingerprint"))

    def read_record(self, directory: Path, config: RunConfig) -> RunRecord:
        try:
            return _read_record(directory / METRICS)
        except UnusableFile as exc:
            raise UnusableOutput(METRICS, str(exc)) from None

    def metrics_text(self, record: RunRecord) -> str:
        return json.dumps(record.to_json(), indent=2, sort_keys=True)

    def train(
        self, config: RunConfig, data: Data, directory: Path, *, resume: bool, session: Session
    ) -> RunRecord:
        task, device, world = self.task, session.device, session.world
        model, options = task.build(config, data)
        model.to(device)
        checkpoint = None
        if resume:
            checkpoint = resumed(directory, lambda path: _read_checkpoint(path, model, device), session)
        world.barrier()  # rank 0 has moved unusable files aside before any rank reads or writes again
        if checkpoint is None and world.is_main:
            resolved = {
                "config": config.to_dict(),
                "data_fingerprint": task.fingerprint(data),
                "encoding_options": options,
                "n_features": task.n_features(data),
                "n_parameters": sum(p.numel() for p in model.parameters()),
                "device": str(device),
                "world_size": world.size,
                "torch": torch.__version__,
                "environment": environment(),
            }
            write_config(directory, resolved)

        def save(ckpt: dict[str, Any], row: dict[str, float]) -> None:
            if world.is_main:
                save_checkpoint(directory / CHECKPOINT, ckpt)
                write_text_atomic(directory / LOG, log_csv(ckpt["fit"]["history"]))
            if session.on_epoch is not None:
                session.on_epoch(ckpt, row)

        state = fit_loop(
            model,
            config,
            task.steps(config, data, device=device, world=world),
            device=device,
            world=world,
            checkpoint=checkpoint,
            on_epoch=save,
            progress=session.progress,
        )
        evaluated = task.evaluate(model, data, config, device=device, shuffle_control=session.shuffle_control)
        stored: dict[str, Any] = {
            "dataset": config.dataset,
            "subset": config.subset,
            "encoding": config.encoding,
            "scale": config.scale,
            "split_seed": config.split_seed,
            "seed": config.seed,
            **evaluated,
            "best_epoch": state.best_epoch,
            "epochs_run": state.epoch,
            "stopped_early": state.stopped,
            "train_seconds": float(sum(r["train_seconds"] for r in state.history)),
            "windows_per_s": float(np.mean([r["windows_per_s"] for r in state.history])),
            "encoding_options": options,
        }
        return RunRecord.from_json(stored)


def resumed(directory: Path, read: Callable[[Path], Item], session: Session) -> Item | None:
    """The run's ``checkpoint.pt`` as ``read`` makes it, or ``None`` once an unusable one (``read`` raised
    :class:`~posenc_bench.experiment.torch_files.UnusableFile`) is moved aside as corrupt and said (rank 0)."""
    try:
        return read(directory / CHECKPOINT)
    except (UnusableFile, FileNotFoundError) as exc:
        discard(directory, (CHECKPOINT,), "corrupt", f"{directory / CHECKPOINT} {exc}",
                tidy=session.world.is_main, log=session.say)  # fmt: skip
        return None


def write_config(directory: Path, resolved: Mapping[str, Any]) -> None:
    """A run's ``config.json``: ``resolved`` as sorted, indented JSON, written atomically (``directory`` made)."""
    directory.mkdir(parents=True, exist_ok=True)
    write_text_atomic(directory / CONFIG, json.dumps(resolved, indent=2, sort_keys=True) + "\n")


def execute(
    config: Config,
    data: Data,
    *,
    root: Path,
    device: torch.device,
    world: World = World(),
    shuffle_control: bool = True,
    progress: bool = True,
    on_epoch: EpochHook | None = None,
    log: Callable[[str], None] = print,
    task: RunTask[Data] | RunKind[Config, Data, Record] | None = None,
    wait: bool = True,
) -> Record | None:
    """Train and evaluate ``config``'s run on ``data`` unless it is finished; every task's runs go through here.

    ``task`` says what kind of run it is: a :class:`RunKind` (``--task lengthgen``'s
    :class:`~posenc_bench.experiment.lengthgen.LengthgenRuns`), or an epoch-trained :class:`RunTask`
    (:class:`EpochRuns`; default :class:`ClassifyTask`, ``data`` a :class:`posenc_bench.data.Splits`; the
    detect task's ``data`` is a :class:`posenc_bench.data.nominal.DetectionData`). Returns the run's record
    (what ``metrics.json`` holds), ``skipped`` when it was read from a finished run instead of trained, or
    ``None`` when the kind's training stopped before the end. ``on_epoch`` is called after each epoch's
    checkpoint is on disk; ``log`` receives (rank 0) what was moved aside and why.

    The run is claimed first (:func:`~posenc_bench.experiment.claims.claim`): when another process
    holds it, ``wait=False`` returns ``None`` at once (single process only) and ``wait=True`` waits.
    """
    kind = _kind(task)
    directory = kind.directory(root, config)
    say = log if world.is_main else (lambda _: None)
    held = (
        claim(directory, wait=wait or world.size > 1, log=say)
        if world.is_main
        else contextlib.nullcontext(True)
    )
    session = Session(device, world, shuffle_control, progress, on_epoch, say)
    with held as mine:
        world.barrier()  # the other ranks follow rank 0, which holds the claim
        if not mine:
            return None
        return _execute(kind, config, data, directory, session)


def _kind(task: Any) -> RunKind[Any, Any, Any]:
    """``task`` as a :class:`RunKind`: itself, or the :class:`EpochRuns` of a :class:`RunTask` (default classify)."""
    if task is None:
        return EpochRuns(ClassifyTask())
    return task if isinstance(task, RunKind) else EpochRuns(task)


def _execute(
    kind: RunKind[Config, Data, Record], config: Config, data: Data, directory: Path, session: Session
) -> Record | None:
    """:func:`execute` once the run is claimed."""
    world = session.world
    finished, resumable = _stored_run(directory, kind, config, data, tidy=world.is_main, log=session.say)
    if finished is not None:
        return cast("Record", dataclasses.replace(cast(Any, finished), skipped=True))
    trained = kind.train(config, data, directory, resume=resumable, session=session)
    if trained is None:
        return None
    if world.is_main:
        write_text_atomic(directory / METRICS, kind.metrics_text(trained))
        if not kind.keeps_checkpoint:
            (directory / CHECKPOINT).unlink(missing_ok=True)  # the outputs are the record
    world.barrier()
    return cast("Record", dataclasses.replace(cast(Any, trained), skipped=False))
