"""Scaling sweep: sinusoidal table build time against S·d, NumPy and torch (1 thread), float32.

    OMP_NUM_THREADS=1 python benchmarks/bench_scaling.py [--rounds 5] [--max-elements 33554432]

``S`` in 512 … 65536 and ``d`` in 64 … 2048 (powers of 4 apart), skipping tables of more than
``--max-elements`` entries (default 2^25 = 128 MB of float32) to keep the sweep bounded in time and
memory on a shared machine. For each table: median wall and CPU time of :func:`posenc.sinusoidal`
and of ``SinusoidalEncoding(d).table(S)``, each beside its allocate+copy floor of the same shape,
in interleaved rounds (:mod:`_harness`); then the slope of ``log(CPU time)`` against ``log(S·d)``
over the tables of at least 2^20 entries (below that fixed costs dominate): 1.0 means linear.
"""

from __future__ import annotations

from collections.abc import Callable

import _harness  # pins the heap at import
import numpy as np
import torch

import posenc
from posenc.nn import SinusoidalEncoding

LENGTHS = (512, 2048, 8192, 32768, 65536)
DIMS = (64, 256, 1024, 2048)
LARGE = 2**20


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) on log(elements)."""
    x = np.log([n for n, _ in points])
    y = np.log([t for _, t in points])
    return float(np.polyfit(x, y, 1)[0])


def table_cases(length: int, dim: int) -> dict[str, Callable[[], object]]:
    """posenc's NumPy and torch tables of one shape, each with its allocate+copy floor."""
    src = np.ones((length, dim), np.float32)
    src_t = torch.from_numpy(src)
    encoding = SinusoidalEncoding(dim)
    return {
        "np floor": lambda: np.copyto(np.empty((length, dim), np.float32), src),
        "numpy": lambda: posenc.sinusoidal(length, dim, dtype=np.float32),
        "torch floor": lambda: torch.empty(length, dim).copy_(src_t),
        "torch": lambda: encoding.table(length, dtype=torch.float32),
    }


def main() -> None:
    parser = _harness.arguments(__doc__, rounds=5)
    parser.add_argument("--max-elements", type=int, default=2**25)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(_harness.environment())
    print(f"1 thread; median of {args.rounds} interleaved rounds per shape; times in ms, CPU (wall)")
    print(
        f"  {'S':>6s} {'d':>5s} {'S·d':>10s} {'numpy':>16s} {'÷floor':>7s} {'ns/entry':>8s} "
        f"{'torch':>16s} {'÷floor':>7s} {'ns/entry':>8s} {'load':>5s}"
    )
    points: dict[str, list[tuple[int, float]]] = {"numpy": [], "torch": []}
    for length in LENGTHS:
        for dim in DIMS:
            n = length * dim
            if n > args.max_elements:
                continue
            cases = table_cases(length, dim)
            rounds = args.rounds if n >= LARGE else 3 * args.rounds
            block = _harness.measure(
                cases, "np floor", rounds=rounds, max_load=args.max_load, attempts=args.attempts
            )
            r = block.results
            row = f"  {length:6d} {dim:5d} {n:10d}"
            for name, floor in (("numpy", "np floor"), ("torch", "torch floor")):
                ratio = r[name].cpu / r[floor].cpu
                row += (
                    f" {r[name].cpu * 1e3:7.2f} ({r[name].wall * 1e3:6.2f}) {ratio:7.2f} "
                    f"{r[name].cpu * 1e9 / n:8.2f}"
                )
                if n >= LARGE:
                    points[name].append((n, r[name].cpu))
            print(row + f" {block.load:5.1f}")
    for name, pts in points.items():
        if len(pts) >= 2:
            print(
                f"{name}: slope of log CPU time on log(S·d) over {len(pts)} tables ≥ 2^20 entries: "
                f"{slope(pts):.3f} (1 = linear); ns/entry from {min(t * 1e9 / n for n, t in pts):.2f} "
                f"to {max(t * 1e9 / n for n, t in pts):.2f}"
            )


if __name__ == "__main__":
    main()
