"""Encoder forward+backward throughput (tokens/s) with every registered encoding, relative to ``none``.

    OMP_NUM_THREADS=1 python benchmarks/bench_encoder.py [--repeats 7]

``TransformerEncoder(d=128, 4 heads, 2 layers)`` on ``(B=32, S=128)`` float32 CPU, one thread,
bidirectional, no masks. Medians of interleaved repeats; each row names the attention path it
takes (fused ``scaled_dot_product_attention`` or the explicit one Shaw's value term needs).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from posenc.nn import TransformerEncoder, available_encodings
from posenc.nn.attention import encoding_family

B, S, D, HEADS, LAYERS = 32, 128, 128, 4, 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.randn(B, S, D)
    configs = {name: (name, None) for name in available_encodings()}
    configs["shaw (on_values=True)"] = ("shaw", {"on_values": True})
    models = {
        label: TransformerEncoder(D, HEADS, LAYERS, encoding=name, encoding_options=opts, max_len=S)
        for label, (name, opts) in configs.items()
    }

    def step(model: TransformerEncoder) -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    times: dict[str, list[float]] = {label: [] for label in models}
    for model in models.values():
        step(model)  # warm-up
    for _ in range(args.repeats):
        for label, model in models.items():
            start = time.perf_counter()
            step(model)
            times[label].append(time.perf_counter() - start)
    base = statistics.median(times["none"])
    print(f"torch {torch.__version__}, 1 thread, B={B} S={S} d={D} heads={HEADS} layers={LAYERS}, median of {args.repeats}")
    print(f"{'encoding':24s} {'family':7s} {'attention':9s} {'tokens/s':>10s} {'vs none':>8s}")
    for label, ts in times.items():
        model = models[label]
        family = encoding_family(model.encoding)
        path = "explicit" if family == "shaw" and model.encoding.on_values else "fused"
        med = statistics.median(ts)
        print(f"{label:24s} {family:7s} {path:9s} {B * S / med:10.0f} {base / med:8.3f}")


if __name__ == "__main__":
    main()
