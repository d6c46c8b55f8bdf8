"""Training a lengthgen run until a stated in-distribution criterion or its step budget."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from posenc_bench.experiment import lengthgen as lg

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def _parity(
    fit_accuracy: float | None, steps: int = 40, fit_examples: int = 16
) -> tuple[lg.LengthgenConfig, lg.LengthgenPlan]:
    """Rope on parity at L = 4, a fit check every 4 steps: its held-out exact match at L goes
    0.44, 0.44, 0.44, 0.44, 0.62 at steps 4 … 20 (16 examples)."""
    base = lg.LengthgenConfig(task="parity", encoding="rope", seed=0, train_length=4, vocab=8, d_model=16,
                              n_heads=2, n_layers=1, steps=steps, checkpoint_every=4,
                              fit_accuracy=fit_accuracy, fit_examples=fit_examples)  # fmt: skip
    plan = lg.LengthgenPlan(base, tasks=("parity",), encodings=("rope",), seeds=1, n_test=16,
                            test_multiples=(1.0, 2.0))  # fmt: skip
    return base, plan


def _tokens(config: lg.LengthgenConfig, steps: int) -> int:
    """The tokens of the training batches of steps ``0 … steps − 1``."""
    return sum(lg.training_batch(config, s).tokens.size for s in range(steps))


def _log(config: lg.LengthgenConfig, root: Path) -> list[dict[str, str]]:
    with open(config.directory(root) / "log.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_training_stops_at_the_first_check_that_reaches_the_criterion(tmp_path):
    import torch

    config, plan = _parity(0.6)
    metrics = lg.train_run(config, plan, tmp_path, device=torch.device("cpu"))
    assert metrics is not None
    fit = metrics.fit
    assert fit is not None and fit.reached is True and fit.step < config.steps and fit.accuracy >= 0.6
    log = _log(config, tmp_path)
    assert [int(r["step"]) for r in log] == list(range(4, fit.step + 1, 4))  # a check at each
    assert [float(r["fit_accuracy"]) >= 0.6 for r in log] == [False] * (len(log) - 1) + [True]
    assert metrics.train_tokens == _tokens(config, fit.step)  # it trained exactly that far
    stored = json.loads((config.directory(tmp_path) / "config.json").read_text())
    assert stored["fit_accuracy"] == 0.6
    assert not (config.directory(tmp_path) / lg.CHECKPOINT).exists()


def test_a_run_that_never_reaches_the_criterion_uses_its_budget(tmp_path):
    import torch

    config, plan = _parity(1.0, steps=12)
    metrics = lg.train_run(config, plan, tmp_path, device=torch.device("cpu"))
    assert metrics is not None
    assert metrics.to_json()["fit"] == {"accuracy": pytest.approx(0.4375), "step": 12, "reached": False}
    assert metrics.train_tokens == _tokens(config, 12)


def test_an_interrupted_run_with_a_criterion_resumes_to_where_the_uninterrupted_run_stopped(tmp_path):
    """Interrupted at step 10 (checkpoint of step 8), resumed: it stops at step 20 as the whole run does."""
    import torch

    cpu = torch.device("cpu")
    config, plan = _parity(0.6)
    whole = lg.train_run(config, plan, tmp_path / "a", device=cpu)
    assert lg.train_run(config, plan, tmp_path / "b", device=cpu, stop_after=10) is None
    assert (config.directory(tmp_path / "b") / lg.CHECKPOINT).exists()
    resumed = lg.train_run(config, plan, tmp_path / "b", device=cpu)
    assert whole is not None and resumed is not None and whole.fit is not None and whole.fit.step == 20
    for key in ("fit", "accuracy", "final_loss", "train_tokens"):
        assert getattr(resumed, key) == getattr(whole, key), key
    timeless = [[{k: v for k, v in r.items() if k != "tokens_per_s"} for r in _log(config, tmp_path / x)]
                for x in ("a", "b")]  # fmt: skip
    assert timeless[0] == timeless[1]


def test_the_fit_set_is_held_out_from_the_test_set_and_the_training_batches():
    config, plan = _parity(0.6)
    held_out = lg.test_batch(plan, "parity", 0, 4, 0.5, split="fit", examples=config.fit_examples).tokens
    test = lg.test_batch(plan, "parity", 0, 4, 0.5).tokens
    assert held_out.shape == test.shape and not np.array_equal(held_out, test)
    assert not np.array_equal(held_out[:, :5], lg.training_batch(config, 0).tokens[:16, :5])


def test_the_criterion_is_measured_on_fit_examples_held_out_examples(monkeypatch):
    """``fit_accuracy`` scores ``fit_examples`` held-out examples per depth at ``L`` (not the test sets'
    ``n_test``), and the run's test sets keep ``n_test``."""
    import torch

    sizes: list[int] = []

    def spy(model, batch, device, positions=None):
        sizes.append(batch.tokens.shape[0])
        return 0.5

    monkeypatch.setattr(lg, "exact_match", spy)
    config, plan = _parity(0.6, fit_examples=80)
    model = lg.build_model(config)
    assert lg.fit_accuracy(model, config, plan, torch.device("cpu")) == 0.5
    assert sizes == [80] and plan.n_test == 16
    sizes.clear()
    lg.evaluate(model, config, plan, torch.device("cpu"))
    assert sizes == [16] * len(plan.test_lengths("parity"))


