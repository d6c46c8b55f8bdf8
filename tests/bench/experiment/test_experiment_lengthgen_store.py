"""Lengthgen run folders on disk: folders written by earlier versions of the code are found, not retrained."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

from posenc_bench.experiment import lengthgen as lg
from posenc_bench.experiment.claims import LOCK

CPU = torch.device("cpu")
FIXTURE = Path(__file__).parent / "fixtures" / "lengthgen-v1"
"""``posenc bench --task lengthgen --seeds 1 --steps 20 --lengthgen-tasks passkey --encodings none,rope`` as
written by the code before lengthgen's runs went through the shared run store: two finished run folders
(``config.json``, ``log.csv``, ``metrics.json``) and the tables made of them. Each folder's ``encoding.pt``
held the trained encoding's state, empty for the parameter-free ``none`` and ``rope``
(``torch.save({})``): it is written by :func:`_with_encodings` rather than kept as a binary file."""


def _with_encodings(root: Path) -> None:
    """The ``encoding.pt`` of each run folder of the fixture under ``root``, as that code saved it."""
    for metrics in (root / "runs").rglob("metrics.json"):
        torch.save({}, metrics.parent / lg.ENCODING)


def _untimed(markdown: str) -> str:
    return re.sub(r"this invocation took \d+ s", "this invocation took … s", markdown)


def test_run_folders_of_the_earlier_layout_are_read_back_not_retrained(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    _with_encodings(tmp_path)
    plan = lg.plan_from_json(json.loads((FIXTURE / "lengthgen.json").read_text(encoding="utf-8"))["plan"])
    files = {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    assert len(files) == 8

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run of the earlier layout was trained again")

    monkeypatch.setattr(lg, "training_batch", no_training)
    result = lg.run_lengthgen(plan, out=tmp_path, device=CPU, progress=None)
    for config in plan.configs():
        stored = json.loads((config.directory(tmp_path) / "metrics.json").read_text(encoding="utf-8"))
        record = result.metrics[(config.task, config.encoding, config.seed)]
        assert record.skipped and record.to_json() == stored
    assert {p: p.read_bytes() for p in files} == files  # nothing rewritten, moved or removed
    assert (tmp_path / "lengthgen.csv").read_bytes() == (FIXTURE / "lengthgen.csv").read_bytes()
    made, committed = ((d / "lengthgen.md").read_text(encoding="utf-8") for d in (tmp_path, FIXTURE))
    assert _untimed(made) == _untimed(committed)


def _tiny():
    base = lg.LengthgenConfig(task="parity", encoding="sinusoidal", seed=0, train_length=4, vocab=8, d_model=16,
                              n_heads=2, n_layers=1, steps=4, checkpoint_every=2)  # fmt: skip
    plan = lg.LengthgenPlan(base, tasks=("parity",), encodings=("sinusoidal",), seeds=1, n_test=4,
                            test_multiples=(1.0, 2.0))  # fmt: skip
    return base, plan


def _interrupted(tmp_path):
    base, plan = _tiny()
    whole = lg.train_run(base, plan, tmp_path / "whole", device=CPU)
    assert lg.train_run(base, plan, tmp_path / "cut", device=CPU, stop_after=2) is None
    return base, plan, whole, base.directory(tmp_path / "cut") / lg.CHECKPOINT


def test_a_checkpoint_with_garbled_tensor_bytes_is_caught_by_its_digest(tmp_path, capsys):
    """A lengthgen checkpoint carries the shared run store's SHA-256 digest: changed tensor values that
    torch still loads are caught, moved aside, and the run retrains to the uninterrupted result."""
    base, plan, whole, path = _interrupted(tmp_path)
    state = torch.load(path, weights_only=True)
    assert set(state) >= {"model", "optimiser", "step", "sha256"}
    name = next(iter(state["model"]))
    state["model"][name] = state["model"][name] + 1.0
    torch.save(state, path)
    capsys.readouterr()
    again = lg.train_run(base, plan, path.parents[5], device=CPU)
    out = capsys.readouterr().out
    assert "does not match its SHA-256 digest" in out and "moved aside" in out and "retrains" in out, out
    assert any(p.name.startswith("checkpoint.pt.corrupt-") for p in path.parent.iterdir())
    assert again is not None and whole is not None
    timed = {k: again.to_json()[k] for k in ("train_seconds", "tokens_per_s")}
    assert again.to_json() == {**whole.to_json(), **timed}


def test_a_checkpoint_written_before_digests_still_resumes(tmp_path, monkeypatch):
    """Checkpoints of the earlier layout hold no digest: they resume (the last 2 of 4 steps are trained),
    to the uninterrupted result."""
    base, plan, whole, path = _interrupted(tmp_path)
    state = torch.load(path, weights_only=True)
    del state["sha256"]
    torch.save(state, path)
    steps = []
    batch = lg.training_batch
    monkeypatch.setattr(lg, "training_batch", lambda config, step: steps.append(step) or batch(config, step))
    again = lg.train_run(base, plan, path.parents[5], device=CPU)
    assert again is not None and again.accuracy == whole.accuracy
    assert again.final_loss == whole.final_loss and again.train_tokens == whole.train_tokens
    assert steps == [2, 3]


def test_a_run_of_an_unknown_identity_format_is_refused_not_deleted(tmp_path):
    """A run folder whose ``config.json`` records an identity format this code does not write (a newer
    version's run) is refused by name; its files are left as they are, not deleted to retrain."""
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    _with_encodings(tmp_path)
    plan = lg.plan_from_json(json.loads((FIXTURE / "lengthgen.json").read_text(encoding="utf-8"))["plan"])
    config = plan.configs()[0]
    path = config.directory(tmp_path) / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), "identity_version": 2}))
    files = {p: p.read_bytes() for p in path.parent.iterdir()}
    with pytest.raises(ValueError, match="identity_version 2 of a stored run"):
        lg.train_run(config, plan, tmp_path, device=CPU)
    assert {p: p.read_bytes() for p in path.parent.iterdir() if p.name != LOCK} == files


