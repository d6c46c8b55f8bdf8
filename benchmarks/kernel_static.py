"""Compile every Triton kernel of posenc for Hopper (``sm_90a``) on a machine without a GPU and report,
per kernel, dtype, layout and position form: registers, spill bytes (stores / loads), stack frame, the
width of every global load and store, and the device-side assertions compiled in.

Each kernel is compiled through its own launcher in :mod:`posenc._gpu_kernels`, called with CPU tensors
of the benchmark's shapes, so the tiles, compile-time constants and the specialisation of every stride
(divisibility by 16, the value 1) are the ones a CUDA call of those shapes gets. A stand-in driver names
the target (``GPUTarget("cuda", 90, 32)``) and turns each launch into a compile only
(``JITFunction.run(…, warmup=True)``); the ``ptxas`` bundled with the Triton wheel, run with ``-v`` on the
PTX, reports registers and spills; the PTX's ``ld.global``/``st.global`` instructions give every access
width (``v4.b32`` is 16 bytes).

    python benchmarks/kernel_static.py                     # every kernel, dtype and layout
    python benchmarks/kernel_static.py --kernels rotate_qk --dtypes bfloat16,float32 --layouts half_split

Needs Triton (the CPU wheel suffices) and must not run under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

TARGET = ("cuda", 90, 32)
"""Backend, compute capability and warp size of the target: Hopper (H100, H200), compiled as sm_90a."""

DTYPES = ("bfloat16", "float16", "float32", "float64")
LAYOUTS = ("half_split", "adjacent")
WAVE_LAYOUTS = {0: "pairs sin,cos", 1: "pairs cos,sin", 2: "split"}
PREFILL = (4, 32, 8, 4096, 128)
"""``(b, h, h_k, s, d)`` of the prefill shapes: the benchmark's ``(4, 32, 4096, 128)`` queries, GQA keys."""
DECODE = (4, 32, 8, 1, 128)
N_CACHE = 8192

_ACCESS = re.compile(r"\b(ld|st)\.global(?:\.[a-z]+)*?(?:\.v(\d))?\.[bsuf](8|16|32|64)\b")


