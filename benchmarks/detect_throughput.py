"""Training throughput of the detect task's forecaster (windows/s), wall clock and per CPU-second.

    OMP_NUM_THREADS=1 python benchmarks/detect_throughput.py [--dataset msl] [--epochs 2] [--batch-size 32]

The ``posenc bench --task detect`` default model (forecast, d_model 32, 4 heads, 2 layers,
window 32, horizon 4) at the batch size of the committed MSL results (32; the bench's default
batch is 16, set for the classify task) trained for a few epochs on the nominal training arrays,
one torch thread. Prints per encoding the median over epochs of training windows per second of
wall time (forward + backward + AdamW step), and windows per second of this process's CPU time:
on a machine shared with other work, the second is what one dedicated thread would do.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import time

import torch

from posenc_bench.data import load_dataset
from posenc_bench.data.nominal import NOMINAL_OPTIONS, detection_data
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.detect import DetectSteps, build_detector
from posenc_bench.experiment.train import fit_loop


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="msl")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--encodings", default="none,sinusoidal,rope")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = dataclasses.replace(
        RunConfig(task="detect"), epochs=args.epochs, patience=args.epochs, batch_size=args.batch_size
    )
    key, value = NOMINAL_OPTIONS.get(args.dataset, ("include_train", True))
    data = detection_data(
        load_dataset(args.dataset, **{key: value}), window=base.window, horizon=base.horizon
    )
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.dataset}: {data.n_channels} channels × "
        f"{data.n_features} features, window {base.window}, horizon {base.horizon}, d_model {base.d_model}, "
        f"{base.n_layers} layers, batch {base.batch_size}"
    )
    cpu_device = torch.device("cpu")
    # one untimed epoch first: the process's one-time start-up (kernel initialisation) is not training
    warm = dataclasses.replace(base, encoding=args.encodings.split(",")[0], epochs=1, patience=1)
    fit_loop(
        build_detector(warm, data)[0],
        warm,
        DetectSteps(data, warm, device=cpu_device),
        device=cpu_device,
        progress=False,
    )
    for encoding in args.encodings.split(","):
        config = dataclasses.replace(base, encoding=encoding)
        model, _ = build_detector(config, data)
        cpu = time.process_time()
        steps = DetectSteps(data, config, device=cpu_device)
        state = fit_loop(model, config, steps, device=cpu_device, progress=False)
        cpu = time.process_time() - cpu
        windows = sum(r["windows_per_s"] * r["train_seconds"] for r in state.history)
        wall_rate = statistics.median(r["windows_per_s"] for r in state.history)
        print(
            f"{encoding:<11} {wall_rate:8.0f} windows/s (wall)  {windows / cpu:8.0f} windows per CPU-second "
            f"(incl. held-out loss)"
        )


if __name__ == "__main__":
    main()
