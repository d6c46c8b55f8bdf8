"""Sinusoidal table build, NumPy and torch, as ratios to the allocate+copy floor, beside peers.

    OMP_NUM_THREADS=1 python benchmarks/bench_tables.py [--rounds 15] [--threads 1,2]

Shapes ``16384 × 1024`` and ``2048 × 512``, float32, CPU. Measuring rules (pinned heap, interleaved
rounds, CPU time, load): :mod:`_harness`.

posenc's rows are measured twice: as installed, and with its compiled loops switched off (its pure
NumPy/PyTorch code, ``posenc._native``).

* **NumPy**: :func:`posenc.sinusoidal` ÷ ``np.copyto(np.empty(S, d), t)`` (a fresh output, pinned heap);
  peak traced memory (``tracemalloc``) ÷ the output's bytes; beside the usual NumPy recipe
  (float64 angles for the whole table, ``pe[:, 0::2] = sin``, cast).
* **torch**, at 1 thread and at every core: ``SinusoidalEncoding(d).table(S, dtype=float32)`` ÷
  ``torch.empty(S, d).copy_(t)``; peers from the ``peers`` extra (``x-transformers``
  ``ScaledSinusoidalEmbedding``, ``positional-encodings`` ``PositionalEncoding1D`` with its cache
  cleared) and the tutorial formula (float32 angles), each building a fresh table per call.
* **error @1e7**: max |table − float64 reference| over positions ``10^7 − 2048 … 10^7 − 1``; the
  reference forms each angle directly in float64 (itself within 9.3e-10 of the exact value there),
  so a correctly rounded float32 table shows ≤ 3.1e-8. Peers without an offset say ``n/a``.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable

import _harness  # pins the heap at import
import numpy as np
import torch

import posenc
from posenc.nn import SinusoidalEncoding

SHAPES = ((16384, 1024), (2048, 512))
FAR, FAR_ROWS = 10**7, 2048


def reference(start: int, length: int, dim: int) -> np.ndarray:
    """Interleaved table with every angle formed directly in float64 (independent of posenc's algorithm)."""
    w = 10000.0 ** (-2.0 * np.arange(dim // 2) / dim)
    a = np.multiply.outer(np.arange(start, start + length, dtype=np.float64), w)
    return np.stack([np.sin(a), np.cos(a)], axis=2).reshape(length, dim)


def numpy_recipe(length: int, dim: int) -> np.ndarray:
    """The usual NumPy recipe: a float64 table of angles, sin/cos into strided columns, then cast."""
    pe = np.zeros((length, dim))
    position = np.arange(length)[:, None]
    div_term = np.exp(np.arange(0, dim, 2) * (-math.log(10000.0) / dim))
    pe[:, 0::2] = np.sin(position * div_term)
    pe[:, 1::2] = np.cos(position * div_term)
    return pe.astype(np.float32)


def tutorial(length: int, dim: int, start: int = 0) -> torch.Tensor:
    """The PyTorch tutorial / Annotated Transformer formula, float32 throughout."""
    pe = torch.zeros(length, dim)
    position = torch.arange(start, start + length, dtype=torch.float32).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


def torch_tables(dim: int) -> dict[str, Callable[..., torch.Tensor]]:
    """``name -> table(length, start=0)`` for posenc, the tutorial and the installed peers (interleaved order)."""
    encoding = SinusoidalEncoding(dim)

    def posenc_table(length: int, start: int = 0) -> torch.Tensor:
        if start:
            return encoding(torch.zeros(1, length, dim), offset=start)[0]
        return encoding.table(length, dtype=torch.float32)

    tables: dict[str, Callable[..., torch.Tensor]] = {
        "posenc SinusoidalEncoding.table": posenc_table,
        "  the same, pure torch (no compiled loop)": _harness.without_native(posenc_table),
        "tutorial formula (float32 angles)": lambda length, start=0: tutorial(length, dim, start),
    }
    x_transformers_module = _harness.import_peer("x_transformers.x_transformers", "peers")
    if x_transformers_module is not None:
        xt = x_transformers_module.ScaledSinusoidalEmbedding(dim)

        def x_transformers(length: int, start: int = 0) -> torch.Tensor:
            with torch.no_grad():
                split = xt(torch.zeros(1, length, dim), offset=start) / xt.scale  # [sin | cos] blocks
            return split.view(length, 2, dim // 2).transpose(1, 2).reshape(length, dim) if start else split

        tables["x-transformers ScaledSinusoidalEmbedding"] = x_transformers
    encodings = _harness.import_peer("positional_encodings.torch_encodings", "peers")
    if encodings is not None:
        pe1d = encodings.PositionalEncoding1D(dim)

        def positional_encodings(length: int, start: int = 0) -> torch.Tensor:
            if start:
                raise NotImplementedError("no offset")
            pe1d.cached_penc = None  # a fresh table per call, like the others
            return pe1d(torch.zeros(1, length, dim))[0]

        tables["positional-encodings PositionalEncoding1D"] = positional_encodings
    return tables


def far_error(table: Callable[..., np.ndarray | torch.Tensor], dim: int) -> str:
    try:
        got = table(FAR_ROWS, FAR - FAR_ROWS)
    except NotImplementedError as exc:
        return f"n/a ({exc})"
    got = got.to(torch.float64).numpy() if isinstance(got, torch.Tensor) else got.astype(np.float64)
    return f"{np.abs(got - reference(FAR - FAR_ROWS, FAR_ROWS, dim)).max():.2e}"


def peak_ratio(fn: Callable[[], np.ndarray]) -> str:
    tracemalloc.start()
    try:
        out = fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return f"{peak / out.nbytes:.2f}"


def run_shape(length: int, dim: int, args) -> None:
    """The NumPy block, then the torch block at each thread count, for one table shape."""
    src = np.random.default_rng(0).standard_normal((length, dim)).astype(np.float32)
    numpy_cases = {
        "floor np.copyto(np.empty(S, d), t)": lambda: np.copyto(np.empty((length, dim), np.float32), src),
        "posenc.sinusoidal(S, d, dtype=float32)": lambda: posenc.sinusoidal(length, dim, dtype=np.float32),
        "  the same, pure NumPy (no compiled loop)": _harness.without_native(
            lambda: posenc.sinusoidal(length, dim, dtype=np.float32)
        ),
        "NumPy recipe (float64 table, then cast)": lambda: numpy_recipe(length, dim),
    }
    block = _harness.measure(
        numpy_cases,
        "floor np.copyto(np.empty(S, d), t)",
        rounds=args.rounds,
        max_load=args.max_load,
        attempts=args.attempts,
    )
    posenc_far = far_error(lambda n, s: posenc.sinusoidal(np.arange(s, s + n), dim, dtype=np.float32), dim)
    extra = {
        "posenc.sinusoidal(S, d, dtype=float32)": f"{peak_ratio(lambda: posenc.sinusoidal(length, dim, dtype=np.float32)):>6s} {posenc_far}",
        "NumPy recipe (float64 table, then cast)": f"{peak_ratio(lambda: numpy_recipe(length, dim)):>6s}",
    }
    _harness.report(
        f"NumPy S={length} d={dim} float32",
        block,
        rounds=args.rounds,
        extra=extra,
        extra_header="peak÷out err@1e7",
    )

    src_t = torch.from_numpy(src)
    tables = torch_tables(dim)
    errors = {name: f"{far_error(table, dim):>12s}" for name, table in tables.items()}
    for threads in _harness.thread_counts(args.threads):
        torch.set_num_threads(threads)
        cases: dict[str, Callable[[], object]] = {
            "floor torch.empty(S, d).copy_(t)": lambda: torch.empty(length, dim).copy_(src_t)
        }
        cases.update({name: (lambda t=table: t(length)) for name, table in tables.items()})
        block = _harness.measure(
            cases,
            "floor torch.empty(S, d).copy_(t)",
            rounds=args.rounds,
            max_load=args.max_load,
            attempts=args.attempts,
        )
        _harness.report(
            f"torch S={length} d={dim} float32, {torch.get_num_threads()} thread(s)",
            block,
            rounds=args.rounds,
            extra=errors,
            extra_header="err@1e7",
        )
    torch.set_num_threads(1)


def main() -> None:
    args = _harness.arguments(__doc__, rounds=15).parse_args()
    print(_harness.environment())
    for length, dim in SHAPES:
        run_shape(length, dim, args)


if __name__ == "__main__":
    main()
