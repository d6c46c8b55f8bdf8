"""What a result was computed on: CPU model, Python, NumPy and torch versions, platform.

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
    """``{"cpu", "cpu_count", "python", "numpy", "torch", "platform"}`` of this process."""
    return {
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "platform": platform.platform(),
    }
