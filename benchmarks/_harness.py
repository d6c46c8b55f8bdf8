"""Shared measuring rules for every script in ``benchmarks/`` (imported first, before NumPy or torch).

* **Pinned heap.** ``mallopt(M_MMAP_MAX, 0)`` and ``mallopt(M_TRIM_THRESHOLD, 2**31 - 1)`` at import:
  glibc then serves large arrays from a heap it never gives back, so a fresh output (of the case
  *and* of the floor) reuses pages already mapped instead of page-faulting on first touch. Without
  this a 64 MB ``empty + copy`` floor costs 2–3× more and every ratio to it looks better than it is.
* **Interleaved rounds.** Each round runs every case once, so drifting load on the shared machine
  hits all cases alike; the ratio of a case to the floor is taken *within* a round and the median
  over rounds is printed. The order is rotated by one case each round, so that no case always
  runs in the same place: in a fixed order, three copies of one build measured 1.19–1.23× a copy
  in the first place after a change of tables and 0.98–1.11× in the next two (rotary, bfloat16,
  (1, 8, 16384, 64)), whatever copy ran first.
* **Wall and CPU time.** ``time.perf_counter`` beside ``time.process_time`` (all threads of this
  process): CPU time is what another job on the machine cannot steal.
* **Recorded conditions.** Versions, core count, thread settings and the 1-minute load average
  before and after each block. A block measured while the load exceeded ``--max-load`` is repeated
  (up to ``--attempts``) and the attempt at the lowest load is kept; the load is printed either way.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeVar

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
T = TypeVar("T")


def pin_heap() -> bool:
    """Keep freed memory mapped (glibc only); ``False`` where ``mallopt`` is unavailable."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1))


HEAP_PINNED = pin_heap()


def import_peer(module: str, extra: str) -> ModuleType | None:
    """``module``, or ``None`` after printing why its rows are skipped: not installed, or installed but
    failing to import (a peer's own dependency, e.g. the standard library's ``ssl``, cannot load)."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        print(f"  {module} unavailable ({error}; pip install 'posenc[{extra}]'): skipped")
        return None


def without_native(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` run with posenc's compiled loops switched off (``posenc._native.kernels = None``): posenc's
    pure NumPy/PyTorch code, measured beside the compiled loops in the same process."""
    from posenc import _native

    def pure(*args: object, **kwargs: object) -> T:
        saved, _native.kernels = _native.kernels, None
        try:
            return fn(*args, **kwargs)
        finally:
            _native.kernels = saved

    return pure


def arguments(description: str, *, rounds: int) -> argparse.ArgumentParser:
    """A parser with the options every script shares."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rounds", type=int, default=rounds, help=f"interleaved rounds per block (default {rounds})"
    )
    parser.add_argument(
        "--threads",
        default=f"1,{os.cpu_count() or 1}",
        help="torch thread counts to measure, comma-separated (default: 1 and all cores)",
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=float(os.cpu_count() or 1),
        help="repeat a block measured above this 1-minute load average (default: the core count)",
    )
    parser.add_argument("--attempts", type=int, default=2, help="attempts per block at most (default 2)")
    return parser


def thread_counts(spec: str) -> list[int]:
    return sorted({int(t) for t in spec.split(",") if t.strip()})


def environment() -> str:
    """One paragraph describing the machine and the settings, printed at the top of every script."""
    lines = [
        (
            f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} cores "
            f"({_cpu_model()}), heap pinned: {HEAP_PINNED}"
        ),
        (
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')} "
            f"MKL_NUM_THREADS={os.environ.get('MKL_NUM_THREADS', '(unset)')}; load average at start "
            + "/".join(f"{x:.2f}" for x in os.getloadavg())
        ),
    ]
    versions = []
    for name in ("numpy", "torch"):
        module = sys.modules.get(name)
        if module is not None:
            versions.append(f"{name} {module.__version__}")
    if versions:
        lines.append(", ".join(versions))
    from posenc import _native

    loops = "loaded" if _native.kernels is not None else "not built or switched off (POSENC_NATIVE=0)"
    lines.append(f"posenc compiled loops (posenc._kernels): {loops}")
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


@dataclass
class Result:
    """Medians over rounds: seconds (wall, CPU) and the within-round ratios to the floor."""

    wall: float
    cpu: float
    ratio_wall: float
    ratio_cpu: float


@dataclass
class Block:
    results: dict[str, Result]
    load_before: float
    load_after: float
    attempt: int

    @property
    def load(self) -> float:
        return max(self.load_before, self.load_after)


def measure(
    cases: dict[str, Callable[[], object]], floor: str, *, rounds: int, max_load: float, attempts: int
) -> Block:
    """Time ``cases`` (one of them named ``floor``) in interleaved rounds; repeat while the load is high."""
    best: Block | None = None
    for attempt in range(1, max(1, attempts) + 1):
        block = _measure_once(cases, floor, rounds=rounds, attempt=attempt)
        if best is None or block.load < best.load:
            best = block
        if block.load <= max_load:
            break
        time.sleep(5.0)
    assert best is not None
    return best


def _measure_once(cases: dict[str, Callable[[], object]], floor: str, *, rounds: int, attempt: int) -> Block:
    load_before = os.getloadavg()[0]
    for fn in cases.values():  # warm-up: caches, lazy tables, first-touch of the heap
        fn()
    wall: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases.items())
    for round_ in range(rounds):
        k = round_ % len(order)
        for name, fn in order[k:] + order[:k]:
            c0, w0 = time.process_time(), time.perf_counter()
            fn()
            w1, c1 = time.perf_counter(), time.process_time()
            wall[name].append(w1 - w0)
            cpu[name].append(c1 - c0)
    results = {}
    for name in cases:
        rw = [w / f for w, f in zip(wall[name], wall[floor])]
        rc = [c / f if f > 0 else float("nan") for c, f in zip(cpu[name], cpu[floor])]
        results[name] = Result(
            statistics.median(wall[name]),
            statistics.median(cpu[name]),
            statistics.median(rw),
            statistics.median(rc),
        )
    return Block(results, load_before, os.getloadavg()[0], attempt)


def report(
    title: str, block: Block, *, rounds: int, extra: dict[str, str] | None = None, extra_header: str = ""
) -> None:
    """Print one block: wall and CPU medians, ratios to the floor, and the load it was measured at."""
    print(f"\n{title}")
    print(
        f"  median of {rounds} interleaved rounds; load {block.load_before:.2f} → {block.load_after:.2f}"
        + (f" (attempt {block.attempt})" if block.attempt > 1 else "")
    )
    print(f"  {'case':46s} {'wall ms':>9s} {'CPU ms':>9s} {'÷floor':>7s} {'÷floor':>7s}  {extra_header}")
    print(f"  {'':46s} {'':>9s} {'':>9s} {'(wall)':>7s} {'(CPU)':>7s}")
    for name, r in block.results.items():
        tail = (extra or {}).get(name, "")
        print(
            f"  {name:46s} {r.wall * 1e3:9.3f} {r.cpu * 1e3:9.3f} {r.ratio_wall:7.2f} {r.ratio_cpu:7.2f}  {tail}"
        )
