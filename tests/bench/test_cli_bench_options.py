"""``posenc bench --encoding-option``: options reach the encoding module, are recorded per run and
are part of the run's identity; the default output path names the dataset once."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from bench_args import tiny_bench

from posenc.cli import main
from posenc_bench.experiment.config import RunConfig

TINY = [*tiny_bench(), "--no-baseline", "--no-shuffle-control"]


def _configs(root: Path, encoding: str) -> list[dict]:
    found = [json.loads(p.read_text()) for p in (root / "runs").rglob("config.json")]
    return [c for c in found if c["config"]["encoding"] == encoding]


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_options_reach_the_module_and_are_recorded_per_run(tmp_path, capsys):
    args = [
        "bench",
        *TINY,
        "--encodings",
        "rope,t5",
        "--out",
        str(tmp_path),
        "--encoding-option",
        "rope.layout=adjacent",
        "--encoding-option",
        "num_buckets=8",
    ]
    assert main(args) == 0
    (rope,), (t5,) = _configs(tmp_path, "rope"), _configs(tmp_path, "t5")
    assert rope["config"]["encoding_options"] == {"layout": "adjacent"}
    assert t5["config"]["encoding_options"] == {"num_buckets": 8}  # a bare KEY only t5 takes; VALUE as JSON
    assert rope["encoding_options"] == {"layout": "adjacent"} and t5["encoding_options"] == {"num_buckets": 8}
    assert (
        "encoding_options" not in _configs(tmp_path, "sinusoidal")[0]["config"]
    )  # none given: identity unchanged
    capsys.readouterr()
    # other options are another run: a directory of its own, trained, not skipped
    args[args.index("rope.layout=adjacent")] = "rope.layout=half_split"
    assert main(args) == 0
    rope_line = next(line for line in capsys.readouterr().out.splitlines() if "] rope/native" in line)
    assert "skipped" not in rope_line and "| rope | native | 1 |" in (tmp_path / "results.md").read_text()
    layouts = sorted(c["config"]["encoding_options"]["layout"] for c in _configs(tmp_path, "rope"))
    assert layouts == ["adjacent", "half_split"]


@pytest.mark.parametrize(
    "options, message",
    [
        (
            ["--encoding-option", "nope=1"],
            "--encoding-option nope=1: no encoding of none, sinusoidal, rope takes",
        ),
        (
            ["--encoding-option", "rope.nope=1"],
            "encoding 'rope' has no option 'nope'; its options: base, rotary_dim",
        ),
        (["--encoding-option", "alibi.layout=adjacent"], "'alibi' is not among --encodings"),
        (
            ["--encoding-option", "rope.max_len=4"],
            "'max_len' comes from the bench's size flags (--d-model, --heads, --window)",
        ),
        (
            ["--encoding-option", "layout=adjacent"],
            "sinusoidal, rope all take 'layout'; name one as ENCODING.layout",
        ),
        (
            ["--encoding-option", "rope.layout=sideways"],
            "layout must be one of 'adjacent', 'half_split'; got 'sideways'",
        ),
    ],
)
def test_bad_options_fail_before_training(tmp_path, capsys, options, message):
    assert main(["bench", *TINY, "--encodings", "rope", "--out", str(tmp_path), *options]) == 2
    err = capsys.readouterr().err
    assert re.search(re.escape(message), err), err
    assert not (tmp_path / "runs").exists()


def test_an_option_without_a_value_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["bench", *TINY, "--encodings", "rope", "--out", str(tmp_path), "--encoding-option", "layout"])
    assert exit_.value.code == 2
    assert "--encoding-option must be KEY=VALUE, got 'layout'" in capsys.readouterr().err


def test_the_default_output_path_names_the_dataset_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench", *TINY, "--encodings", "sinusoidal"]) == 0
    configs = list((tmp_path / "posenc-bench").rglob("config.json"))
    assert len(configs) == 2  # none and sinusoidal
    for config in configs:
        parts = config.relative_to(tmp_path).parts
        assert parts.count("synthetic") == 1, parts


def test_run_identity_includes_the_options():
    plain, adjacent = (
        RunConfig(encoding="rope"),
        RunConfig(encoding="rope", encoding_options={"layout": "adjacent"}),
    )
    assert plain.encoding_label == "rope" and adjacent.encoding_label == 'rope+layout="adjacent"'
    assert plain.to_dict() != adjacent.to_dict()
    with pytest.raises(ValueError, match="must be a JSON value"):
        RunConfig(encoding="rope", encoding_options={"base": float("nan")})


def test_training_defaults_follow_the_task_and_an_explicit_flag_wins():
    """classify keeps RunConfig's defaults; --task detect gets its own (batch 32, lr 1e-3, patience 3)."""
    import argparse

    from posenc_bench.cli import DETECT_TRAINING, plan_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())

    def training(*argv: str) -> tuple[int, int, float]:
        base = plan_from_args(parser.parse_args(["bench", *argv])).base
        return base.patience, base.batch_size, base.lr

    d = RunConfig()
    assert training() == (d.patience, d.batch_size, d.lr)
    detect = (DETECT_TRAINING["patience"], DETECT_TRAINING["batch_size"], DETECT_TRAINING["lr"])
    assert detect != (d.patience, d.batch_size, d.lr)
    assert training("--task", "detect") == detect
    assert training("--task", "detect", "--batch-size", "8", "--lr", "0.01") == (detect[0], 8, 0.01)
    assert training("--patience", "2") == (2, d.batch_size, d.lr)


