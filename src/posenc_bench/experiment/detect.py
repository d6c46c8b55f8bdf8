"""The detect task: train a forecaster or reconstructor on nominal data, score test steps by error.

Protocol (Hundman et al. 2018, KDD, with a Transformer for the LSTM):

1. **Train** on each channel's nominal training array only, all channels in one model with the
   channel id as an input (:class:`posenc_bench.detectors.SequenceDetector`); no label is used. An
   epoch visits every channel's windows at ``stride`` from a random offset; AdamW on the mean
   squared error; early stopping on the held-out nominal tail's loss (``patience``).
2. **Score** every test step by its absolute error, averaged over the target features:
   ``forecast`` predicts ``horizon`` steps from the ``window`` steps before them (windows at
   stride ``horizon``, so each step is predicted once; the first ``window`` steps of a test array
   have no full context and are not scored); ``reconstruct`` tiles the array with windows and
   reconstructs each step from a pass in which every 4th step — its own among them — is masked.
3. **Smooth** the errors by the telemanom EWMA (:func:`posenc_bench.experiment.events.ewma`, span
   ``smoothing``), and **calibrate per channel on the held-out nominal tail** (never on test
   labels): the score is the smoothed error divided by the largest smoothed error on the held-out
   tail; a step is flagged when its score exceeds 1 (above anything seen in held-out nominal data).
4. **Metrics** (:mod:`posenc_bench.experiment.events`): event-wise precision/recall/F1, window AUPRC,
   point-adjusted F1 (inflated; an extra). The time-shuffle control re-scores test steps with the
   steps of every input window permuted.
"""

from __future__ import annotations

import hashlib
import math
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from posenc_bench.data.nominal import Channel, DetectionData
from posenc_bench.data.synthetic import FAMILIES
from posenc_bench.detectors import SequenceDetector
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.distributed import World
from posenc_bench.experiment.events import ScoredChannel, detection_metrics, ewma
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.scale import run_encoding_options
from posenc_bench.experiment.series import SeriesScores, detect_series
from posenc_bench.experiment.train import epoch_seed

MASK_EVERY = 4  # reconstruct: a pass masks every 4th step; training masks each step with probability 1/4


def build_detector(config: RunConfig, data: DetectionData) -> tuple[SequenceDetector, dict[str, Any]]:
    """The detector of ``config`` initialised under ``torch.manual_seed(config.seed)``, and its encoding options.

    Scale policies ``native``, ``unit`` and ``learned`` apply; ``matched`` is not defined for detection.
    """
    if config.scale == "matched":
        raise ValueError("scale 'matched' is defined for the classify task only; use native, unit or learned")
    options = run_encoding_options(config)
    torch.manual_seed(config.seed)
    model = SequenceDetector(
        data.n_features,
        len(data.targets),
        data.n_channels,
        config.d_model,
        config.n_heads,
        config.n_layers,
        kind=config.detector,
        horizon=config.horizon,
        encoding=config.encoding,
        encoding_options=options,
        dropout=config.dropout,
        max_len=config.window,
    )
    return model, options


@dataclass
class _Pool:
    """Every channel's array of one part (fit / holdout / test) concatenated, with window starts into it."""

    values: torch.Tensor  # [N, F] float32
    offsets: NDArray[np.int64]  # first row of each channel
    lengths: NDArray[np.int64]

    @classmethod
    def of(cls, arrays: list[NDArray[np.float32]]) -> _Pool:
        lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        return cls(torch.from_numpy(np.concatenate(arrays)), offsets, lengths)

    def gather(self, channel: NDArray[np.int64], start: NDArray[np.int64], length: int) -> torch.Tensor:
        """Rows ``start … start + length - 1`` of each ``channel``: ``[b, length, F]``."""
        rows = torch.from_numpy(self.offsets[channel] + start)[:, None] + torch.arange(length)
        return self.values[rows]


def _train_starts(
    pool: _Pool, *, span: int, stride: int, rng: np.random.Generator
) -> tuple[NDArray, NDArray]:
    """``(channel, start)`` of every window of ``span`` steps at ``stride`` from a random offset per channel."""
    chans, starts = [], []
    for c, n in enumerate(pool.lengths):
        s = np.arange(int(rng.integers(0, stride)) if n - span >= stride else 0, n - span + 1, stride)
        chans.append(np.full(len(s), c, dtype=np.int64))
        starts.append(s.astype(np.int64))
    return np.concatenate(chans), np.concatenate(starts)


