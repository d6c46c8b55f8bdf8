"""Ordinary user errors on the command line: one line naming the flag, exit status 2, no traceback.

Bugs (a ``TypeError`` from a wrong call, a NumPy broadcast ``ValueError``) keep their traceback;
``posenc --help`` imports no subcommand module (no torch, scipy, matplotlib).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import posenc
from posenc import cli, validate
from posenc.cli import COMMANDS, build_parser, main

TINY = [
    "--dataset",
    "synthetic",
    "--dataset-option",
    "n_series=2",
    "--dataset-option",
    "length=1024",
    "--window",
    "16",
    "--d-model",
    "8",
    "--heads",
    "2",
    "--layers",
    "1",
    "--epochs",
    "1",
    "--seeds",
    "1",
    "--encodings",
    "none",
    "--no-baseline",
    "--no-shuffle-control",
    "--no-progress",
]


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "plain.txt"
    path.write_text("x")
    return path


def test_out_under_a_file_or_naming_the_wrong_kind_is_one_line(capsys, tmp_path, a_file):
    table = ["table", "sinusoidal", "--length", "4", "--dim", "4", "--out"]
    err = _error(capsys, [*table, str(a_file / "t.csv")])
    assert "--out" in err and "which is a file" in err
    assert "existing folder" in _error(capsys, [*table, str(tmp_path)])
    for command in (["report"], ["figures"], ["bench", *TINY]):
        assert "--out" in _error(capsys, [*command, "--out", str(a_file)])
        assert "--out" in _error(capsys, [*command, "--out", str(a_file / "sub")])
    assert not list(tmp_path.glob("*.csv"))


@pytest.mark.parametrize("device", ["foo", "cuda:99", "cpu:x"])
def test_bench_unknown_device_is_one_line(capsys, tmp_path, device):
    err = _error(capsys, ["bench", *TINY, "--out", str(tmp_path), "--device", device])
    assert "--device" in err and not (tmp_path / "runs").exists()


def test_bench_diverging_lr_names_the_flag(capsys, tmp_path):
    err = _error(capsys, ["bench", *TINY, "--out", str(tmp_path), "--lr", "1e6"])
    assert "--lr 1000000.0" in err and "smaller --lr" in err


@pytest.mark.parametrize(
    "argv, what",
    [
        (["analyze", "sinusoidal", "--length", "60000", "--dim", "8"], "--length"),
        (["report", "--out", "OUT", "--length", "60000"], "--length"),
        (["table", "sinusoidal", "--length", "1000000000", "--dim", "64"], "--length"),
    ],
)
def test_requests_that_cannot_fit_in_memory_are_refused_before_allocating(
    capsys, tmp_path, monkeypatch, argv, what
):
    monkeypatch.setattr(validate, "available_memory", lambda: 8 * 2**30)
    err = _error(capsys, [a.replace("OUT", str(tmp_path / "r")) for a in argv])
    assert what in err and "GiB" in err and "8 GiB" in err
    assert not (tmp_path / "r").exists()


def test_dft_table_error_names_the_flags(capsys):
    err = _error(capsys, ["table", "dft", "--length", "10", "--dim", "4"])
    assert "--alias" in err and "--length 10" in err and "alias=True" not in err


def test_bad_dataset_option_type_is_one_line(capsys, tmp_path):
    err = _error(capsys, ["bench", *TINY, "--out", str(tmp_path), "--dataset-option", "n_series=1.5"])
    assert "n_series" in err


def test_bugs_keep_their_traceback(monkeypatch):
    from posenc.cli import table

    def type_bug(args):
        return len(None)  # a TypeError nobody meant

    def broadcast_bug(args):
        return np.ones(3) + np.ones(4)  # a ValueError from inside NumPy

    for bug, kind in ((type_bug, TypeError), (broadcast_bug, ValueError)):
        monkeypatch.setattr(table, "run", bug)
        with pytest.raises(kind):
            main(["table", "sinusoidal", "--length", "4", "--dim", "4"])


def test_usage_errors_are_value_errors_and_public():
    assert issubclass(posenc.UsageError, ValueError)
    with pytest.raises(posenc.UsageError):
        posenc.sinusoidal(-1, 4)
    with pytest.raises(TypeError):
        posenc.sinusoidal(4.0, 4)


def test_help_lists_every_command_without_importing_heavy_modules():
    code = (
        "import sys\nfrom posenc.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('torch', 'scipy', 'matplotlib', 'sklearn', 'posenc_bench.cli', "
        "'posenc.cli.analyze') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    for name in COMMANDS:
        assert name in out


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_command_registers_itself_with_the_listed_help(name):
    parser = build_parser(name)
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices[name].prog == f"{parser.prog} {name}"
    listed = {c.dest: c.help for c in sub._choices_actions}
    assert listed[name] == COMMANDS[name]
    assert {
        m.name for m in __import__("pkgutil").iter_modules(cli.__path__) if not m.name.startswith("_")
    } == set(COMMANDS)


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--batch-size", "0"], "--batch-size must be a positive int"),
        (["--heads", "3"], "--d-model must be divisible by --heads"),
        (["--weight-decay", "nan"], "--weight-decay must be a number in [0, 10]"),
        (["--dropout", "1"], "--dropout must be"),
    ],
)
def test_bench_setting_errors_name_the_flag_typed(capsys, tmp_path, extra, flag):
    assert flag in _error(capsys, ["bench", *TINY, "--out", str(tmp_path), *extra])


def test_unknown_dataset_option_lists_the_loader_options(capsys, tmp_path):
    err = _error(capsys, ["bench", *TINY, "--out", str(tmp_path), "--dataset-option", "colour=1"])
    assert "'colour' is not an option of the synthetic dataset" in err and "n_series" in err


def test_bench_model_too_large_for_memory_is_refused_before_building_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "available_memory", lambda: 8 * 2**30)
    err = _error(capsys, ["bench", *TINY, "--out", str(tmp_path), "--d-model", "100000", "--heads", "2"])
    assert "--d-model 100000" in err and "GiB" in err and not (tmp_path / "runs").exists()