@pytest.mark.parametrize("window", ["2", "4"])
def test_classify_takes_windows_no_longer_than_the_detect_horizon(tmp_path, capsys, window):
    """--horizon is a --task detect flag: --task classify with --window <= 4 trains (it was refused)."""
    args = [*TINY, "--encodings", "none", "--out", str(tmp_path)]
    args[args.index("--window") + 1] = window
    assert main(["bench", *args, "--task", "classify"]) == 0
    capsys.readouterr()
    assert "| none | native | 1 |" in (tmp_path / "results.md").read_text()  # the full tables
    assert main(["bench", *args, "--task", "detect"]) == 2
    assert f"--horizon must be < --window, got --horizon 4 with --window {window}" in capsys.readouterr().err


def test_help_texts_are_plain_text_and_name_every_encoding(capsys):
    """bench --help showed reStructuredText quotes and ran two example lines together (a backslash-newline in
    the docstring); analyze --help explained ENCODING by pointing to itself; the README listed 9 of 10 names."""
    import posenc_bench  # noqa: F401 — registers dfstrans_dft, as the posenc command does
    from posenc import registry

    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "Examples::" not in text
    assert re.search(r"--seeds 1 \\\n\s+--encodings dft,dfstrans_dft", text), text
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "see `posenc analyze --help`" not in text
    assert "a registered encoding: " + ", ".join(registry.names()) in text
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    listed = set(
        re.findall(r"'([a-z_0-9]+)'", "\n".join(re.findall(r"available_encodings\(\).*(?:\n.*){2}", readme)))
    )
    assert listed == set(registry.names()), set(registry.names()) ^ listed


def _other_value(item, constraint):
    """A valid value of a run field other than its default, as a flag's text."""
    from posenc_bench.experiment.constraints import Interval, Options

    if isinstance(constraint, Options):
        return next(v for v in constraint.values if v != item.default)
    if isinstance(constraint, Interval):
        return item.default * 2 if constraint.kind is int else item.default / 2
    return "msl"  # the dataset (read only when the runs start)


def test_every_run_flag_comes_from_an_axis_field_and_sets_it():
    """The flags of the run fields are derived from the axes' field metadata: each one exists and sets
    its field (a flag that parsed but set nothing, or set another field, would fail here)."""
    import argparse
    import dataclasses

    from posenc_bench.cli import FLAG_AXES, _flag, plan_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    flagged = [
        (axis, item) for axis in FLAG_AXES for item in dataclasses.fields(axis) if "help" in item.metadata
    ]
    assert len(flagged) >= 20
    default = plan_from_args(parser.parse_args(["bench"])).base
    for axis, item in flagged:
        value = _other_value(item, axis._parameter_constraints[item.name])
        base = plan_from_args(parser.parse_args(["bench", _flag(item), str(value)])).base
        assert getattr(base, item.name) == value != getattr(default, item.name), item.name
