"""``posenc analyze``, ``posenc figures`` and ``posenc report`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from posenc import analysis, registry
from posenc.cli import main


def test_analyze_json_has_the_stable_keys(capsys):
    assert main(["analyze", "sinusoidal", "--dim", "512", "--length", "16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == {"encoding", "family", "parameters", "values", "notes"}
    assert list(data["values"]) == list(analysis.CRITERIA)
    assert round(data["values"]["largest_period"], 3) == 60611.477
    assert data["parameters"]["dim"] == 512 and data["parameters"]["length"] == 16


def test_analyze_table(capsys):
    assert main(["analyze", "dft", "--dim", "32", "--length", "32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dft (input) at S = 32, d = 32")
    for key in analysis.CRITERIA:
        assert key in out


def test_analyze_unknown_name_lists_known_ones(capsys):
    assert main(["analyze", "sinusodial"]) == 2
    err = capsys.readouterr().err
    assert "unknown encoding 'sinusodial'" in err
    for name in registry.names():
        assert name in err


def test_analyze_bad_size(capsys):
    assert main(["analyze", "sinusoidal", "--dim", "0"]) == 2
    assert "dim must be a positive int, got 0" in capsys.readouterr().err


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_figures_and_report(tmp_path, capsys):
    plots = pytest.importorskip("posenc.plots", reason="matplotlib is needed for the figures")
    assert main(["figures", "--out", str(tmp_path / "figs"), "--format", "png"]) == 0
    written = capsys.readouterr().out.split()
    assert len(written) == len(plots.FIGURES)
    assert all(Path(p).parent == tmp_path / "figs" and Path(p).stat().st_size > 0 for p in written)
    assert main(["report", "--out", str(tmp_path / "rep"), "--dim", "32", "--length", "24"]) == 0
    out = capsys.readouterr().out
    assert "report written to" in out and (tmp_path / "rep" / "report.html").is_file()
