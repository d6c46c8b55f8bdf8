"""A core-only install (NumPy and SciPy): a command that needs an extra says which, in one line, exit 2.

The missing module is simulated, not uninstalled: a ``sitecustomize`` on ``PYTHONPATH`` puts a finder
first on ``sys.meta_path`` that makes ``import matplotlib`` (or torch) raise ``ModuleNotFoundError``,
as it does where the package is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import posenc

BLOCKER = """
import os, sys

class _Absent:
    blocked = set(os.environ["POSENC_TEST_ABSENT"].split(","))

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _Absent())
"""


def _run_without(tmp_path: Path, absent: str, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    src = str(Path(posenc.__file__).resolve().parents[1])
    path = os.pathsep.join([str(tmp_path), src, os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "POSENC_TEST_ABSENT": absent}
    return subprocess.run(
        [sys.executable, "-m", "posenc", *argv], capture_output=True, text=True, env=env, timeout=120
    )


def test_the_blocker_blocks(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "POSENC_TEST_ABSENT": "matplotlib"}
    done = subprocess.run(
        [sys.executable, "-c", "import matplotlib"], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 1 and "No module named 'matplotlib'" in done.stderr


@pytest.mark.parametrize(
    ("argv", "absent", "extra"),
    [
        (["report", "--out", "{tmp}/report"], "matplotlib", "plots"),
        (["figures", "--out", "{tmp}/figures"], "matplotlib", "plots"),
        (["bench", "--out", "{tmp}/bench"], "torch", "experiment"),
        (["analyze", "cope", "--length", "8", "--dim", "8"], "torch", "torch"),
    ],
)
def test_a_missing_extra_is_named_in_one_line(tmp_path, argv, absent, extra):
    done = _run_without(tmp_path, absent, *(a.format(tmp=tmp_path) for a in argv))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"needs {absent}" in done.stderr and f'pip install "posenc[{extra}]"' in done.stderr


def test_a_missing_module_that_is_no_extra_keeps_its_traceback(tmp_path):
    done = _run_without(tmp_path, "scipy", "analyze", "rope", "--length", "8", "--dim", "8")
    assert done.returncode == 1 and "Traceback" in done.stderr
