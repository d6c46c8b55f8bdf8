"""``import posenc`` stays light: no torch, no matplotlib (DESIGN "Layers"); checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def test_import_posenc_loads_neither_torch_nor_matplotlib():
    code = (
        "import sys, posenc, posenc.spectrum, posenc.tables, posenc.registry\n"
        "posenc.sinusoidal(8, 16); posenc.dft(8, 8)\n"
        "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_torch_modules_are_reachable_from_posenc_nn():
    code = "import posenc.nn as nn; print(nn.SinusoidalEncoding.__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "posenc.nn.input"