def _finished(tmp_path):
    """A finished tiny run under ``tmp_path`` and the bytes of its files."""
    base, plan = _tiny()
    first = lg.train_run(base, plan, tmp_path, device=CPU)
    folder = base.directory(tmp_path)
    return base, plan, first, folder, {p.name: p.read_bytes() for p in folder.iterdir() if p.name != LOCK}


def test_a_folder_holding_other_training_settings_is_refused_not_retrained(tmp_path):
    """The shared run store's rule: a folder recording other settings (here ``--steps``) holds another run;
    it is refused by name and left as it is (the earlier lengthgen store deleted it and retrained)."""
    import dataclasses

    base, plan, _, folder, files = _finished(tmp_path)
    longer = dataclasses.replace(base, steps=6)
    with pytest.raises(ValueError, match=r"holds a run with different settings \(steps\); use another --out"):
        lg.train_run(longer, plan, tmp_path, device=CPU)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name != LOCK} == files


def test_other_test_settings_move_the_run_aside_as_stale_and_test_it_again(tmp_path, capsys):
    """Other test lengths are other inputs (as changed data are for classify): the finished run's files are
    moved aside as ``NAME.stale-<time>``, kept, and the run trains and tests again."""
    import dataclasses

    base, plan, first, folder, files = _finished(tmp_path)
    capsys.readouterr()
    wider = dataclasses.replace(plan, test_multiples=(1.0, 3.0))
    again = lg.train_run(base, wider, tmp_path, device=CPU)
    out = capsys.readouterr().out
    assert "the test sets differ from those this run was tested on (test settings" in out, out
    stale = {p.name.split(".stale-")[0]: p.read_bytes() for p in folder.iterdir() if ".stale-" in p.name}
    assert stale == files  # every earlier file kept, under its stale name
    assert again is not None and not again.skipped and set(again.accuracy) == {"4", "12"}
    assert again.final_loss == first.final_loss  # the same training, tested at the new lengths


@pytest.mark.parametrize("name", ["metrics.json", "encoding.pt"])
def test_an_unreadable_output_is_moved_aside_and_the_run_retrains(tmp_path, capsys, name):
    """A finished run's ``metrics.json`` or ``encoding.pt`` that is not what it claims is moved aside as
    corrupt (kept, not overwritten) and the run retrains to the same result."""
    base, plan, first, folder, _ = _finished(tmp_path)
    (folder / name).write_bytes(b"{garbled")
    capsys.readouterr()
    again = lg.train_run(base, plan, tmp_path, device=CPU)
    out = capsys.readouterr().out
    assert str(folder / name) in out and "moved aside" in out and "retrains" in out, out
    assert [p.read_bytes() for p in folder.iterdir() if p.name.startswith(f"{name}.corrupt-")] == [
        b"{garbled"
    ]
    assert again is not None and not again.skipped and again.accuracy == first.accuracy


def test_a_run_without_its_config_is_moved_aside_whole(tmp_path, capsys):
    """Without ``config.json`` nothing else in the folder can be checked: all of it moves aside, as in every
    task's runs, and the run trains afresh."""
    base, plan, first, folder, files = _finished(tmp_path)
    (folder / "config.json").unlink()
    capsys.readouterr()
    again = lg.train_run(base, plan, tmp_path, device=CPU)
    assert "config.json is missing, so the run's other files cannot be checked" in capsys.readouterr().out
    moved = {p.name.split(".corrupt-")[0] for p in folder.iterdir() if ".corrupt-" in p.name}
    assert moved == set(files) - {"config.json"}
    assert again is not None and again.accuracy == first.accuracy


def test_the_grid_runs_each_run_through_the_shared_store(tmp_path, monkeypatch):
    """``run_lengthgen`` trains and reads back every run through :func:`posenc_bench.experiment.runs.execute`
    with a :class:`~posenc_bench.experiment.lengthgen.LengthgenRuns`; a second invocation reads every run back."""
    from posenc_bench.experiment import runs

    _, plan = _tiny()
    kinds = []
    real = runs.execute

    def spy(config, data, **kwargs):
        kinds.append(type(kwargs["task"]).__name__)
        return real(config, data, **kwargs)

    monkeypatch.setattr(lg, "execute", spy)
    first = lg.run_lengthgen(plan, out=tmp_path, device=CPU, progress=None)
    second = lg.run_lengthgen(plan, out=tmp_path, device=CPU, progress=None)
    assert kinds == ["LengthgenRuns"] * 2
    assert [r.skipped for r in first.metrics.values()] == [False]
    assert [r.skipped for r in second.metrics.values()] == [True]
    assert [r.to_json() for r in second.metrics.values()] == [r.to_json() for r in first.metrics.values()]
