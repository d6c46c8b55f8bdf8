"""CLI flags of a ``posenc bench`` small enough for a test (shared by the CLI test modules)."""

from __future__ import annotations


def tiny_bench(*, length: int = 512, epochs: int = 1, seeds: int = 1) -> list[str]:
    """Two synthetic series of ``length`` steps, window 16, one encoder layer of width 16, no progress bar."""
    return [
        "--dataset",
        "synthetic",
        "--dataset-option",
        "n_series=2",
        "--dataset-option",
        f"length={length}",
        "--window",
        "16",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--layers",
        "1",
        "--epochs",
        str(epochs),
        "--seeds",
        str(seeds),
        "--no-progress",
    ]