def test_a_grid_written_before_fit_examples_is_read_as_measured_on_its_test_sets_size():
    """``lengthgen.json`` of a fit-criterion grid from before the field: its fit sets had ``n_test`` examples."""
    _, plan = _parity(0.6)
    stored = lg._plan_json(plan)
    assert lg.plan_from_json(stored).base.fit_examples == 16
    del stored["base"]["fit_examples"]
    stored["n_test"] = 64
    assert lg.plan_from_json(stored).base.fit_examples == 64
    stored["base"].pop("fit_accuracy")
    assert lg.plan_from_json(stored).base.fit_examples == 256  # no criterion: the default, never used


def test_a_fit_run_written_before_fit_examples_resumes_at_the_test_sets_size_only(tmp_path):
    """A run folder whose ``config.json`` has ``fit_accuracy`` but no ``fit_examples`` (the earlier code) was
    measured on ``n_test`` examples: read back at ``fit_examples = n_test``, refused by name at another."""
    import dataclasses

    import torch

    cpu = torch.device("cpu")
    config, plan = _parity(0.6)  # fit_examples = n_test = 16
    assert lg.train_run(config, plan, tmp_path, device=cpu) is not None
    path = config.directory(tmp_path) / "config.json"
    stored = json.loads(path.read_text())
    del stored["fit_examples"]
    path.write_text(json.dumps(stored))
    again = lg.train_run(config, plan, tmp_path, device=cpu)
    assert again is not None and again.skipped
    other = dataclasses.replace(config, fit_examples=32)
    with pytest.raises(ValueError, match=r"holds a run with different settings \(fit_examples\)"):
        lg.train_run(other, plan, tmp_path, device=cpu)


def test_the_criterion_is_bounded_naming_its_flag():
    for bad in (0.0, 1.5, float("nan"), -0.1):
        with pytest.raises(ValueError, match=r"--fit-accuracy must be a number in \(0, 1\]; got"):
            _parity(bad)
    assert _parity(1.0)[0].fit_accuracy == 1.0


