"""``posenc bench --verify DIR``: re-runs a written result and reports each run's largest deviation."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from bench_args import tiny_bench

from posenc.cli import main
from posenc_bench.experiment.environment import environment
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.verify import Deviation, deviation, report


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


def test_environment_records_the_kernel_set_aten_dispatches_to():
    # ATEN_CPU_CAPABILITY lowers the kernel set; the record must name the one in use, not the CPU's best
    code = (
        "from posenc_bench.experiment.environment import environment; print(environment()['cpu_capability'])"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "DEFAULT"


def test_verify_report_names_a_kernel_set_mismatch_and_an_unrecorded_one():
    now = environment()
    other = "DEFAULT" if now["cpu_capability"] != "DEFAULT" else "AVX2"
    run = [Deviation("rope/native split 0 seed 0", 0.07, "test.auprc", 5)]
    text = report(run, {**now, "cpu_capability": other})
    assert f"Written on: cpu {now['cpu']}, cpu_capability {other}," in text
    assert f"Re-run on: cpu {now['cpu']}, cpu_capability {now['cpu_capability']}," in text
    assert "(differs in cpu_capability)." in text
    older = {k: v for k, v in now.items() if k != "cpu_capability"}  # a record written before the field
    text = report(run, older)
    assert "cpu_capability not recorded" in text and "(the same)." in text


def test_a_threshold_moved_by_one_rounding_is_not_bit_identical():
    # AUPRC and F1 depend on the ranks and decisions only; the threshold is the model's score itself
    written = RunRecord(
        "model",
        0,
        {"auprc": 0.5, "f1": 0.6},
        name="none",
        scale="native",
        seed=1,
        val={"auprc": 0.4},
        threshold=0.3,
    )
    assert deviation(written, written).identical
    moved = dataclasses.replace(written, threshold=0.3 + 1.5e-8)
    d = deviation(written, moved)
    assert not d.identical and d.metric == "threshold" and d.largest == pytest.approx(1.5e-8, rel=1e-6)
    d = deviation(written, dataclasses.replace(written, val={"auprc": 0.41}))
    assert d.metric == "val.auprc" and d.largest == pytest.approx(0.01)


WRITTEN = Path(__file__).resolve().parents[2] / "docs" / "results" / "synthetic" / "results.json"


def _without(key):
    def damage(results):
        del results["meta"][key]
        return results

    return damage


def _set(key, value):
    def damage(results):
        results["meta"][key] = value
        return results

    return damage


@pytest.mark.parametrize(
    "damage, message",
    [
        (os.urandom(256), r"results.json: not UTF-8 JSON"),
        (b'{"meta": ', r"results.json: not UTF-8 JSON"),
        (lambda r: [1, 2], r"results.json: holds a JSON list, not an object"),
        (_without("encodings"), r"results.json: meta.encodings is missing"),
        (_set("seeds", "abc"), r"results.json: meta.seeds must be a positive int, got 'abc'"),
        (_set("seeds", 0), r"results.json: meta.seeds must be a positive int, got 0"),
        (_set("encodings", 5), r"results.json: meta.encodings must be a list of names, got 5"),
        (_set("encodings", ["none", "sinusoidal", "ropee"]), r"results.json: .*unknown encoding 'ropee'"),
        (_set("hyperparameters", {"window": -3}), r"results.json: meta.hyperparameters: .*window"),
        (lambda r: {**r, "runs": {"a": 1}}, r"results.json: runs must be a list of run records"),
        (lambda r: {**r, "runs": [{"encoding": "rope"}]}, r"results.json: runs\[0\] is not a run record"),
    ],
)
def test_verify_names_a_damaged_results_file_in_one_line(tmp_path, capsys, damage, message):
    """Random bytes gave a UnicodeDecodeError traceback, a meta without encodings a KeyError, seeds "abc"
    a ValueError from int(): each is now one line naming the file and what is wrong, exit 2."""
    written = tmp_path / "written"
    written.mkdir()
    if isinstance(damage, bytes):
        data = damage
    else:
        data = json.dumps(damage(json.loads(WRITTEN.read_text()))).encode()
    (written / "results.json").write_bytes(data)
    assert main(["bench", "--verify", str(written), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(message, err[0]) and str(written / "results.json") in err[0], err
    assert not (tmp_path / "o" / "runs").exists()
