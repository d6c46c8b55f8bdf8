"""``posenc bench`` end to end in a subprocess, under faults a test cannot raise in-process: a file-size
limit (``ulimit -f``), and options that would take the process down (``--threads``)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

LENGTHGEN = ["bench", "--task", "lengthgen", "--lengthgen-tasks", "parity", "--encodings", "none,rope",
             "--seeds", "1", "--steps", "2", "--train-length", "4", "--vocab", "8", "--d-model", "16",
             "--heads", "2", "--layers", "1", "--n-test", "4", "--test-lengths", "1,2", "--no-progress"]  # fmt: skip


def _posenc(args: list[str], *, file_limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        if file_limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, resource.RLIM_INFINITY))

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "posenc", *args], capture_output=True, text=True,
                          env=env, preexec_fn=limit, timeout=300)  # fmt: skip


@pytest.mark.slow  # two interpreters importing torch
def test_lengthgen_under_a_file_size_limit_stops_in_one_line_and_resumes(tmp_path: Path) -> None:
    """A checkpoint larger than ``ulimit -f`` (20 KiB) is an OSError naming the file, exit 2 (it was torch's
    RuntimeError traceback); nothing half-written is left, and the same command without the limit finishes."""
    out = tmp_path / "out"
    done = _posenc([*LENGTHGEN, "--out", str(out)], file_limit=20 * 1024)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "checkpoint.pt: File too large" in lines[0] and "ulimit -f" in lines[0], lines
    left = [p.name for p in out.rglob("*") if p.is_file()]
    assert not any(".tmp-" in name for name in left) and "metrics.json" not in left, left
    again = _posenc([*LENGTHGEN, "--out", str(out)])
    assert again.returncode == 0, again.stderr
    assert len(list(out.rglob("metrics.json"))) == 2
