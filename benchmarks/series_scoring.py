"""Per-series scoring cost: AUPRC and VUS-PR of every MSL channel's test steps.

    OMP_NUM_THREADS=1 python benchmarks/series_scoring.py [--buffers 32,100] [--repeat 3]

Scores each of the 27 MSL test arrays by its largest |value| so far in a 32-step window (a
stand-in detector; the cost does not depend on the scores) and times
:func:`posenc_bench.experiment.series.detect_series` — AUPRC and VUS-PR over buffers 0 … L,
every distinct score a threshold — for each L (32: the detect task's window; 100: TSB-AD's
default sliding window). Prints the median over repeats of wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _harness  # pins the heap at import (before NumPy): fresh arrays do not page-fault
import numpy as np

from posenc_bench.data import load_dataset
from posenc_bench.experiment.events import ScoredChannel
from posenc_bench.experiment.series import detect_series


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--buffers", default="32,100")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    dataset = load_dataset("msl")
    channels = []
    for s in dataset.series:
        x = np.abs(s.values[:, 0])
        score = np.lib.stride_tricks.sliding_window_view(np.concatenate([np.zeros(31), x]), 32).max(axis=1)
        channels.append(ScoredChannel(s.name, score, s.labels, s.events, []))
    steps = sum(len(c.score) for c in channels)
    print(_harness.environment())
    for buffer in (int(b) for b in args.buffers.split(",")):
        walls, cpus = [], []
        for _ in range(args.repeat):
            w, c = time.perf_counter(), time.process_time()
            detect_series(channels, max_buffer=buffer)
            walls.append(time.perf_counter() - w)
            cpus.append(time.process_time() - c)
        print(
            f"L={buffer}: {len(channels)} channels, {steps} steps: "
            f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU (median of {args.repeat})"
        )


if __name__ == "__main__":
    main()
