"""Run and grid configuration: validation with named parameters, the grid, the device choice."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from posenc_bench.experiment import config as config_module
from posenc_bench.experiment.axes import DataAxis, ModelAxis, ProtocolAxis, TaskAxis, TrainingAxis
from posenc_bench.experiment.config import BenchPlan, RunConfig
from posenc_bench.experiment.distributed import World, init_world, select_device


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"encoding": "fourier"}, "unknown encoding 'fourier'; registered encodings: none, sinusoidal"),
        ({"scale": "huge"}, "scale must be one of 'native', 'unit', 'matched', 'learned'; got 'huge'"),
        ({"d_model": 30, "n_heads": 4}, "d_model must be divisible by n_heads"),
        ({"window": 0}, "window must be a positive int, got 0"),
        ({"dropout": 1.0}, r"dropout must be a number in \[0, 1\)"),
        ({"seed": -1}, "seed must be an int >= 0"),
        ({"monitor": "f1"}, "monitor must be one of 'auprc', 'loss'"),
        ({"subset": "k 1"}, "subset must be a string of letters"),
        ({"window": 32.0}, r"window must be a positive int, got 32.0 \(float\)"),
        ({"lr": float("inf")}, r"lr must be a number in \(0, 1e\+06\]; got inf"),
        ({"anomaly_percent": 0}, r"anomaly_percent must be a number in \(0, 100\]; got 0"),
        ({"task": "detect", "protocol": "dfstrans"}, "protocol=dfstrans applies to task=classify only"),
        (
            {"task": "detect", "model": "spatiotemporal", "window": 128},
            "model=spatiotemporal is a classifier",
        ),
        (
            {"model": "spatiotemporal", "window": 30},
            "window=30 must equal n_windows × window_length = 8 × 16",
        ),
        ({"task": "lengthgen"}, "task=lengthgen trains a causal decoder on algorithmic sequences"),
        ({"task": "translate"}, "task must be one of 'classify', 'detect', 'lengthgen'; got 'translate'"),
    ],
)
def test_run_config_rejects_bad_values_naming_them(changes, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RunConfig(**changes)


def test_a_wrong_type_is_a_type_error_and_a_bool_is_no_number():
    with pytest.raises(TypeError, match="dropout must be a number in"):
        RunConfig(dropout=True)
    with pytest.raises(TypeError, match="monitor must be one of"):
        RunConfig(monitor=1)


def test_run_config_is_the_flat_view_of_its_axes():
    """Every field belongs to exactly one axis, and the axes give back the run they came from."""
    config = RunConfig(task="detect", horizon=2, encoding="rope", encoding_options={"layout": "adjacent"})
    names = [f.name for axis in config.axes for f in dataclasses.fields(axis)]
    assert sorted(names) == sorted(f.name for f in dataclasses.fields(RunConfig))
    assert RunConfig.from_axes(*config.axes) == config
    assert config.axes.task.detect and not config.axes.model.spatiotemporal


@pytest.mark.parametrize("window", [1, 2, 4])
def test_horizon_binds_the_detect_task_only(window):
    """The forecast horizon is a detect-task field: a classifier over short windows is not refused by it."""
    assert RunConfig(window=window).to_dict()["window"] == window
    with pytest.raises(ValueError, match=f"horizon must be < window, got horizon=4 with window={window}"):
        RunConfig(window=window, task="detect")


def test_run_config_is_frozen_and_serialisable():
    config = RunConfig(dataset_options={"n_series": 2})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 3
    assert config.to_dict()["dataset_options"] == {"n_series": 2}


def test_plan_grid_scales_apply_to_input_encodings_only():
    plan = BenchPlan(RunConfig(), ("none", "dft", "rope"), ("native", "matched"), seeds=2, splits=2)
    keys = [(c.split_seed, c.encoding, c.scale, c.seed) for c in plan.runs()]
    assert len(keys) == 2 * (1 + 2 + 1) * 2 == len(set(keys))
    assert {(e, s) for _, e, s, _ in keys} == {
        ("none", "native"),
        ("dft", "native"),
        ("dft", "matched"),
        ("rope", "native"),
    }
    assert [k[0] for k in keys] == sorted(k[0] for k in keys)  # split seed outermost


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"splits": 0}, r"splits must be an int in \[1, 1000\]; got 0"),
        ({"seeds": 0}, r"seeds must be an int in \[1, 1000\]; got 0"),
        ({"encodings": ()}, "at least one encoding"),
        ({"encodings": ("dft", "dft")}, "must not repeat"),
        ({"scales": ("loud",)}, "scale must be one of"),
    ],
)
def test_plan_rejects_bad_grids(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BenchPlan(RunConfig(), **{"encodings": ("sinusoidal",), **kwargs})


def test_single_process_world_and_device_choice(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert init_world() == World(rank=0, size=1)
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert select_device(None, World()).type == expected
    assert select_device("cpu", World()) == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            select_device("cuda", World())


def test_run_config_fields_are_the_axes_fields_declared_once():
    """``RunConfig`` restates no field: each is its axis's, with the axis's default."""
    axes = (DataAxis, ProtocolAxis, ModelAxis, TaskAxis, TrainingAxis)
    declared = [f for axis in axes for f in dataclasses.fields(axis)]
    assert [f.name for f in dataclasses.fields(RunConfig)] == [f.name for f in declared]
    assert not inspect.get_annotations(RunConfig)
    config = RunConfig()
    for axis in axes:
        assert getattr(config.axes, axis.__name__.removesuffix("Axis").lower()) == axis()


def test_identity_versions_are_checked_by_name():
    assert config_module.identity_version({}) == config_module.IDENTITY_VERSION == 1
    with pytest.raises(ValueError, match="identity_version 2 of a stored run"):
        config_module.identity_version({"identity_version": 2})
    with pytest.raises(ValueError, match="version must be one of 1, got 2"):
        RunConfig().identity(2)
    assert RunConfig.from_dict({**RunConfig(seed=3).identity(), "identity_version": 1}) == RunConfig(seed=3)
