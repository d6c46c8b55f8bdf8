"""The core install is NumPy + SciPy: tables, spectra, the analysis and its CLI run with torch,
scikit-learn, tqdm and matplotlib unimportable; torch-backed parts say which extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

BLOCK = """
import sys
class _Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"torch", "sklearn", "tqdm", "matplotlib"}:
            raise ImportError(f"{name} is not installed (blocked by the test)")
        return None
sys.meta_path.insert(0, _Blocked())
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True, timeout=120)


def test_the_core_works_without_the_extras():
    code = (
        "import posenc, posenc.analysis, posenc.registry\n"
        "from posenc.cli import main\n"
        "posenc.sinusoidal(8, 16); posenc.dft(8, 8)\n"
        "assert main(['analyze', 'sinusoidal', '--dim', '16', '--length', '8']) == 0\n"
        "assert main(['analyze', 'dft', '--dim', '16', '--length', '8', '--json']) == 0\n"
        "assert main(['table', 'sinusoidal', '--length', '4', '--dim', '8']) == 0\n"
        "print('core ok')\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "core ok" in done.stdout


@pytest.mark.parametrize("name", ["rope", "t5"])
def test_an_encoding_whose_view_needs_torch_fails_by_naming_it(name):
    """rope's view is NumPy (it runs); t5's needs its module, and the error names the missing package."""
    done = _run(
        f"from posenc.cli import main\nraise SystemExit(main(['analyze', '{name}', '--dim', '8', '--length', '8']))"
    )
    if name == "rope":
        assert done.returncode == 0, done.stderr[-2000:]
    else:
        assert done.returncode != 0 and "torch" in done.stderr


def test_rope_analysis_refuses_what_rotary_embedding_refuses(capsys):
    """An odd head width cannot be rotated in pairs: analysis and module give the same reason."""
    torch = pytest.importorskip("torch")
    del torch
    from posenc.cli import main
    from posenc.nn import RotaryEmbedding

    with pytest.raises(ValueError) as module_error:
        RotaryEmbedding(7)
    assert main(["analyze", "rope", "--dim", "7"]) == 2
    err = capsys.readouterr().err
    assert str(module_error.value) in err
    assert "head_dim must be even" in err


def test_bench_figures_leave_pyplot_alone(tmp_path):
    code = (
        "import sys, matplotlib\n"
        "backend = dict.__getitem__(matplotlib.rcParams, 'backend')  # raw: reading it must not pick one\n"
        "from posenc_bench.experiment.figures import probe_plot\n"
        f"probe_plot({{'sinusoidal': {{1: 0.5, 2: 0.75}}}}, __import__('pathlib').Path({str(tmp_path / 'p.png')!r}), title='t')\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
        "assert dict.__getitem__(matplotlib.rcParams, 'backend') == backend\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "p.png").stat().st_size > 0