def test_a_run_without_a_criterion_keeps_its_identity():
    """Unset, ``fit_accuracy`` is not in the run's ``config.json``; set, it is (and so retrains)."""
    config, plan = _parity(None)
    assert "fit_accuracy" not in lg.run_identity(config, plan)
    assert "fit_examples" not in lg.run_identity(config, plan)
    assert lg.run_identity(_parity(0.9)[0], plan)["fit_accuracy"] == 0.9
    assert lg.run_identity(_parity(0.9, fit_examples=300)[0], plan)["fit_examples"] == 300
    assert lg.LengthgenConfig(task="copy", encoding="none", seed=0).fit_examples == 256
    with pytest.raises(ValueError, match=r"--fit-examples must be an int in \[1, 1048576\]; got 0"):
        _parity(0.9, fit_examples=0)


#: sha256 (first 16 hex digits) of each committed lengthgen grid's run directories and run identities
#: (``config.json``: the run's settings and its test settings, as sorted JSON): the grids without a fit
#: criterion as written before runs could train to one, the two ``copy-fit`` grids as their runs wrote them.
LENGTHGEN_IDENTITIES = {
    "lengthgen/5tasks-5seeds": "f50bdc7560399466",
    "lengthgen/copy-reverse": "67b77f911da676d1",
    "lengthgen": "e18851452dbfe8f4",
    "lengthgen/passkey-5seeds": "b346c0f2436eb642",
    "lengthgen/passkey-10seeds": "8af386ac2cfe8897",  # these two: equal to the run folders' own config.json
    "lengthgen/copy-10seeds": "e9c3a87461294c41",
    "lengthgen/reverse-10seeds": "0255461a3eda6586",  # equal to its 50 run folders' config.json
    "lengthgen/copy-fit/fit64": "ab4fdfa533f3694d",  # its run folders predate fit_examples: read as 64
    "lengthgen/copy-fit": "ddaf3aa20831cc6e",  # equal to its 25 run folders' config.json (fit_examples 256)
    "lengthgen/randomized/nope3": "d927fd211c24ea60",
    "lengthgen/randomized/rand64": "1c068232c8eee849",
    "lengthgen/randomized/rand64-tested-consecutive": "1c068232c8eee849",
}


@pytest.mark.parametrize(
    "path", sorted(RESULTS.glob("lengthgen/**/lengthgen.json")), ids=lambda p: p.parent.name
)
def test_every_committed_lengthgen_grid_keeps_its_run_identities_and_directories(path):
    """Every run folder of a committed grid must still be found finished (its ``config.json`` equal)."""
    plan = lg.plan_from_json(json.loads(path.read_text(encoding="utf-8"))["plan"])
    configs = plan.configs()
    dirs = sorted(c.directory(Path(".")).as_posix() for c in configs)
    ids = sorted(json.dumps(lg.run_identity(c, plan), sort_keys=True) for c in configs)
    digest = hashlib.sha256("\n".join(dirs + ids).encode()).hexdigest()[:16]
    assert digest == LENGTHGEN_IDENTITIES[path.parent.relative_to(RESULTS).as_posix()]


def test_the_analysis_table_lists_encodings_in_the_plans_order_whatever_the_criteria_dicts_order():
    """A run writes its criteria in the plan's order, a stored ``lengthgen.json`` may hold them sorted; the
    analysis table follows the plan, so a run's ``lengthgen.md`` equals what ``rewrite`` makes of its json."""
    from posenc_bench.experiment import lengthgen_analysis

    stored = json.loads((RESULTS / "lengthgen" / "passkey-10seeds" / "lengthgen.json").read_text())
    plan = lg.plan_from_json(stored["plan"])
    criteria = stored["criteria"]
    shuffled = {t: dict(sorted(per.items(), reverse=True)) for t, per in criteria.items()}
    tables = {"rows": stored["rows"]}
    text = lengthgen_analysis.markdown(plan, tables, shuffled, stored["correlations"])
    listed = [line.split(" | ")[1] for line in text.splitlines() if line.startswith("| passkey | ")]
    assert listed == [e for e in plan.encodings if e != "none"]
    assert text == lengthgen_analysis.markdown(plan, tables, criteria, stored["correlations"])
