"""Every file the benchmark reads back is read as data, never as code.

Each loader is given a pickle whose ``__reduce__`` runs a shell command that creates a marker file
(what a poisoned ``checkpoint.pt`` or ``.npy`` would do): the loader must refuse it, name the file, and
the marker must not exist afterwards. A run whose file is refused is moved aside and retrains.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import numpy as np
import pytest
import torch

from posenc.cli import main
from posenc.errors import UsageError
from posenc_bench.data.readers import DataFormatError, npz_member, read_npy, read_npz
from posenc_bench.experiment import lengthgen as lg
from posenc_bench.experiment.runs import read_checkpoint

CPU = torch.device("cpu")


class Payload:
    """Unpickling this runs ``touch marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {shlex.quote(str(self.marker))}",))


def _poison(path: Path, marker: Path) -> None:
    """``path`` replaced by a torch file (zip) whose unpickling runs the payload."""
    torch.save({"model": Payload(marker), "step": 1}, path)


def test_the_payload_runs_when_unpickled_unsafely(tmp_path):
    """The payload is live: the tests below would otherwise prove nothing."""
    marker = tmp_path / "marker"
    _poison(tmp_path / "x.pt", marker)
    torch.load(tmp_path / "x.pt", weights_only=False)
    assert marker.exists()


def _config(**kw):
    base = lg.LengthgenConfig(task="parity", encoding="rope", seed=0, train_length=4, vocab=8, d_model=16,
                              n_heads=2, n_layers=1, steps=4, checkpoint_every=2)  # fmt: skip
    base = lg.dataclasses.replace(base, **kw)
    plan = lg.LengthgenPlan(base, tasks=("parity",), encodings=("rope",), seeds=1, n_test=4,
                            test_multiples=(1.0, 2.0))  # fmt: skip
    return base, plan


def test_a_poisoned_lengthgen_checkpoint_is_refused_moved_aside_and_the_run_retrains(tmp_path, capsys):
    base, plan = _config()
    whole = lg.train_run(base, plan, tmp_path / "a", device=CPU)
    assert lg.train_run(base, plan, tmp_path / "b", device=CPU, stop_after=2) is None
    folder = base.directory(tmp_path / "b")
    marker = tmp_path / "marker"
    _poison(folder / "checkpoint.pt", marker)
    capsys.readouterr()
    again = lg.train_run(base, plan, tmp_path / "b", device=CPU)
    assert not marker.exists()
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and str(folder / "checkpoint.pt") in out[0] and "moved aside" in out[0], out
    assert [p.name.startswith("checkpoint.pt.corrupt-") for p in folder.iterdir() if "corrupt" in p.name] == [
        True
    ]
    assert again is not None and whole is not None and again.accuracy == whole.accuracy
    assert again.final_loss == whole.final_loss  # retrained from the start, as the uninterrupted run


TINY = ["bench", "--task", "lengthgen", "--lengthgen-tasks", "parity", "--encodings", "none,rope",
        "--seeds", "1", "--steps", "2", "--train-length", "4", "--vocab", "8", "--d-model", "16", "--heads", "2",
        "--layers", "1", "--n-test", "4", "--test-lengths", "1,2", "--no-progress"]  # fmt: skip


@pytest.mark.parametrize("kind", ["payload", "foreign"])
def test_a_foreign_encoding_file_is_named_moved_aside_and_its_run_retrains(tmp_path, capsys, kind):
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    folder = tmp_path / "runs/lengthgen/parity-L4/rope/seed0"
    marker = tmp_path / "marker"
    if kind == "payload":
        _poison(folder / "encoding.pt", marker)
    else:  # a torch file of another model (a tensor where a state_dict belongs)
        torch.save({"weight": torch.zeros(3)}, folder / "encoding.pt")
    capsys.readouterr()
    before = (folder / "metrics.json").stat().st_mtime_ns
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    assert not marker.exists()
    out = capsys.readouterr().out
    named = [line for line in out.splitlines() if str(folder / "encoding.pt") in line]
    assert len(named) == 1 and "moved aside" in named[0] and "retrains" in named[0], out
    assert any(p.name.startswith("encoding.pt.corrupt-") for p in folder.iterdir())
    assert (folder / "metrics.json").stat().st_mtime_ns != before  # retrained
    state = torch.load(folder / "encoding.pt", weights_only=True)
    assert isinstance(state, dict)  # the run's own encoding again: a third run reads it back
    assert main([*TINY, "--out", str(tmp_path)]) == 0
    assert "moved aside" not in capsys.readouterr().out


def test_trained_decoder_refuses_a_payload_naming_the_file(tmp_path):
    base, plan = _config()
    lg.train_run(base, plan, tmp_path, device=CPU)
    marker = tmp_path / "marker"
    _poison(base.directory(tmp_path) / "encoding.pt", marker)
    with pytest.raises(UsageError, match=r"encoding.pt"):
        lg.trained_decoder(base, tmp_path)
    assert not marker.exists()


def test_a_classify_checkpoint_payload_is_refused(tmp_path):
    marker = tmp_path / "marker"
    _poison(tmp_path / "checkpoint.pt", marker)
    with pytest.raises(UsageError, match=r"checkpoint.pt .*(code|objects)"):
        read_checkpoint(tmp_path / "checkpoint.pt", torch.nn.Linear(2, 2))
    assert not marker.exists()


def test_an_npy_payload_is_refused(tmp_path):
    marker = tmp_path / "marker"
    np.save(tmp_path / "a.npy", np.array([Payload(marker)], dtype=object), allow_pickle=True)
    with pytest.raises(DataFormatError, match="a.npy: object array"):
        read_npy(tmp_path / "a.npy", what="an array")
    assert not marker.exists()


def test_an_npz_payload_member_is_refused(tmp_path):
    marker = tmp_path / "marker"
    np.savez(tmp_path / "a.npz", x=np.array([Payload(marker)], dtype=object))
    archive = read_npz(tmp_path / "a.npz", what="arrays")
    with pytest.raises(DataFormatError, match="a.npz"):
        npz_member(archive, "x", str(tmp_path / "a.npz"))
    assert not marker.exists()
