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
    lines = out.read_text().splitlines()
    assert lines[0] == "a0,a1,a2,a3,a4,a5,a6,a7,b1,b2,b3,b4,b5,b6,b7,b0"  # the header names the columns
    np.testing.assert_array_equal(np.loadtxt(out, delimiter=",", skiprows=1), posenc.dft(16, 16))


@pytest.mark.parametrize(
    ("layout", "header"),
    [
        ("interleaved", "sin0,cos0,sin1,cos1,sin2"),
        ("interleaved_cos_first", "cos0,sin0,cos1,sin1,sin2"),
        ("split", "sin0,sin1,sin2,cos0,cos1"),
    ],
)
def test_table_csv_header_names_the_sinusoidal_columns_of_each_layout(tmp_path, capsys, layout, header):
    out = tmp_path / "sin.csv"
    assert main(["table", "sinusoidal", "-S", "6", "-d", "5", "--layout", layout, "--out", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert lines[0] == header and len(lines) == 7
    table = posenc.sinusoidal(6, 5, layout=layout)
    np.testing.assert_array_equal(np.loadtxt(out, delimiter=",", skiprows=1), table)
    sin_col = header.split(",").index("sin1")  # the column named sin1 holds sin(t·w_1)
    w1 = 10000.0 ** (-2 / 5)
    np.testing.assert_allclose(table[:, sin_col], np.sin(np.arange(6) * w1), rtol=0, atol=1e-15)


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
