"""Lengthgen run folders on disk: folders written by earlier versions of the code are found, not retrained."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

from posenc_bench.experiment import lengthgen as lg

CPU = torch.device("cpu")
FIXTURE = Path(__file__).parent / "fixtures" / "lengthgen-v1"
"""``posenc bench --task lengthgen --seeds 1 --steps 20 --lengthgen-tasks passkey --encodings none,rope`` as
written by the code before lengthgen's runs went through the shared run store: two finished run folders
(``config.json``, ``log.csv``, ``metrics.json``, ``encoding.pt``) and the tables made of them."""


def _untimed(markdown: str) -> str:
    return re.sub(r"this invocation took \d+ s", "this invocation took … s", markdown)


def test_run_folders_of_the_earlier_layout_are_read_back_not_retrained(tmp_path, monkeypatch):
    shutil.copytree(FIXTURE, tmp_path, dirs_exist_ok=True)
    plan = lg.plan_from_json(json.loads((FIXTURE / "lengthgen.json").read_text(encoding="utf-8"))["plan"])
    files = {p: p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file()}
    assert len(files) == 8

    def no_training(*args, **kwargs):
        raise AssertionError("a finished run of the earlier layout was trained again")

    monkeypatch.setattr(lg, "training_batch", no_training)
    result = lg.run_lengthgen(plan, out=tmp_path, device=CPU, progress=None)
    for config in plan.configs():
        stored = json.loads((config.directory(tmp_path) / "metrics.json").read_text(encoding="utf-8"))
        assert result.metrics[(config.task, config.encoding, config.seed)] == stored
    assert {p: p.read_bytes() for p in files} == files  # nothing rewritten, moved or removed
    assert (tmp_path / "lengthgen.csv").read_bytes() == (FIXTURE / "lengthgen.csv").read_bytes()
    made, committed = ((d / "lengthgen.md").read_text(encoding="utf-8") for d in (tmp_path, FIXTURE))
    assert _untimed(made) == _untimed(committed)
