"""Tiny data and a tiny configuration shared by the experiment tests (seconds on one core)."""

from __future__ import annotations

import pytest

from posenc_bench.data import load_dataset, make_splits
from posenc_bench.experiment.config import RunConfig

TINY_DATA = {"n_series": 2, "length": 1024}


@pytest.fixture(scope="session")
def tiny_splits():
    """Synthetic data, 2 series × 1024 steps, windows of 16 at stride 8."""
    return make_splits(load_dataset("synthetic", **TINY_DATA), window=16, stride=8, seed=0)


@pytest.fixture
def tiny_config() -> RunConfig:
    return RunConfig(
        dataset="synthetic",
        dataset_options=TINY_DATA,
        window=16,
        stride=8,
        d_model=16,
        n_heads=2,
        n_layers=1,
        epochs=3,
        patience=5,
        batch_size=32,
    )
