"""The one epoch loop every task trains with (:func:`posenc_bench.experiment.train.fit_loop`)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.train import TrainingDiverged, fit_loop


class ScriptedSteps:
    """Two batches of sizes 3 and 1 per epoch; loss ``(w - target)²``; validation scores read from a script."""

    label = "toy/native"

    def __init__(self, scores: list[float], *, target: float = 1.0) -> None:
        self.scores, self.target, self.validated = scores, target, 0

    def batches(self, epoch: int) -> list[list[int]]:
        return [[0, 1, 2], [3]]

    def loss(self, net: nn.Module, batch: list[int]) -> torch.Tensor:
        return ((net.weight - self.target) ** 2).sum()

    def validate(self, model: nn.Module) -> tuple[float, dict[str, float]]:
        score = self.scores[self.validated]
        self.validated += 1
        return score, {"val_score": score}

    def columns(self, model: nn.Module) -> dict[str, float]:
        return {"weight": float(model.weight.detach().sum())}


def toy_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(1, 1, bias=False)


def test_early_stopping_keeps_the_best_epoch_and_logs_every_column_in_order():
    config = RunConfig(epochs=10, patience=2, lr=0.1)
    model, rows = toy_model(), []
    weights = []
    state = fit_loop(
        model,
        config,
        ScriptedSteps([0.1, 0.5, 0.3, 0.2, 0.9]),
        device=torch.device("cpu"),
        on_epoch=lambda ckpt, row: (rows.append(row), weights.append(ckpt["model"]["weight"].clone())),
        progress=False,
    )
    # the score fell for two epochs after epoch 2: patience 2 stops after epoch 4, before 0.9 is seen
    assert (state.epoch, state.best_epoch, state.stopped, state.bad_epochs) == (4, 2, True, 2)
    assert state.best_score == 0.5
    assert torch.equal(model.weight, weights[1])  # the model holds epoch 2's weights
    assert list(rows[0]) == ["epoch", "train_loss", "val_score", "train_seconds", "windows_per_s", "weight"]
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4] and state.history == rows
    # the two batches hold 4 windows per epoch
    assert all(r["windows_per_s"] == pytest.approx(4 / r["train_seconds"]) for r in rows)


def test_resumed_training_equals_uninterrupted_training():
    config = RunConfig(epochs=4, patience=10, lr=0.1, seed=3)
    scores = [0.1, 0.4, 0.2, 0.6]
    whole = toy_model()
    done = fit_loop(whole, config, ScriptedSteps(scores), device=torch.device("cpu"), progress=False)
    checkpoints = []
    first = toy_model()
    fit_loop(
        first,
        RunConfig(epochs=2, patience=10, lr=0.1, seed=3),
        ScriptedSteps(scores),
        device=torch.device("cpu"),
        on_epoch=lambda ckpt, row: checkpoints.append(ckpt),
        progress=False,
    )
    steps = ScriptedSteps(scores)
    steps.validated = 2
    resumed_model = toy_model()
    resumed = fit_loop(
        resumed_model, config, steps, device=torch.device("cpu"), checkpoint=checkpoints[-1], progress=False
    )
    strip = [
        {k: v for k, v in r.items() if k not in ("train_seconds", "windows_per_s")} for r in done.history
    ]
    again = [
        {k: v for k, v in r.items() if k not in ("train_seconds", "windows_per_s")} for r in resumed.history
    ]
    assert again == strip and resumed.best_epoch == done.best_epoch == 4
    assert torch.equal(resumed_model.weight, whole.weight)


@pytest.mark.parametrize("target", [math.inf, math.nan])
def test_a_non_finite_loss_is_refused_naming_the_run_and_the_lr(target):
    config = RunConfig(epochs=3, lr=0.25)
    with pytest.raises(TrainingDiverged, match=r"at epoch 1 \(toy/native, seed 0\) with lr=0.25") as err:
        fit_loop(toy_model(), config, ScriptedSteps([0.0] * 3, target=target), device=torch.device("cpu"))
    assert err.value.lr == 0.25
