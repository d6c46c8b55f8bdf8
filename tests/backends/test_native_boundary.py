"""The checked boundary of posenc's compiled loops (:mod:`posenc._native`): wrong shapes, strides, dtypes,
sizes, offsets, devices and overlaps are refused with ``ValueError``/``TypeError`` naming the argument,
and no call writes outside its output. The fuzzing runs in a subprocess (``native_fuzz.py``), so that a
crash of the loop fails this test instead of killing the test run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("native")


def test_wrappers_refuse_wrong_arguments_and_never_write_out_of_bounds():
    script = Path(__file__).with_name("native_fuzz.py")
    run = subprocess.run([sys.executable, str(script), "300"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"exit status {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-8000:]}"
    counts = json.loads(run.stdout.strip().splitlines()[-1])
    for loop in (
        "rotate",
        "rotate_qk",
        "slots",
        "expi_rows",
    ):  # both outcomes exercised, or the fuzzing proves little
        assert counts.get(f"{loop} ran", 0) >= 20 and counts.get(f"{loop} refused", 0) >= 20, counts
    assert counts["entry point refused"] == 7, counts
