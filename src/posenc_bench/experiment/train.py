"""The training loop of every task (:func:`fit_loop`): AdamW, early stopping on validation, exact resume.

A task gives the loop its :class:`EpochSteps` — an epoch's batches, a batch's loss, the
validation score and log columns; the loop owns the optimiser, the epoch seeds, the divergence
check, early stopping, the checkpoint and the log row. :class:`ClassifySteps` is window
classification (below); the detect task's steps are :class:`posenc_bench.experiment.detect.DetectSteps`.

* Loss (classify): ``BCEWithLogitsLoss`` with ``pos_weight = n_negative / n_positive`` of the training
  windows, so the rare anomalous class weighs as much as the normal one in total.
* Log: one row per epoch; ``encoding_row_norm`` is the mean norm of the rows an additive encoding
  adds at the end of the epoch (NaN for other families), so an encoding that changes while
  training (``dfstrans_dft`` decays on every call) shows it.
* Early stopping: after each epoch the validation set is scored; the model with the best
  validation AUPRC (or lowest validation loss, ``config.monitor``) is kept, and training stops
  after ``config.patience`` epochs without improvement.
* Determinism: the model is initialised under ``torch.manual_seed(seed)`` by the caller; epoch
  ``e`` re-seeds torch (dropout) with :func:`epoch_seed` and (classify) draws its batch order from
  ``DistributedSampler(seed=seed).set_epoch(e)``, so an epoch depends only on ``(seed, e)`` and the
  state it starts from — which makes a resumed run identical to an uninterrupted one.
* Data parallel: the same sampler shards each epoch over ``world.size`` ranks (one rank: all).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import torch
from sklearn.metrics import average_precision_score
from torch import nn
from torch.utils.data.distributed import DistributedSampler
from tqdm.auto import tqdm

from posenc.errors import UsageError
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.distributed import World, wrap_model

if TYPE_CHECKING:
    from posenc_bench.data import WindowSet


class Bar(tqdm):
    """A tqdm bar without tqdm's monitor thread, which only tunes how often slow bars redraw.

    Every tqdm bar, even a disabled one, takes a lock shared by all tqdm classes of the process (a
    ``multiprocessing.RLock``), and each class's monitor thread takes it every 10 s; a test run here
    once hung with two monitor threads and the main thread all waiting on that lock. So bars are made
    only when shown, and without a monitor.
    """

    monitor_interval = 0


class TrainingDiverged(UsageError, FloatingPointError):
    """The training loss became NaN or infinite — almost always a learning rate too large for the model."""

    def __init__(self, message: str, *, lr: float) -> None:
        super().__init__(message)
        self.lr = lr


#: Called after every epoch with the checkpoint (see :func:`checkpoint_of`) and the epoch's log row.
EpochHook = Callable[[dict[str, Any], dict[str, float]], None]


@dataclass
class FitState:
    """Progress of :func:`fit` that a checkpoint must carry besides model and optimiser.

    Attributes:
        epoch: epochs completed.
        best_score: best monitored validation score so far (AUPRC, or −loss).
        best_epoch: the epoch (1-based) that reached it.
        bad_epochs: epochs since the last improvement.
        stopped: early stopping has fired.
        best_state: the model's ``state_dict`` at ``best_epoch``.
        history: one log row per completed epoch.
    """

    epoch: int = 0
    best_score: float = -math.inf
    best_epoch: int = 0
    bad_epochs: int = 0
    stopped: bool = False
    best_state: dict[str, torch.Tensor] | None = None
    history: list[dict[str, float]] = field(default_factory=list)


def epoch_seed(seed: int, epoch: int) -> int:
    """The torch seed of epoch ``epoch`` of a run seeded ``seed`` (distinct per pair)."""
    return seed * 1_000_003 + epoch


def pos_weight(y: np.ndarray) -> float:
    """``n_negative / n_positive`` of labels ``y`` (raises if there is no positive)."""
    n_pos = int(np.sum(y == 1))
    if n_pos == 0:
        raise ValueError("the training windows hold no positive label: cannot weight the classes")
    return (len(y) - n_pos) / n_pos


@torch.inference_mode()
def predict_logits(
    model: nn.Module, X: np.ndarray, *, device: torch.device, batch_size: int = 256
) -> np.ndarray:
    """Logits ``[n]`` (float64) of ``model`` on windows ``X: [n, s, F]``, in eval mode."""
    was_training = model.training
    model.eval()
    out = [
        model(torch.as_tensor(X[i : i + batch_size], device=device)).double().cpu()
        for i in range(0, len(X), batch_size)
    ]
    model.train(was_training)
    return torch.cat(out).numpy()


def predict_scores(
    model: nn.Module, X: np.ndarray, *, device: torch.device, batch_size: int = 256
) -> np.ndarray:
    """Anomaly probabilities ``sigmoid(logit)`` ``[n]`` (float64) of ``model`` on ``X: [n, s, F]``."""
    return 1.0 / (1.0 + np.exp(-predict_logits(model, X, device=device, batch_size=batch_size)))


def checkpoint_of(model: nn.Module, optimizer: torch.optim.Optimizer, state: FitState) -> dict[str, Any]:
    """Everything :func:`fit` needs to resume: model, optimiser and :class:`FitState`."""
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "fit": asdict(state)}


def _validation(
    model: nn.Module, X: np.ndarray, y: np.ndarray, loss_fn: nn.Module, device: torch.device
) -> tuple[float, float]:
    """Weighted BCE loss and AUPRC of ``model`` on validation windows ``X: [n, s, F]``."""
    logits = predict_logits(model, X, device=device)
    loss = float(loss_fn(torch.from_numpy(logits), torch.from_numpy(y.astype(np.float64))))
    return loss, float(average_precision_score(y, logits))


def _encoding_row_norm(model: nn.Module, steps: int) -> float:
    """The model's :meth:`encoding_row_norm` for instances of ``steps`` time steps (NaN if it has none)."""
    method = getattr(model, "encoding_row_norm", None)
    return float("nan") if method is None else float(method(steps))


