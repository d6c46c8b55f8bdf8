"""Command-line start-up time, as a ratio to ``python -c "import numpy"``.

    python benchmarks/bench_startup.py [--rounds 15]

Each row is a fresh interpreter (``subprocess.run``), started in interleaved rounds; wall time
of the whole process, and its CPU time (user + system, from ``resource.getrusage`` of the
children). The floor is ``python -c "import numpy"``; the target is ≤ 3× for ``posenc --help``
and ``posenc table``. Also listed: what ``import posenc`` pulls in beyond NumPy
(``python -X importtime``; torch, scipy or matplotlib there would be a regression).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

import _harness  # the same conditions line as the other scripts

COMMANDS = {
    "floor: python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
    "python -c 'import posenc'": [sys.executable, "-c", "import posenc"],
    "posenc --help": [sys.executable, "-m", "posenc", "--help"],
    "posenc table sinusoidal -S 8 --dim 16": [
        sys.executable,
        "-m",
        "posenc",
        "table",
        "sinusoidal",
        "--length",
        "8",
        "--dim",
        "16",
    ],
    "posenc bench --help": [sys.executable, "-m", "posenc", "bench", "--help"],
}
HEAVY = ("torch", "scipy", "matplotlib", "sklearn", "pandas")


def run_once(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heavy_imports(argv: list[str]) -> list[str]:
    """Top-level packages among :data:`HEAVY` that the command imports."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True)
    names = {
        line.rsplit("|", 1)[-1].strip().split(".")[0] for line in proc.stderr.splitlines() if "|" in line
    }
    return sorted(names & set(HEAVY))


def main() -> None:
    args = _harness.arguments(__doc__, rounds=15).parse_args()
    print(_harness.environment())
    load_before = os.getloadavg()[0]
    wall: dict[str, list[float]] = {name: [] for name in COMMANDS}
    cpu: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():
        run_once(argv)  # warm the file cache
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            w, c = run_once(argv)
            wall[name].append(w)
            cpu[name].append(c)
    floor = next(iter(COMMANDS))
    print(f"\nmedian of {args.rounds} interleaved rounds; load {load_before:.2f} → {os.getloadavg()[0]:.2f}")
    print(f"  {'command':40s} {'wall ms':>8s} {'CPU ms':>8s} {'÷floor':>7s} {'÷floor':>7s}  heavy imports")
    print(f"  {'':40s} {'':>8s} {'':>8s} {'(wall)':>7s} {'(CPU)':>7s}")
    for name, argv in COMMANDS.items():
        rw = statistics.median(w / f for w, f in zip(wall[name], wall[floor]))
        rc = statistics.median(c / f for c, f in zip(cpu[name], cpu[floor]))
        heavy = ", ".join(heavy_imports(argv)) or "none"
        print(
            f"  {name:40s} {statistics.median(wall[name]) * 1e3:8.1f} {statistics.median(cpu[name]) * 1e3:8.1f} "
            f"{rw:7.2f} {rc:7.2f}  {heavy}"
        )


if __name__ == "__main__":
    main()
