"""Training throughput (windows/s) of the benchmark's classifier, side by side in one run.

    OMP_NUM_THREADS=1 python benchmarks/training_throughput.py [--epochs 3] [--threads 1,2]

For each encoding and torch thread count: the ``posenc bench`` default model (d_model 32,
4 heads, 2 layers, window 32, batch 32) trained on the default synthetic data for a few
epochs; prints the median over epochs of training windows per second (forward + backward +
AdamW step, excluding validation), and the ratio to the first row.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics

import torch

from posenc_bench.data import load_dataset, make_splits
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.scale import build_classifier
from posenc_bench.experiment.train import ClassifySteps, fit_loop


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--encodings", default="none,sinusoidal,dft,rope,alibi")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    base = dataclasses.replace(RunConfig(), epochs=args.epochs, patience=args.epochs)
    splits = make_splits(load_dataset(base.dataset), window=base.window, stride=base.stride, seed=0)
    device = torch.device(args.device)
    print(
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, device {device}; "
        f"{len(splits.train.y)} training windows of {base.window} × {splits.train.X.shape[2]}, "
        f"d_model {base.d_model}, {base.n_layers} layers, batch {base.batch_size}"
    )
    first = None
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for encoding in args.encodings.split(","):
            config = dataclasses.replace(base, encoding=encoding)
            model, _ = build_classifier(config, splits.train.X.shape[2], splits.train.X)
            steps = ClassifySteps(splits.train, splits.val, config, device=device)
            state = fit_loop(model.to(device), config, steps, device=device, progress=False)
            rate = statistics.median(r["windows_per_s"] for r in state.history)
            first = first or rate
            print(f"threads {threads}  {encoding:<11} {rate:9.0f} windows/s   ×{rate / first:.2f}")


if __name__ == "__main__":
    main()
