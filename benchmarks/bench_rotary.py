"""Rotary application speed on CPU, as a ratio to the memory floor ``q.clone()`` timed in the same run.

    OMP_NUM_THREADS=1 python benchmarks/bench_rotary.py [--repeats 21]

Shape ``(B=8, H=8, S=2048, D_h=64)`` float32, one thread. Rows: ``q.clone()`` (one read, one
write: the floor); :func:`posenc.nn.apply_rotary` for both layouts (cos/sin tables already
cached, as in a model); the plain ``q*cos + rotate_half(q)*sin``; ``rotary-embedding-torch``
when installed (the optional ``bench`` extra). Medians of interleaved repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from posenc.nn import RotaryEmbedding, apply_rotary


def plain_rotate_half(q: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = q.shape[-1] // 2
    return q * cos + torch.cat([-q[..., half:], q[..., :half]], dim=-1) * sin


def candidates(q: torch.Tensor) -> dict:
    s, d = q.shape[-2], q.shape[-1]
    rows = {"q.clone() (floor)": q.clone}
    for layout in ("adjacent", "half_split"):
        rope = RotaryEmbedding(d, layout=layout, max_len=s)
        cos, sin = rope._cached(0, s, q)
        rows[f"posenc apply_rotary {layout}"] = (lambda c=cos, n=sin, lay=layout: apply_rotary(q, c, n, layout=lay))
    half_rope = RotaryEmbedding(d, layout="half_split", max_len=s)
    cos, sin = half_rope._cached(0, s, q)
    rows["plain q*cos + rotate_half(q)*sin"] = lambda: plain_rotate_half(q, cos, sin)
    try:
        from rotary_embedding_torch import RotaryEmbedding as LucidRotary
    except ImportError:
        print("rotary-embedding-torch not installed (pip install 'posenc[peers]'): skipped")
    else:
        lucid = LucidRotary(dim=d)
        rows["rotary-embedding-torch rotate_queries_or_keys"] = lambda: lucid.rotate_queries_or_keys(q)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    q = torch.randn(8, 8, 2048, 64)
    rows = candidates(q)
    times: dict[str, list[float]] = {name: [] for name in rows}
    for fn in rows.values():
        fn()  # warm-up
    for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits every row alike
        for name, fn in rows.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    floor = statistics.median(times["q.clone() (floor)"])
    print(f"torch {torch.__version__}, 1 thread, q {tuple(q.shape)} float32, median of {args.repeats}")
    print(f"{'method':48s} {'ms':>8s} {'x floor':>8s}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:48s} {med * 1e3:8.2f} {med / floor:8.2f}")


if __name__ == "__main__":
    main()