def _loss(
    model: nn.Module,
    pool: _Pool,
    chan: NDArray,
    start: NDArray,
    config: RunConfig,
    targets: list[int],
    device: torch.device,
    generator: torch.Generator | None,
) -> torch.Tensor:
    W, h = config.window, config.horizon
    c = torch.from_numpy(chan).to(device)
    if config.detector == "forecast":
        seq = pool.gather(chan, start, W + h).to(device)
        return nn.functional.mse_loss(model(seq[:, :W], c), seq[:, W:, targets])
    x = pool.gather(chan, start, W).to(device)
    mask = torch.rand(x.shape[:2], generator=generator) < 1.0 / MASK_EVERY
    mask[:, 0] |= ~mask.any(dim=1)  # at least one masked step per window
    mask = mask.to(device)
    err = (model(x, c, mask) - x[..., targets]) ** 2
    return err[mask].mean()


@torch.inference_mode()
def _holdout_loss(
    model: nn.Module, pool: _Pool, config: RunConfig, targets: list[int], device: torch.device
) -> float:
    """Mean loss on held-out windows at stride ``window`` (fixed masks: seeded generator)."""
    was = model.training
    model.eval()
    chan, start = _train_starts(
        pool, span=config.window + config.horizon, stride=config.window, rng=np.random.default_rng(0)
    )
    gen = torch.Generator().manual_seed(0)
    total, n = 0.0, 0
    for i in range(0, len(chan), 256):
        loss = _loss(model, pool, chan[i : i + 256], start[i : i + 256], config, targets, device, gen)
        total += float(loss) * len(chan[i : i + 256])
        n += len(chan[i : i + 256])
    model.train(was)
    return total / n


class DetectSteps:
    """The detector's side of :func:`posenc_bench.experiment.train.fit_loop` (module docstring, step 1).

    An epoch's windows start at ``stride`` from a random offset per channel, in random order, and the
    reconstructor's masks are drawn from a generator — all seeded by
    :func:`posenc_bench.experiment.train.epoch_seed`, so an epoch depends only on ``(seed, epoch)`` and the
    state it starts from. Early stopping keeps the lowest held-out loss (``val_auprc`` is ``NaN``).
    """

    def __init__(self, data: DetectionData, config: RunConfig, *, device: torch.device) -> None:
        self.label = f"{config.detector} {config.encoding}"
        self.config, self.device, self.targets = config, device, list(data.targets)
        self.fit_pool = _Pool.of([c.fit for c in data.channels])
        self.hold_pool = _Pool.of([c.holdout for c in data.channels])

    def batches(self, epoch: int) -> list[NDArray[np.int64]]:
        seed = epoch_seed(self.config.seed, epoch)
        rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)
        span = self.config.window + self.config.horizon
        self.chan, self.start = _train_starts(self.fit_pool, span=span, stride=self.config.stride, rng=rng)
        order = rng.permutation(len(self.chan))
        size = self.config.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def loss(self, net: nn.Module, batch: NDArray[np.int64]) -> torch.Tensor:
        return _loss(
            net,
            self.fit_pool,
            self.chan[batch],
            self.start[batch],
            self.config,
            self.targets,
            self.device,
            self.generator,
        )

    def validate(self, model: nn.Module) -> tuple[float, dict[str, float]]:
        val_loss = _holdout_loss(model, self.hold_pool, self.config, self.targets, self.device)
        return -val_loss, {"val_loss": val_loss, "val_auprc": math.nan}

    def columns(self, model: nn.Module) -> dict[str, float]:
        return {}


def _tile(n: int, span: int, step: int) -> NDArray[np.int64]:
    """Starts ``0, step, …`` of windows of ``span`` in ``n`` steps, plus one ending exactly at ``n``."""
    starts = np.arange(0, n - span + 1, step, dtype=np.int64)
    return starts if starts[-1] == n - span else np.append(starts, np.int64(n - span))


