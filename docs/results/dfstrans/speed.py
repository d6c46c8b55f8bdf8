"""Training throughput of the default spatio-temporal model on MSL instances (wall and CPU time).

    OMP_NUM_THREADS=1 python docs/results/dfstrans/speed.py
"""

import os
import time

import torch

from posenc_bench.data import load_dataset, make_splits
from posenc_bench.models import SpatioTemporalClassifier


def measure(encoding: str, X: torch.Tensor, y: torch.Tensor, *, epochs: int = 2, batch: int = 32) -> None:
    torch.manual_seed(0)
    model = SpatioTemporalClassifier(X.shape[2], encoding=encoding)  # defaults: 8 windows × 16 steps, d 16, 2 heads
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-2)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def epoch() -> None:
        for i in range(0, len(X), batch):
            loss = loss_fn(model(X[i : i + batch]), y[i : i + batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    epoch()  # warm-up
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(epochs):
        epoch()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    n, windows = epochs * len(X), model.n_windows
    print(f"{encoding}: {n} instances, wall {wall:.2f} s -> {n / wall:.0f} instances/s "
          f"({windows * n / wall:.0f} windows/s); CPU {cpu:.2f} s -> {n / cpu:.0f} instances/s "
          f"({windows * n / cpu:.0f} windows/s) per busy core; load {load:.1f}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    splits = make_splits(load_dataset("msl"), window=128, protocol="dfstrans", seed=0)
    X, y = torch.as_tensor(splits.train.X), torch.as_tensor(splits.train.y, dtype=torch.float32)
    for name in ("none", "sinusoidal", "dfstrans_dft"):
        measure(name, X, y)
