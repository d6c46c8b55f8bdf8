"""Sinusoidal table build and warm forward, as ratios to the memory floor, beside peers (issue 2).

CPU, float32, one thread, median of several repeats, all measured in this one run:

* build: time to make the ``S × d`` table ÷ ``torch.empty(S, d).copy_(t)`` (the memory floor);
* forward: warm ``module(x)`` ÷ plain ``x + t`` for ``x [b, S, d]``;
* error: max |float32 table − float64 reference| over positions ``10^7 − 4096 … 10^7 − 1``
  (reference: :func:`posenc.sinusoidal` in float64, the formula of SPEC §1 with float64 angles).

Peers (the ``bench`` extra: ``positional-encodings``, ``x-transformers``) are measured when
importable and skipped otherwise; the plain tutorial formula (float32 ``pe[:, 0::2] = sin(pos·div)``)
is always measured. Run: ``OMP_NUM_THREADS=1 python benchmarks/bench_tables.py``.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

import posenc
from posenc.nn import SinusoidalEncoding

SHAPES = ((2048, 512, 4), (16384, 1024, 1))  # (S, d, batch of the forward)
FAR = 10**7  # error is measured on the positions just below this


def median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, run round-robin so that load drifts hit all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(ts) for name, ts in times.items()}


def tutorial_table(length: int, dim: int, start: int = 0) -> torch.Tensor:
    """The tutorial formula (Annotated Transformer / PyTorch tutorial), float32 throughout."""
    pe = torch.zeros(length, dim)
    position = torch.arange(start, start + length, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def posenc_table(length: int, dim: int, start: int = 0) -> torch.Tensor:
    """A fresh module's float32 table (what it caches); rows from ``start`` via a forward with ``offset``."""
    encoding = SinusoidalEncoding(dim)
    if start:
        return encoding(torch.zeros(1, length, dim), offset=start)[0]
    return encoding.table(length, dtype=torch.float32)


def peers() -> dict[str, Callable[[int, int, int], torch.Tensor]]:
    """Peer tables ``(length, dim, start) -> [length, dim]`` for the installed peers only."""
    found: dict[str, Callable[[int, int, int], torch.Tensor]] = {}
    try:
        from positional_encodings.torch_encodings import PositionalEncoding1D

        def pe1d(length: int, dim: int, start: int = 0) -> torch.Tensor:
            if start:
                raise NotImplementedError("no offset")
            return PositionalEncoding1D(dim)(torch.zeros(1, length, dim))[0]

        found["positional-encodings PositionalEncoding1D"] = pe1d
    except ImportError:
        print("  positional-encodings: not installed (pip install 'posenc[peers]'), skipped")
    try:
        from x_transformers.x_transformers import ScaledSinusoidalEmbedding

        def xt(length: int, dim: int, start: int = 0) -> torch.Tensor:
            emb = ScaledSinusoidalEmbedding(dim)
            pos = torch.arange(start, start + length)
            return emb(torch.zeros(1, length, dim), pos=pos) / emb.scale

        found["x-transformers ScaledSinusoidalEmbedding"] = xt
    except ImportError:
        print("  x-transformers: not installed (pip install 'posenc[peers]'), skipped")
    return found


def far_error(table: Callable[[int, int, int], torch.Tensor], dim: int) -> str:
    n = 4096
    try:
        got = table(n, dim, FAR - n).to(torch.float64).numpy()
    except NotImplementedError as exc:
        return f"n/a ({exc})"
    ref = posenc.sinusoidal(np.arange(FAR - n, FAR), dim)
    return f"{np.abs(got - ref).max():.2e}"


def main() -> None:
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, float32, CPU; median of repeats\n")
    impls = {"posenc SinusoidalEncoding": posenc_table, "tutorial formula (float32)": tutorial_table, **peers()}
    for length, dim, batch in SHAPES:
        repeats = 41 if length * dim < 2**22 else 11
        src = torch.randn(length, dim)
        x = torch.randn(batch, length, dim)
        encoding = SinusoidalEncoding(dim)
        pe = tutorial_table(length, dim)
        forwards = {"posenc SinusoidalEncoding": encoding, "tutorial formula (float32)": lambda x: x + pe[: x.shape[1]]}
        builds = median_times({"floor": lambda: torch.empty(length, dim).copy_(src),
                               **{name: (lambda t=table: t(length, dim)) for name, table in impls.items()}}, repeats)
        fwds = median_times({"plain": lambda: x + src, **{name: (lambda f=f: f(x)) for name, f in forwards.items()}},
                            repeats)
        floor, plain_add = builds["floor"], fwds["plain"]
        print(f"S={length} d={dim}: floor torch.empty(S, d).copy_(t) {floor * 1e3:.2f} ms; "
              f"plain x + t (x [{batch}, {length}, {dim}]) {plain_add * 1e3:.2f} ms")
        print(f"  {'implementation':42s} {'build ms':>9s} {'÷ floor':>8s} {'fwd ms':>8s} {'÷ x+t':>7s} "
              f"{'err @1e7':>12s}")
        for name, table in impls.items():
            fwd_txt = "       -       -"
            if name in fwds:
                fwd_txt = f"{fwds[name] * 1e3:8.2f} {fwds[name] / plain_add:7.2f}"
            print(f"  {name:42s} {builds[name] * 1e3:9.2f} {builds[name] / floor:8.2f} {fwd_txt} "
                  f"{far_error(table, dim):>12s}")
        ref = posenc.sinusoidal(np.arange(FAR - 4096, FAR), dim)
        numpy32 = posenc.sinusoidal(np.arange(FAR - 4096, FAR), dim, dtype=np.float32)
        print(f"  {'(posenc.sinusoidal NumPy, float32)':42s} {'':9s} {'':8s} {'':8s} {'':7s} "
              f"{np.abs(numpy32 - ref).max():12.2e}\n")


if __name__ == "__main__":
    main()