@torch.inference_mode()
def step_errors(
    model: SequenceDetector,
    values: NDArray[np.float32],
    channel: int,
    config: RunConfig,
    targets: list[int],
    *,
    device: torch.device,
    shuffle_seed: int | None = None,
    batch_size: int = 512,
) -> NDArray[np.float64]:
    """Absolute error per step of ``values[T, F]`` (mean over targets; ``NaN`` where not scored; module docstring).

    ``shuffle_seed``: permute the steps of every input window (the time-shuffle control).
    """
    was = model.training
    model.eval()
    W, h = config.window, config.horizon
    x_all = torch.from_numpy(np.ascontiguousarray(values))
    err = np.full(len(values), np.nan)
    rng = np.random.default_rng(shuffle_seed) if shuffle_seed is not None else None
    if config.detector == "forecast":
        starts = _tile(len(values), W + h, h)
        for i in range(0, len(starts), batch_size):
            s = torch.from_numpy(starts[i : i + batch_size])
            ctx = x_all[s[:, None] + torch.arange(W)]
            if rng is not None:
                ctx = ctx[
                    torch.arange(len(s))[:, None],
                    torch.from_numpy(rng.permuted(np.tile(np.arange(W), (len(s), 1)), axis=1)),
                ]
            pred = model(ctx.to(device), torch.full((len(s),), channel, device=device)).cpu()
            rows = s[:, None] + W + torch.arange(h)
            e = (pred - x_all[rows][..., targets]).abs().mean(dim=-1).double().numpy()
            err[rows.numpy().ravel()] = e.ravel()
    else:
        starts = _tile(len(values), W, W)
        for k in range(MASK_EVERY):
            mask = (torch.arange(W) % MASK_EVERY == k).expand(len(starts), W)
            for i in range(0, len(starts), batch_size):
                s = torch.from_numpy(starts[i : i + batch_size])
                rows = s[:, None] + torch.arange(W)
                m = mask[: len(s)]
                if rng is not None:
                    perm = torch.from_numpy(rng.permuted(np.tile(np.arange(W), (len(s), 1)), axis=1))
                    rows = rows[torch.arange(len(s))[:, None], perm]
                x = x_all[rows]
                out = model(x.to(device), torch.full((len(s),), channel, device=device), m.to(device)).cpu()
                e = (out - x[..., targets]).abs().mean(dim=-1).double()
                err[rows[m].numpy()] = e[m].numpy()
    model.train(was)
    return err


def smooth(err: NDArray[np.float64], span: float) -> NDArray[np.float64]:
    """EWMA of the scored steps of ``err`` (its ``NaN`` prefix kept)."""
    out = np.full_like(err, np.nan)
    scored = np.flatnonzero(~np.isnan(err))
    if scored.size:
        first = scored[0]
        out[first:] = ewma(np.nan_to_num(err[first:], nan=0.0), span)
    return out


def calibrated(test: NDArray[np.float64], holdout: NDArray[np.float64]) -> NDArray[np.float64]:
    """``test / max(holdout)`` (module docstring, step 3); a held-out maximum of 0 becomes the smallest positive float."""
    top = float(np.nanmax(holdout)) if np.isfinite(holdout).any() else 0.0
    return test / max(top, np.finfo(np.float64).tiny)


def scored_channel(channel: Channel, score: NDArray[np.float64]) -> ScoredChannel:
    s = channel.series
    return ScoredChannel(channel.name, score, s.labels, s.events, [FAMILIES.get(k, k) for k in s.event_kinds])


def evaluate_scores(
    data: DetectionData, scores: list[NDArray[np.float64]], config: RunConfig, *, flag_all: bool = False
) -> dict[str, float]:
    """:func:`posenc_bench.experiment.events.detection_metrics` of calibrated step scores, threshold 1."""
    chans = [scored_channel(c, s) for c, s in zip(data.channels, scores)]
    return detection_metrics(
        chans, threshold=1.0, window=config.window, stride=config.stride, flag_all=flag_all
    )


def evaluate_series(
    data: DetectionData, scores: list[NDArray[np.float64]], config: RunConfig, *, flag_all: bool = False
) -> SeriesScores:
    """Per-channel AUPRC and VUS-PR of step scores, buffers up to ``window`` (:mod:`posenc_bench.experiment.series`)."""
    chans = [scored_channel(c, s) for c, s in zip(data.channels, scores)]
    return detect_series(chans, max_buffer=config.window, flag_all=flag_all)


def detector_scores(
    model: SequenceDetector,
    data: DetectionData,
    config: RunConfig,
    *,
    device: torch.device,
    shuffle_seed: int | None = None,
) -> list[NDArray[np.float64]]:
    """Calibrated, smoothed step scores of every test array (module docstring, steps 2–3)."""
    targets = list(data.targets)
    out = []
    for c in data.channels:
        hold = smooth(
            step_errors(model, c.holdout, c.index, config, targets, device=device), config.smoothing
        )
        test = smooth(
            step_errors(model, c.test, c.index, config, targets, device=device, shuffle_seed=shuffle_seed),
            config.smoothing,
        )
        out.append(calibrated(test, hold))
    return out