def ptxas() -> Path | None:
    """The ``ptxas`` bundled with the Triton wheel, or ``None`` where it is absent or does not run."""
    try:
        import triton
    except ImportError:
        return None
    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    try:
        subprocess.run([path, "--version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return path


@dataclass
class Report:
    """What one compiled kernel uses."""

    kernel: str
    case: str
    grid: tuple[int, ...]
    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    loads: Counter[int] = field(default_factory=Counter)
    """Global loads in the PTX by width in bytes."""
    stores: Counter[int] = field(default_factory=Counter)
    asserts: int = 0
    """Device-side assertions compiled in (calls of ``__assertfail`` in the PTX)."""

    def widths(self, counts: Counter[int]) -> str:
        return " ".join(f"{n}×{w}B" for w, n in sorted(counts.items(), reverse=True)) or "-"


def accesses(ptx: str) -> tuple[Counter[int], Counter[int]]:
    """Global loads and stores of ``ptx``, counted by width in bytes (vector length × element bits / 8)."""
    loads: Counter[int] = Counter()
    stores: Counter[int] = Counter()
    for kind, vector, bits in _ACCESS.findall(ptx):
        width = int(vector or 1) * int(bits) // 8
        (loads if kind == "ld" else stores)[width] += 1
    return loads, stores


def resources(ptx: str, assembler: Path) -> dict[str, int]:
    """Registers, spill bytes and stack frame of the one kernel in ``ptx``, as ``ptxas -v`` reports them."""
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "kernel.ptx"
        source.write_text(ptx)
        done = subprocess.run(
            [assembler, "-v", f"--gpu-name=sm_{TARGET[1]}a", source, "-o", Path(tmp) / "kernel.cubin"],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    info = done.stdout + done.stderr
    entry = info[info.index("Compiling entry function") :]
    stack, stores, loads = map(int, re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", entry).groups())  # type: ignore[union-attr]  # fmt: skip
    registers = int(re.search(r"Used (\d+) registers", entry).group(1))  # type: ignore[union-attr]
    return {"registers": registers, "spill_stores": stores, "spill_loads": loads, "stack": stack}


class _StandIn:
    """The driver Triton asks for its target, device and stream: Hopper, with no device behind it."""

    def get_current_target(self) -> Any:
        from triton.backends.compiler import GPUTarget

        return GPUTarget(*TARGET)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


@contextlib.contextmanager
def compile_only() -> Iterator[list[tuple[str, Any, tuple[int, ...]]]]:
    """Within: every kernel launch compiles for :data:`TARGET` and launches nothing; yields the list of
    ``(kernel name, compiled kernel, grid)`` the launches appended."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise RuntimeError("kernel_static compiles the kernels: run it without TRITON_INTERPRET=1")
    from triton.runtime import driver
    from triton.runtime.jit import JITFunction

    compiled: list[tuple[str, Any, tuple[int, ...]]] = []
    functions: list[Any] = []
    run = JITFunction.run

    def compile_run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        functions.append(self)
        kernel = run(self, *args, grid=grid, warmup=True, **kwargs)
        compiled.append((self.fn.__name__, kernel, tuple(grid)))
        return kernel

    previous = driver._active  # None until a real driver was asked for; reset_active() would create one
    driver.set_active(_StandIn())
    JITFunction.run = compile_run  # type: ignore[method-assign]
    try:
        yield compiled
    finally:
        JITFunction.run = run  # type: ignore[method-assign]
        driver._active = previous
        for function in functions:  # their binders hold the stand-in's target: a real launch makes its own
            function.device_caches.clear()


def _rotate(dtype: torch.dtype, layout: str) -> Callable[[Any], None]:
    b, h, _, s, d = PREFILL
    work = torch.float64 if dtype == torch.float64 else torch.float32
    x = torch.empty(b, h, s, d, dtype=dtype)
    c, sn = torch.empty(s, d // 2, dtype=work), torch.empty(s, d // 2, dtype=work)
    return lambda k: k.rotate(x, torch.empty_like(x), c, sn, layout, d, True)


def _rotate_qk(
    dtype: torch.dtype, layout: str, shape: tuple[int, ...], positions: bool
) -> Callable[[Any], None]:
    b, h, h_k, s, d = shape
    work = torch.float64 if dtype == torch.float64 else torch.float32
    q, k = torch.empty(b, h, s, d, dtype=dtype), torch.empty(b, h_k, s, d, dtype=dtype)
    full = torch.empty(N_CACHE, d, dtype=work)  # the module's [n, r] tables, read as pair values
    tables = (
        (full[:, : d // 2], full[:, d // 2 :]) if layout == "half_split" else (full[:, 0::2], full[:, 1::2])
    )
    theta = torch.empty(d // 2 + 1, dtype=torch.float64)
    pos = (torch.zeros(b, s, dtype=torch.long),) * 2 if positions else None
    return lambda kern: kern.rotate_qk(
        q, k, torch.empty_like(q), torch.empty_like(k), pos, (0, 0), tables, theta, layout, d, False
    )


def _waves(dtype: torch.dtype, code: int) -> Callable[[Any], None]:
    n, f = 4096, 64
    rows = 64
    fine = (torch.empty(rows, f, dtype=torch.float64),) * 2
    coarse = (torch.empty(n // rows, f, dtype=torch.float64),) * 2
    return lambda k: k.waves(torch.empty(n, 2 * f, dtype=dtype), fine, coarse, code)


def cases(
    kernels: set[str], dtypes: list[str], layouts: list[str]
) -> Iterator[tuple[str, Callable[[Any], None]]]:
    """``(description, call of a launcher)`` for every kernel × dtype × layout asked for."""
    for name in dtypes:
        dtype = getattr(torch, name)
        for layout in layouts:
            if "rotate" in kernels:
                yield f"{name} {layout} [s, d/2] tables", _rotate(dtype, layout)
            if "rotate_qk" in kernels:
                yield f"{name} {layout} int offsets", _rotate_qk(dtype, layout, PREFILL, False)
                yield f"{name} {layout} [b, s] positions", _rotate_qk(dtype, layout, PREFILL, True)
                yield f"{name} {layout} decode [b, 1] positions", _rotate_qk(dtype, layout, DECODE, True)
        if "waves" in kernels and name != "float64":
            for code, layout in WAVE_LAYOUTS.items():
                yield f"{name} {layout}", _waves(dtype, code)


def measure(kernels: set[str], dtypes: list[str], layouts: list[str]) -> list[Report]:
    """Compile every case and read its resources (``ptxas`` must run: :func:`ptxas`)."""
    assembler = ptxas()
    if assembler is None:
        raise RuntimeError("the ptxas bundled with Triton is absent or does not run on this machine")
    from posenc import _gpu_kernels

    reports = []
    for case, launch in cases(kernels, dtypes, layouts):
        with compile_only() as compiled:
            launch(_gpu_kernels)
        for name, kernel, grid in compiled:
            ptx = kernel.asm["ptx"]
            loads, stores = accesses(ptx)
            asserts = len(re.findall(r"call(?:\.uni)?\s*(?:\(\w*\),\s*)?__assertfail", ptx))
            reports.append(
                Report(
                    name, case, grid, **resources(ptx, assembler), loads=loads, stores=stores, asserts=asserts
                )
            )
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default="rotate,rotate_qk,waves", help="launchers, comma-separated")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    args = parser.parse_args(argv)
    reports = measure(set(args.kernels.split(",")), args.dtypes.split(","), args.layouts.split(","))
    header = (
        f"{'kernel':<24}{'case':<44}{'grid':>9}{'regs':>6}{'spill st/ld':>13}{'stack':>7}  loads | stores"
    )
    print(f"Triton kernels of posenc compiled for sm_{TARGET[1]}a (ptxas -v; widths from the PTX)")
    print(header)
    for r in reports:
        grid = "×".join(map(str, r.grid))
        spills = f"{r.spill_stores}/{r.spill_loads}"
        print(
            f"{r.kernel:<24}{r.case:<44}{grid:>9}{r.registers:>6}{spills:>13}{r.stack:>7}  "
            f"{r.widths(r.loads)} | {r.widths(r.stores)}"
            + (f"  ({r.asserts} device asserts)" if r.asserts else "")
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