class EpochSteps(Protocol):
    """A task's side of :func:`fit_loop`: what an epoch trains on, the loss of a batch, the validation.

    Attributes:
        label: names the run in progress bars and in the divergence message (e.g. ``"rope/native"``).
    """

    label: str

    def batches(self, epoch: int) -> Sequence[Sized]:
        """Epoch ``epoch``'s batches in order (torch is already seeded with :func:`epoch_seed`)."""
        ...

    def loss(self, net: nn.Module, batch: Any) -> torch.Tensor:
        """The mean training loss of ``batch`` under ``net`` (the model, or its data-parallel wrapper)."""
        ...

    def validate(self, model: nn.Module) -> tuple[float, dict[str, float]]:
        """``(score, log columns)`` on validation data; early stopping keeps the highest score."""
        ...

    def columns(self, model: nn.Module) -> dict[str, float]:
        """Log columns after the timing columns (``{}`` for none)."""
        ...


def fit_loop(
    model: nn.Module,
    config: RunConfig,
    steps: EpochSteps,
    *,
    device: torch.device,
    world: World = World(),
    checkpoint: dict[str, Any] | None = None,
    on_epoch: EpochHook | None = None,
    progress: bool = True,
) -> FitState:
    """Train ``model`` (already on ``device``) epoch by epoch with early stopping; every task's loop.

    Each epoch re-seeds torch with :func:`epoch_seed`, takes ``steps.batches(epoch)``, takes an
    AdamW step on ``steps.loss`` of each (refusing a non-finite loss with :class:`TrainingDiverged`),
    then scores ``steps.validate``; the weights with the best score are kept, and training stops
    after ``config.patience`` epochs without improvement or at ``config.epochs``. The epoch's log
    row is ``epoch, train_loss, <validation columns>, train_seconds, windows_per_s, <steps.columns>``.

    Args:
        model: the task's model.
        config: epochs, patience, AdamW settings, seed.
        steps: the task's batches, loss and validation.
        device: where ``model`` lives.
        world: data-parallel position (:func:`posenc_bench.experiment.distributed.init_world`).
        checkpoint: a dict from :func:`checkpoint_of` to resume from.
        on_epoch: called after each epoch with the checkpoint and the epoch's log row.
        progress: show a tqdm bar per epoch (rank 0 only).

    Returns:
        The final :class:`FitState`; ``model`` is left holding the *best* validation weights.
    """
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    state = FitState()
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        state = FitState(**checkpoint["fit"])
    net = wrap_model(model, world, device)
    while not state.stopped and state.epoch < config.epochs:
        epoch = state.epoch + 1
        torch.manual_seed(epoch_seed(config.seed, epoch))
        batches = steps.batches(epoch)
        net.train()
        total, count, start = 0.0, 0, time.perf_counter()
        shown = progress and world.is_main
        bar = (
            Bar(batches, desc=f"{steps.label} seed {config.seed} epoch {epoch}", leave=False)
            if shown
            else batches
        )
        for batch in bar:
            loss = steps.loss(net, batch)
            if not torch.isfinite(loss):
                raise TrainingDiverged(
                    f"training loss became {loss.item()} at epoch {epoch} ({steps.label}, seed {config.seed}) "
                    f"with lr={config.lr}: the updates diverged; try a smaller lr",
                    lr=config.lr,
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
            count += len(batch)
        seconds = time.perf_counter() - start
        score, validation = steps.validate(model)
        if score > state.best_score:
            state.best_score, state.best_epoch, state.bad_epochs = score, epoch, 0
            state.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            state.bad_epochs += 1
        state.epoch = epoch
        state.stopped = state.bad_epochs >= config.patience
        row = {
            "epoch": epoch,
            "train_loss": total / count,
            **validation,
            "train_seconds": seconds,
            "windows_per_s": count * world.size / seconds,
            **steps.columns(model),
        }
        state.history.append(row)
        if on_epoch is not None:
            on_epoch(checkpoint_of(model, optimizer, state), row)
    if state.best_state is not None:
        model.load_state_dict(state.best_state)
    return state


class ClassifySteps:
    """Window classification for :func:`fit_loop` (module docstring): weighted BCE, validation AUPRC or loss.

    Batches are index tensors drawn by ``DistributedSampler(seed=config.seed).set_epoch(epoch)``,
    sharded over ``world``; the log adds ``encoding_row_norm`` after the timing columns.
    """

    def __init__(
        self,
        train: WindowSet,
        val: WindowSet,
        config: RunConfig,
        *,
        device: torch.device,
        world: World = World(),
    ) -> None:
        weight = pos_weight(train.y)
        self.label = f"{config.encoding}/{config.scale}"
        self.train, self.val, self.config, self.device = train, val, config, device
        self.train_loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight, device=device))
        self.val_loss = nn.BCEWithLogitsLoss(pos_weight=torch.tensor(weight, dtype=torch.float64))
        self.X = torch.as_tensor(train.X)
        self.y = torch.as_tensor(train.y, dtype=torch.float32)
        self.sampler: DistributedSampler[int] = DistributedSampler(
            range(len(self.X)),  # type: ignore[arg-type]  # any sized sequence of indices will do
            num_replicas=world.size,
            rank=world.rank,
            shuffle=True,
            seed=config.seed,
        )

    def batches(self, epoch: int) -> list[torch.Tensor]:
        self.sampler.set_epoch(epoch)
        order = torch.tensor(list(self.sampler))
        size = self.config.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def loss(self, net: nn.Module, batch: torch.Tensor) -> torch.Tensor:
        return self.train_loss(net(self.X[batch].to(self.device)), self.y[batch].to(self.device))

    def validate(self, model: nn.Module) -> tuple[float, dict[str, float]]:
        val_loss, val_auprc = _validation(model, self.val.X, self.val.y, self.val_loss, self.device)
        score = val_auprc if self.config.monitor == "auprc" else -val_loss
        return score, {"val_loss": val_loss, "val_auprc": val_auprc}

    def columns(self, model: nn.Module) -> dict[str, float]:
        return {"encoding_row_norm": _encoding_row_norm(model, self.train.X.shape[1])}
