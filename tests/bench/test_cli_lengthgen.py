"""``posenc bench --task lengthgen`` end to end: records, resume, tables with the no-skill line, errors."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from posenc.cli import main
from posenc_bench.experiment import lengthgen as lg

TINY = ["bench", "--task", "lengthgen", "--lengthgen-tasks", "passkey,parity", "--encodings", "none,rope,fire",
        "--seeds", "2", "--steps", "6", "--train-length", "4", "--vocab", "8", "--d-model", "16", "--heads", "2",
        "--layers", "1", "--n-test", "4", "--passkey-lengths", "1,2", "--test-lengths", "1,2",
        "--passkey-depths", "0,1", "--no-progress"]  # fmt: skip


def test_runs_records_and_tables(tmp_path, capsys):
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| *no skill (chance)* | 12.5 | 12.5 |" in out  # passkey: 1/8 at each length
    assert "| *no skill (chance)* | 50 | 50 |" in out  # parity
    assert "Paired against `none`" in out and "Paired against `rope`" in out
    runs = sorted((tmp_path / "runs" / "lengthgen").rglob("metrics.json"))
    assert len(runs) == 2 * 3 * 2  # tasks × encodings × seeds
    metrics = json.loads(runs[0].read_text())
    assert set(metrics["accuracy"]) in ({"4", "8"},) and metrics["tokens_per_s"] > 0
    passkey = json.loads((tmp_path / "runs/lengthgen/passkey-L4/fire/seed0/metrics.json").read_text())
    assert set(passkey["depths"]["8"]) == {"0", "1"}
    config = json.loads((tmp_path / "runs/lengthgen/passkey-L4/fire/seed0/config.json").read_text())
    assert config["encoding"] == "fire" and config["steps"] == 6
    table = json.loads((tmp_path / "lengthgen.json").read_text())
    assert {r["reference"] for r in table["paired"]} == {"none", "rope"}
    assert (tmp_path / "lengthgen.png").stat().st_size > 1000
    # a re-run trains nothing: every metrics.json is read back unchanged
    stamps = {p: p.stat().st_mtime_ns for p in runs}
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert capsys.readouterr().out.startswith("resuming: 12 of 12 runs done")  # said before anything else


def test_an_interrupted_run_resumes_to_the_uninterrupted_result(tmp_path):
    base = lg.LengthgenConfig(task="passkey", encoding="alibi", seed=1, train_length=4, vocab=8, d_model=16,
                              n_heads=2, n_layers=1, steps=8, checkpoint_every=2)  # fmt: skip
    plan = lg.LengthgenPlan(base, tasks=("passkey",), encodings=("alibi",), seeds=1, n_test=8,
                            passkey_multiples=(1.0, 2.0), depths=(0.5,))  # fmt: skip
    import torch

    cpu = torch.device("cpu")
    whole = lg.train_run(base, plan, tmp_path / "a", device=cpu)
    assert lg.train_run(base, plan, tmp_path / "b", device=cpu, stop_after=3) is None
    assert (base.directory(tmp_path / "b") / "checkpoint.pt").exists()
    resumed = lg.train_run(base, plan, tmp_path / "b", device=cpu)
    assert whole is not None and resumed is not None
    assert resumed.accuracy == whole.accuracy and resumed.final_loss == whole.final_loss


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--test-lengths", "0.5,1"], "--test-lengths must exceed the training length"),
        (["--lengthgen-tasks", "copy,juggle"], "--lengthgen-tasks: unknown task 'juggle'"),
        (["--lengthgen-tasks", "recall", "--vocab", "4"], "--vocab 4 is too small for task 'recall'"),
        (["--lengthgen-tasks", "mode,count"], "--vocab 8 is too small for task 'count'"),
        (["--passkey-depths", "0,1.5"], "--passkey-depths must lie in [0, 1]"),
        (["--encodings", "none,ropee"], "--encodings: unknown 'ropee'"),
        (["--no-rope-layers", "3"], "--no-rope-layers: [3] outside 0 … 0"),
        (["--random-positions", "5"], "--random-positions 5 must be >="),
        (
            ["--heads", "3"],
            "--encodings none at --d-model 16 --heads 3: d_model=16 must be divisible by n_heads=3",
        ),
    ],
)
def test_bad_input_is_refused_before_training(tmp_path, capsys, extra, message):
    assert main([*TINY, "--out", str(tmp_path), *extra]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--n-test", "0"], "--n-test must be a positive int, got 0"),
        (["--batch-size", "0"], "--batch-size must be a positive int, got 0"),
        (["--lr", "0"], "--lr must be a number in (0, 1e+06]; got 0"),
        (["--seeds", "0"], "--seeds must be an int in [1, 1000]; got 0"),
        (["--random-positions", "0"], "--random-positions must be an int in [1, 1048576]; got 0"),
        (["--lengthgen-tasks", ","], "--lengthgen-tasks: no task; valid: copy"),
        (["--passkey-lengths", "1,x"], "--passkey-lengths must be comma-separated numbers, got '1,x'"),
        (["--no-rope-layers", "0.5"], "--no-rope-layers must be comma-separated integers, got '0.5'"),
        (["--fit-accuracy", "0"], "--fit-accuracy must be a number in (0, 1]; got 0"),
        (["--fit-accuracy", "1.01"], "--fit-accuracy must be a number in (0, 1]; got 1.01"),
        (["--fit-accuracy", "nan"], "--fit-accuracy must be a number in (0, 1]; got nan"),
        (["--fit-accuracy=-inf"], "--fit-accuracy must be a number in (0, 1]; got -inf"),
        (
            ["--fit-accuracy", "0.9", "--fit-examples", "0"],
            "--fit-examples must be an int in [1, 1048576]; got 0",
        ),
        (
            ["--fit-examples", "128"],
            "--fit-examples applies only with --fit-accuracy (the criterion it measures)",
        ),
    ],
)
def test_each_field_set_by_a_flag_is_refused_naming_the_flag(tmp_path, capsys, extra, message):
    assert main([*TINY, "--out", str(tmp_path), *extra]) != 0
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_rope_scaling_reports_a_scaled_accuracy(tmp_path):
    assert main([*TINY, "--out", str(tmp_path), "--encodings", "none,rope", "--lengthgen-tasks", "parity",
                 "--rope-scaling", "yarn"]) == 0  # fmt: skip
    metrics = json.loads((tmp_path / "runs/lengthgen/parity-L4/rope/seed0/metrics.json").read_text())
    assert set(metrics["scaled"]) == {"4", "8"}
    assert "scaled" not in json.loads(
        (tmp_path / "runs/lengthgen/parity-L4/none/seed0/metrics.json").read_text()
    )


def test_criteria_are_rank_correlated_with_accuracy():
    from posenc_bench.experiment import lengthgen_analysis as la

    base = lg.LengthgenConfig(
        task="passkey", encoding="none", seed=0, train_length=4, vocab=8, d_model=16, n_heads=2
    )
    plan = lg.LengthgenPlan(base, tasks=("passkey", "parity"), encodings=("none", "rope", "alibi", "kerple"),
                            seeds=1, passkey_multiples=(1.0, 2.0, 4.0), test_multiples=(2.0, 4.0))  # fmt: skip
    decay = {("passkey", "rope"): 0.9, ("passkey", "alibi"): 0.5, ("passkey", "kerple"): 0.7,
             ("parity", "rope"): 0.2, ("parity", "alibi"): 0.1, ("parity", "kerple"): 0.3}  # fmt: skip
    criteria = {t: {e: {k: (v if k == "long_range_decay" else None) for k in la.CRITERIA}
                    for (t_, e), v in decay.items() if t_ == t} for t in plan.tasks}  # fmt: skip
    # accuracies ranked exactly as the decay at 2L, reversed at 4L: ρ = +1 and −1; `none` has no criteria
    rows = [{"task": t, "encoding": e, "length": 8, "mean": v} for (t, e), v in decay.items()]
    rows += [{"task": t, "encoding": e, "length": 16, "mean": -v} for (t, e), v in decay.items()]
    rows += [{"task": "passkey", "encoding": "none", "length": 8, "mean": 0.9}]
    tables = {"rows": rows}
    table = {r["criterion"] + str(r["multiple"]): r for r in la.rank_correlations(plan, tables, criteria)}
    assert table["long_range_decay2.0"]["rho"] == pytest.approx(1.0)
    assert table["long_range_decay4.0"]["rho"] == pytest.approx(-1.0)
    assert table["long_range_decay2.0"]["pairs"] == 6 and table["value_max2.0"]["pairs"] == 0
    text = la.markdown(plan, tables, criteria, list(table.values()))
    # within each task the decay ranks the 3 encodings exactly: ρ_w = +1, and |ρ_w| = 1 needs both tasks'
    # permutations to be the identity or both reversed: p = 2/36 exactly, by 10 000 random permutations
    assert table["long_range_decay2.0"]["rho_within"] == pytest.approx(1.0)
    assert table["long_range_decay2.0"]["tasks"] == 2
    assert table["long_range_decay2.0"]["p"] == pytest.approx(2 / 36, abs=0.01)
    assert table["long_range_decay2.0"]["p_holm"] == pytest.approx(
        min(1.0, 2 * table["long_range_decay2.0"]["p"])
    )
    assert "| long_range_decay | 2L | 6 | 2 | +1.00 | +1.00 |" in text
    assert "| parity | kerple | 0.3 | — | — | — | 30.0 | -30.0 |" in text


def test_criteria_are_correlated_at_every_length_beyond_l_that_the_grid_tests():
    from posenc_bench.experiment import lengthgen_analysis as la

    base = lg.LengthgenConfig(
        task="copy", encoding="none", seed=0, train_length=8, vocab=8, d_model=16, n_heads=2
    )
    plan = lg.LengthgenPlan(base, tasks=("copy", "reverse"), encodings=("none", "rope", "alibi"), seeds=1,
                            test_multiples=(1.0, 1.25, 1.5))  # fmt: skip
    assert la.lengths_beyond_l(plan) == [10, 12]
    decay = {
        ("copy", "rope"): 0.9,
        ("copy", "alibi"): 0.5,
        ("reverse", "rope"): 0.7,
        ("reverse", "alibi"): 0.2,
    }
    criteria = {t: {e: {k: (v if k == "long_range_decay" else None) for k in la.CRITERIA}
                    for (t_, e), v in decay.items() if t_ == t} for t in plan.tasks}  # fmt: skip
    rows = [{"task": t, "encoding": e, "length": n, "mean": sign * v}
            for (t, e), v in decay.items() for n, sign in ((8, 0.0), (10, 1.0), (12, -1.0))]  # fmt: skip
    table = {(r["criterion"], r["multiple"]): r for r in la.rank_correlations(plan, {"rows": rows}, criteria)}
    assert {m for _, m in table} == {1.25, 1.5}  # L itself is not beyond L
    assert table["long_range_decay", 1.25]["rho"] == pytest.approx(1.0)
    assert table["long_range_decay", 1.5]["rho"] == pytest.approx(-1.0)
    text = la.markdown(plan, {"rows": rows}, criteria, list(table.values()))
    assert "| acc 1.25L | acc 1.5L |" in text and "| long_range_decay | 1.25L | 4 | 0 | +1.00 | — |" in text


def test_the_analysis_measures_each_runs_trained_encoding(tmp_path):
    import torch

    from posenc.nn import build_encoding

    args = [*TINY, "--out", str(tmp_path), "--encodings", "none,fire,kerple", "--lengthgen-tasks", "passkey"]
    assert main(args) == 0
    root = tmp_path / "runs/lengthgen/passkey-L4"
    assert not list(root.rglob("checkpoint.pt"))  # removed when the run ends; encoding.pt is kept
    assert torch.load(root / "none/seed0/encoding.pt", weights_only=True) == {}
    table = json.loads((tmp_path / "lengthgen.json").read_text())
    longest = 8 + 4  # passkey at 2L = 8: filler, marker, key, separator, answer
    for name in ("fire", "kerple"):
        minima, initial = [], []
        for seed in (0, 1):
            state = torch.load(root / name / f"seed{seed}" / "encoding.pt", weights_only=True)
            module = build_encoding(name, d_model=16, n_heads=2, max_len=8)  # 8: passkey tokens at L = 4
            torch.manual_seed(seed)
            fresh = lg.build_model(lg.LengthgenConfig(task="passkey", encoding=name, seed=seed, train_length=4,
                                                      vocab=8, d_model=16, n_heads=2, n_layers=1))  # fmt: skip
            assert fresh.encoder.encoding.state_dict().keys() == state.keys()
            assert any(not torch.equal(v, state[k]) for k, v in fresh.encoder.encoding.state_dict().items())
            module.load_state_dict(state)
            with torch.no_grad():
                initial.append(float(fresh.encoder.encoding.bias(longest, longest).min()))
                minima.append(float(module.bias(longest, longest).double().min()))
        got = table["criteria"]["passkey"][name]["value_min"]
        assert got == pytest.approx(sum(minima) / 2, rel=1e-6) and got != pytest.approx(sum(initial) / 2)
    text = (tmp_path / "lengthgen.md").read_text()
    assert "Criteria of the trained encodings" in text and "| passkey | fire |" in text
    # rope (always run as a reference), fire and kerple on one task at 2L, the only length beyond L here
    assert {(r["multiple"], r["pairs"]) for r in table["correlations"]} == {(2.0, 3)}


def test_nope_layers_and_random_positions_run_from_the_cli(tmp_path):
    args = [*TINY, "--out", str(tmp_path), "--encodings", "none,rope", "--lengthgen-tasks", "parity", "--layers", "2",
            "--no-rope-layers", "0", "--random-positions", "40", "--seeds", "1"]  # fmt: skip
    assert main(args) == 0
    (config,) = (tmp_path / "runs/lengthgen/parity-L4").glob("rope-rand40-nope0/seed0/config.json")
    settings = json.loads(config.read_text())
    assert settings["no_rope_layers"] == [0] and settings["random_positions"] == 40


def test_a_model_trained_on_random_positions_is_tested_on_random_positions(tmp_path, monkeypatch):
    """Ruoss et al.'s code draws positions at every forward pass, evaluation included: tested at 0 … s − 1
    such a model meets gaps it never saw in training."""
    import torch

    base = lg.LengthgenConfig(task="copy", encoding="rope", seed=0, train_length=4, vocab=8, d_model=16,
                              n_heads=2, n_layers=1, steps=4, checkpoint_every=2, random_positions=32)  # fmt: skip
    plan = lg.LengthgenPlan(
        base, tasks=("copy",), encodings=("rope",), seeds=1, n_test=6, test_multiples=(1.0, 2.0)
    )
    added = dataclasses.replace(base, encoding="sinusoidal")  # an input encoding takes one row of positions
    assert lg.train_run(added, plan, tmp_path, device=torch.device("cpu")) is not None
    seen = []
    original = lg.exact_match

    def spy(model, batch, device, positions=None):
        seen.append((batch.tokens.shape, positions))
        return original(model, batch, device, positions)

    monkeypatch.setattr(lg, "exact_match", spy)
    first = lg.train_run(base, plan, tmp_path, device=torch.device("cpu"))
    assert first is not None and len(seen) == 2
    for (b, s), positions in seen:
        assert positions.shape == (b, s - 1) and bool((positions.diff(dim=1) > 0).all())
        assert int(positions.min()) >= 0 and int(positions.max()) < 32
        assert len({tuple(row.tolist()) for row in positions}) > 1  # a fresh draw per example
    # the draws are the seed's: testing again gives the same positions and accuracy
    again = lg.evaluate(lg.trained_decoder(base, tmp_path), base, plan, torch.device("cpu"))
    assert torch.equal(seen[2][1], seen[0][1]) and again["accuracy"] == first.accuracy
    # a run recorded before the test drew positions (its settings lack them) is trained and tested again
    settings_path = base.directory(tmp_path) / "config.json"
    settings = json.loads(settings_path.read_text())
    assert settings["test"]["positions"] == "randomized"
    del settings["test"]["positions"]
    settings_path.write_text(json.dumps(settings))
    seen.clear()
    retrained = lg.train_run(base, plan, tmp_path, device=torch.device("cpu"))
    assert retrained is not None and len(seen) == 2  # trained and tested again: the same result
    assert retrained.accuracy == first.accuracy and retrained.final_loss == first.final_loss
    # without random positions nothing is drawn and the settings are as before
    plain = dataclasses.replace(base, random_positions=None)
    seen.clear()
    lg.train_run(plain, plan, tmp_path, device=torch.device("cpu"))
    assert [p for _, p in seen] == [None, None]
    assert "positions" not in json.loads((plain.directory(tmp_path) / "config.json").read_text())["test"]


def test_random_positions_must_cover_the_longest_test_input_not_the_whole_sequence():
    base = lg.LengthgenConfig(
        task="copy", encoding="none", seed=0, train_length=4, vocab=8, d_model=16, n_heads=2
    )
    longest = lg.data.sequence_length("copy", 8) - 1  # the decoder reads all but the last token
    lg.LengthgenPlan(dataclasses.replace(base, random_positions=longest), tasks=("copy",), encodings=("none",),
                     seeds=1, test_multiples=(1.0, 2.0))  # fmt: skip
    with pytest.raises(ValueError, match=f"must be >= the longest test input \\({longest} tokens\\)"):
        lg.LengthgenPlan(dataclasses.replace(base, random_positions=longest - 1), tasks=("copy",),
                         encodings=("none",), seeds=1, test_multiples=(1.0, 2.0))  # fmt: skip


def test_the_classify_defaults_are_unchanged_and_lengthgen_has_its_own():
    import argparse

    from posenc_bench import lengthgen_cli
    from posenc_bench.cli import plan_from_args, register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    classify = plan_from_args(parser.parse_args(["bench"]))
    assert classify.seeds == 5 and classify.encodings == ("none", "sinusoidal", "rope")
    plan = lengthgen_cli.plan_from_args(parser.parse_args(["bench", "--task", "lengthgen"]))
    assert plan.seeds == 3 and len(plan.encodings) >= 6 and len(plan.tasks) == 3
    assert plan.test_lengths("passkey") == [8, 16, 32, 64] and plan.test_lengths("sort") == [8, 12, 16, 32]


@pytest.mark.slow  # two interpreters importing torch
def test_two_processes_on_one_out_share_the_runs(tmp_path):
    """As for the other tasks, each run is claimed: two processes started at once train every run once
    between them (the other reads it back), and both end with the whole table (both trained all 12
    runs before lengthgen claimed its runs)."""
    import re
    import subprocess
    import sys

    args = [a for a in TINY if a != "--no-progress"]
    command = [sys.executable, "-m", "posenc", *args, "--out", str(tmp_path)]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300)[0] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], outputs
    lines = [re.findall(r"^\[\d+/12\] .*$", out, flags=re.M) for out in outputs]
    assert [len(found) for found in lines] == [12, 12], outputs
    trained = [line for found in lines for line in found if not line.endswith("(read back)")]
    assert len(trained) == 12, outputs
    assert outputs[0].split("| passkey")[1:] == outputs[1].split("| passkey")[1:]  # the same tables


def test_seeds_as_a_range_and_the_tables_floor_and_holm(tmp_path, capsys):
    """``--seeds 1-2`` trains seeds 1 and 2 (run folders ``seed1``, ``seed2``); ``--seeds 0-2`` then trains
    only seed 0. The tables show the trivial-strategy floor beside chance and Holm-adjusted p's."""
    args = [*TINY, "--out", str(tmp_path), "--encodings", "none,rope", "--lengthgen-tasks", "passkey"]
    assert main([*args, "--seeds", "1-2"]) == 0
    folder = tmp_path / "runs/lengthgen/passkey-L4/rope"
    assert sorted(p.name for p in folder.iterdir()) == ["seed1", "seed2"]
    stamp = (folder / "seed1/metrics.json").stat().st_mtime_ns
    table = json.loads((tmp_path / "lengthgen.json").read_text())
    assert table["plan"]["seed_start"] == 1 and table["plan"]["seeds"] == 2
    out = capsys.readouterr().out
    # depths 0 and 1: the token after the first is the key at depth 0, a filler token at depth 1
    floors = {f["length"]: f["accuracy"] for f in table["floor"]}
    assert floors[4] >= 0.5 and "| *trivial strategy* |" in out and "the key at depth 0" in out
    assert "2 seeds (seeds 1–2);" in out
    assert all(t["p_holm"] >= t["p"] for t in table["paired"]) and "Holm" in out
    assert all(t["ci"] == "t, 2 seeds" for t in table["paired"])
    # Holm's floor over the file: m tests times the smallest sign-flip p of 2 seeds (2/2² = 0.5), at most 1
    floor = min(1.0, len(table["paired"]) * 0.5)
    assert f"(so no Holm p here can be below {floor:.3g})" in out
    assert all(t["p_holm"] >= floor for t in table["paired"])
    assert main([*args, "--seeds", "0-2"]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["seed0", "seed1", "seed2"]
    assert (folder / "seed1/metrics.json").stat().st_mtime_ns == stamp


def test_tables_are_remade_from_the_json_alone(tmp_path):
    """:func:`lengthgen.rewrite` re-makes md/csv/json from ``lengthgen.json`` without the run folders:
    the same tables as the run wrote."""
    import shutil

    assert (
        main([*TINY, "--out", str(tmp_path / "a"), "--encodings", "none,rope", "--lengthgen-tasks", "parity"])
        == 0
    )
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a/lengthgen.json", tmp_path / "b/lengthgen.json")
    lg.rewrite(tmp_path / "b")
    for name in ("lengthgen.md", "lengthgen.csv"):
        assert (tmp_path / "b" / name).read_text() == (tmp_path / "a" / name).read_text()
    assert json.loads((tmp_path / "b/lengthgen.json").read_text()) == json.loads(
        (tmp_path / "a/lengthgen.json").read_text()
    )


def test_within_task_permutation_p_matches_full_enumeration():
    """The within-task permutation p against every permutation of each task's accuracies, enumerated."""
    import itertools

    from scipy import stats as sps

    from posenc_bench.experiment import lengthgen_analysis as la

    tasks = ["a"] * 4 + ["b"] * 3
    xs = [0.1, 0.4, 0.2, 0.9, 3.0, 1.0, 2.0]
    ys = [0.5, 0.2, 0.6, 0.1, 0.3, 0.9, 0.4]

    def rho_within(y):
        return np.mean([sps.spearmanr(xs[:4], y[:4]).statistic, sps.spearmanr(xs[4:], y[4:]).statistic])

    observed = rho_within(ys)
    null = [
        rho_within([*pa, *pb])
        for pa in itertools.permutations(ys[:4])
        for pb in itertools.permutations(ys[4:])
    ]
    exact = np.mean(np.abs(null) >= abs(observed) - 1e-12)
    rho, p, used = la.within_task_correlation(tasks, xs, ys, permutations=20_000)
    assert used == 2 and rho == pytest.approx(observed) and p == pytest.approx(exact, abs=0.015)
    # a task whose accuracies do not vary says nothing and is left out
    assert la.within_task_correlation(["a"] * 3, [1.0, 2.0, 3.0], [0.5, 0.5, 0.5]) == (None, None, 0)


def test_runs_that_do_not_fit_at_l_are_marked_and_compared_over_fitted_seeds():
    """Fit at L: exact match at L ≥ 95 %. NoPE's seed 0 reaches 90 % at L: the table marks NoPE † (2/3),
    and rope − NoPE beyond L adds the difference over the 2 seeds where both fit."""
    base = lg.LengthgenConfig(task="parity", encoding="none", seed=0, train_length=4, vocab=8, d_model=16,
                              n_heads=2)  # fmt: skip
    plan = lg.LengthgenPlan(base, tasks=("parity",), encodings=("none", "rope"), seeds=3, n_test=8,
                            test_multiples=(1.0, 2.0))  # fmt: skip
    at = {"none": ([0.90, 1.0, 0.96], [0.5, 0.4, 0.6]), "rope": ([1.0, 1.0, 1.0], [0.9, 0.5, 0.8])}
    rows = [{"task": "parity", "encoding": e, "length": n, "seeds": v, "mean": float(np.mean(v)),
             "std": float(np.std(v, ddof=1))} for e, vs in at.items() for n, v in zip((4, 8), vs, strict=True)]  # fmt: skip
    assert lg.fitted(plan, rows) == {("parity", "none"): [False, True, True], ("parity", "rope"): [True] * 3}
    tests = {(t["encoding"], t["reference"], t["length"]): t for t in lg.paired_tests(plan, rows)}
    beyond = tests["rope", "none", 8]
    assert beyond["fitted_pairs"] == 2 and beyond["diff_fitted"] == pytest.approx(
        np.mean([0.5 - 0.4, 0.8 - 0.6])
    )
    assert beyond["diff"] == pytest.approx(np.mean([0.4, 0.1, 0.2]))
    tables = {"rows": rows, "paired": list(tests.values()), "chance": [], "floor": lg.trivial_floors(plan),
              "train_tokens": 1, "train_seconds": 1.0}  # fmt: skip
    tables["chance"] = [{"task": "parity", "length": n, "accuracy": 0.5} for n in (4, 8)]
    text = lg.markdown(plan, tables, wall_seconds=1.0)
    assert "| none † (2/3 fit at L) |" in text and "| rope | 100.0" in text
    assert "fitted +15.0 (2)" in text


def test_fit_accuracy_trains_each_run_to_the_criterion_and_the_tables_show_the_steps(tmp_path, capsys):
    """``--fit-accuracy 0.5`` with a budget of 6 steps, checked every step: each run's metrics record where
    it stopped; the tables gain a "steps taken" column (and ``rewrite`` re-makes it from the json); the
    † marks use the stated criterion."""
    import re
    import shutil

    tiny = [a for a in TINY if a != "--no-progress"]  # each run's progress line says where it stopped
    args = [*tiny, "--encodings", "none,rope", "--lengthgen-tasks", "parity", "--fit-accuracy", "0.5"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    said = re.findall(
        r"^\[\d/4\] parity (\w+) seed (\d): .*; (fit|not fit) (\S+) at step (\d+)\)$", out, re.M
    )
    table = json.loads((tmp_path / "a/lengthgen.json").read_text())
    assert len(table["fit"]) == 2 * 2  # encodings × seeds
    for run in table["fit"]:
        folder = tmp_path / f"a/runs/lengthgen/parity-L4/{run['encoding']}/seed{run['seed']}"
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics["fit"] == {k: run[k] for k in ("accuracy", "step", "reached")}
        assert run["reached"] == (run["accuracy"] >= 0.5) and 1 <= run["step"] <= 6
        assert run["reached"] or run["step"] == 6
        assert json.loads((folder / "config.json").read_text())["checkpoint_every"] == 1
    assert said == [(r["encoding"], str(r["seed"]), "fit" if r["reached"] else "not fit", f"{r['accuracy']:.2f}",
                     str(r["step"])) for r in table["fit"]]  # fmt: skip
    steps = {e: [r["step"] for r in table["fit"] if r["encoding"] == e] for e in ("none", "rope")}
    reached = {e: sum(r["reached"] for r in table["fit"] if r["encoding"] == e) for e in ("none", "rope")}
    assert "| encoding | n=4 | n=8 | steps taken |" in out and "up to 6 steps" in out
    for e in ("none", "rope"):
        assert f"{', '.join(map(str, steps[e]))} ({reached[e]}/2 reached) |" in out
    assert "exact match at L ≥ 50%" in out and "Steps taken:" in out
    (tmp_path / "b").mkdir()
    shutil.copy(tmp_path / "a/lengthgen.json", tmp_path / "b/lengthgen.json")
    lg.rewrite(tmp_path / "b")
    assert (tmp_path / "b/lengthgen.md").read_text() == (tmp_path / "a/lengthgen.md").read_text()
