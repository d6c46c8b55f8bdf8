"""``posenc bench --verify DIR``: re-runs a written result and reports each run's largest deviation."""

from __future__ import annotations

import json

import pytest
from bench_args import tiny_bench

from posenc.cli import main


@pytest.mark.slow  # trains 3 tiny runs twice
def test_verify_reruns_bit_identically_and_finds_a_changed_number(tmp_path, capsys):
    written = tmp_path / "written"
    assert main(["bench", *tiny_bench(), "--no-shuffle-control", "--out", str(written)]) == 0
    capsys.readouterr()
    config = json.loads(next((written / "runs").rglob("config.json")).read_text())
    assert {"cpu", "numpy", "torch"} <= set(config["environment"])
    # tamper with one written number: the re-run must find exactly that deviation
    results = json.loads((written / "results.json").read_text())
    results["runs"][1]["test"]["auprc"] += 0.25
    (written / "results.json").write_text(json.dumps(results))
    out = tmp_path / "again"
    assert main(["bench", "--verify", str(written), "--no-progress", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    n = len(results["runs"])
    assert f"{n - 1} of {n} runs bit-identical; largest deviation 0.25" in text
    assert "test.auprc" in text and "(the same)." in text
    assert (out / "verify.md").is_file()
    # a folder that already holds runs is refused (they would be reused, not re-run)
    assert main(["bench", "--verify", str(written), "--out", str(out)]) == 2
    assert "already holds runs" in capsys.readouterr().err


def test_verify_refuses_a_folder_without_results(tmp_path, capsys):
    assert main(["bench", "--verify", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "cannot read" in capsys.readouterr().err
