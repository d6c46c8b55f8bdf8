"""What a result was computed on: CPU model, ATen's CPU kernel set, Python, NumPy and torch versions, platform.

Recorded in every run's ``config.json`` and in a benchmark's metadata, so a re-run
(``posenc bench --verify``) can say whether it ran on the same machine type and software.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np
import torch


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else :func:`platform.processor`), or ``"unknown"``."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def environment() -> dict[str, str | int | None]:
    """``{"cpu", "cpu_capability", "cpu_count", "python", "numpy", "torch", "platform"}`` of this process.

    ``cpu_capability`` is the SIMD kernel set ATen dispatches to (``torch.backends.cpu.get_cpu_capability()``:
    ``"AVX512"``, ``"AVX2"``, ``"DEFAULT"``, …; the CPU's best unless the environment variable
    ``ATEN_CPU_CAPABILITY`` lowers it). Two machines with different kernel sets round some operations
    differently, so a re-run that is not bit-identical can be told apart from one on the same kernels.
    """
    return {
        "cpu": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
