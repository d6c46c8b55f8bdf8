"""``posenc table`` end to end: summary printed, npy/csv written and reloadable, bad input → exit 2."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc.cli import main


def test_table_npy_round_trip(tmp_path, capsys):
    out = tmp_path / "sub" / "sin.npy"
    assert (
        main(
            ["table", "sinusoidal", "--length", "80", "--dim", "256", "--layout", "split", "--out", str(out)]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "80 positions × 256 dims" in printed and str(out) in printed
    np.testing.assert_array_equal(np.load(out), posenc.sinusoidal(80, 256, layout="split"))


def test_table_csv_round_trip(tmp_path, capsys):
    out = tmp_path / "dft.csv"
    assert main(["table", "dft", "--length", "16", "--dim", "16", "--out", str(out)]) == 0
    assert "row norm: min 1  max 1" in capsys.readouterr().out
    np.testing.assert_array_equal(np.loadtxt(out, delimiter=","), posenc.dft(16, 16))


def test_table_without_out_only_prints(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["table", "sinusoidal", "-S", "4", "-d", "6", "--base", "100"]) == 0
    assert "4 positions × 6 dims" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["table", "rope", "--length", "4", "--dim", "8"], "NAME must be one of sinusoidal, dft.*'rope'"),
        (["table", "dft", "--length", "9", "--dim", "8"], "--length 9 > --dim 8.*--alias"),
        (["table", "sinusoidal", "--length", "4", "--dim", "0"], "--dim must be a positive int, got 0"),
        (["table", "sinusoidal", "--length", "0", "--dim", "8"], "--length must be a positive int, got 0"),
        (
            ["table", "sinusoidal", "--length", "4", "--dim", "8", "--out", "x.txt"],
            "--out must end in .npy or .csv",
        ),
    ],
)
def test_table_bad_input_exits_2_with_message(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("posenc table: error:")
    assert re.search(message, err), err


def test_console_entry_point_as_a_subprocess(tmp_path):
    out = tmp_path / "t.npy"
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "posenc",
            "table",
            "dft",
            "--length",
            "5",
            "--dim",
            "8",
            "--alias",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    np.testing.assert_array_equal(np.load(out), posenc.dft(5, 8))
    bad = subprocess.run(
        [sys.executable, "-m", "posenc", "table", "bogus", "--length", "5", "--dim", "8"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "NAME must be one of" in bad.stderr
