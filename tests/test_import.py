"""``import posenc`` stays light: no torch, no matplotlib (DESIGN "Layers"); checked in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys


def printed(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (it must exit 0)."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_import_posenc_loads_neither_torch_nor_matplotlib():
    code = (
        "import sys, posenc, posenc.spectrum, posenc.tables, posenc.registry\n"
        "posenc.sinusoidal(8, 16); posenc.dft(8, 8)\n"
        "print(sorted(m for m in ('torch', 'matplotlib') if m in sys.modules))\n"
    )
    assert printed(code) == "[]"


def test_torch_modules_are_reachable_from_posenc_nn():
    code = "import posenc.nn as nn; print(nn.SinusoidalEncoding.__module__)"
    assert printed(code) == "posenc.nn.input"


def test_no_module_of_the_library_imports_the_benchmark():
    """Every module of ``posenc`` imported (the GPU kernels where Triton is absent excepted): none pulls
    in ``posenc_bench``. The benchmark reaches posenc's command line through an entry point only."""
    code = (
        "import importlib, pkgutil, sys, posenc\n"
        "for info in pkgutil.walk_packages(posenc.__path__, 'posenc.'):\n"
        "    if info.name.endswith('__main__'):\n"
        "        continue\n"
        "    try:\n"
        "        importlib.import_module(info.name)\n"
        "    except ImportError as exc:\n"
        "        assert 'triton' in str(exc), (info.name, exc)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'posenc_bench'))\n"
    )
    assert printed(code) == "[]"


def test_posenc_bench_is_a_command_of_posenc_through_its_plugin():
    code = "from posenc import plugins; print(sorted(plugins.command_help()))"
    assert "bench" in printed(code)