def split_summary(data: DetectionData, config: RunConfig) -> dict[str, int]:
    """Test windows (at ``window``/``stride``), positive windows and events, as the comparison records them."""
    metrics_all = evaluate_scores(data, [np.zeros(len(c.test)) for c in data.channels], config, flag_all=True)
    windows = positives = 0
    for c in data.channels:
        starts = _tile(len(c.test), config.window, config.stride)
        windows += len(starts)
        positives += int(c.series.labels[starts[:, None] + np.arange(config.window)].any(axis=1).sum())
    return {
        "test_windows": windows,
        "test_positive_windows": positives,
        "test_events": int(metrics_all["events"]),
    }


def evaluate_detector(
    model: SequenceDetector,
    data: DetectionData,
    config: RunConfig,
    *,
    device: torch.device,
    shuffle_control: bool,
) -> dict[str, Any]:
    """The run record's metrics: ``test`` (and ``shuffled_test``) and the scoring throughput."""
    t0 = time.perf_counter()
    scores = detector_scores(model, data, config, device=device)
    record: dict[str, Any] = {"test": evaluate_scores(data, scores, config)}
    record["score_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    record["series"] = evaluate_series(data, scores, config)
    record["series_seconds"] = time.perf_counter() - t0
    if shuffle_control:
        shuffled = detector_scores(model, data, config, device=device, shuffle_seed=config.seed)
        record["shuffled_test"] = evaluate_scores(data, shuffled, config)
    return {**record, **split_summary(data, config)}


def detection_fingerprint(data: DetectionData) -> str:
    """SHA-256 (hex) of every channel's fit/held-out/test arrays, labels and the target features."""
    digest = hashlib.sha256(f"targets:{data.targets};".encode())
    for c in data.channels:
        for name, array in (
            ("fit", c.fit),
            ("holdout", c.holdout),
            ("test", c.test),
            ("labels", c.series.labels),
        ):
            a = np.ascontiguousarray(array)
            digest.update(f"{c.name}.{name}:{a.dtype.str}:{a.shape};".encode())
            digest.update(a.reshape(-1).view(np.uint8).tobytes())
    return digest.hexdigest()


class DetectTask:
    """The detect task for :func:`posenc_bench.experiment.runs.execute` (module docstring)."""

    def fingerprint(self, data: DetectionData) -> str:
        return detection_fingerprint(data)

    def n_features(self, data: DetectionData) -> int:
        return data.n_features

    def build(self, config: RunConfig, data: DetectionData) -> tuple[nn.Module, dict[str, Any]]:
        return build_detector(config, data)

    def steps(
        self, config: RunConfig, data: DetectionData, *, device: torch.device, world: World
    ) -> DetectSteps:
        if world.size > 1:
            raise ValueError(
                "--task detect runs in a single process; data-parallel detection is not implemented"
            )
        return DetectSteps(data, config, device=device)

    def evaluate(
        self,
        model: nn.Module,
        data: DetectionData,
        config: RunConfig,
        *,
        device: torch.device,
        shuffle_control: bool,
    ) -> dict[str, Any]:
        hold = _holdout_loss(
            model, _Pool.of([c.holdout for c in data.channels]), config, list(data.targets), device
        )
        record = evaluate_detector(
            cast(SequenceDetector, model), data, config, device=device, shuffle_control=shuffle_control
        )
        return {**record, "detector": config.detector, "val": {"holdout_loss": hold}}


def baseline_records(data: DetectionData, config: RunConfig, *, names: tuple[str, ...]) -> list[RunRecord]:
    """One record per untrained baseline (:mod:`posenc_bench.experiment.baselines`), scored like the detectors."""
    from posenc_bench.experiment.baselines import detect_step_scores

    out = []
    for name in names:
        t0 = time.perf_counter()
        tests, holds = detect_step_scores(name, data, window=config.window)
        scores = [calibrated(t, h) for t, h in zip(tests, holds)]
        test = evaluate_scores(data, scores, config)
        extra = {"series": evaluate_series(data, scores, config)}
        out.append(RunRecord("baseline", 0, test, name=name, seconds=time.perf_counter() - t0, extra=extra))
    return out


def no_skill_record(data: DetectionData, config: RunConfig) -> RunRecord:
    """Flagging every test step: the detect table's ``flag-all`` row."""
    flags = [np.zeros(len(c.test)) for c in data.channels]
    test = evaluate_scores(data, flags, config, flag_all=True)
    extra = {"series": evaluate_series(data, flags, config, flag_all=True)}
    return RunRecord("no-skill", 0, test, extra=extra)
