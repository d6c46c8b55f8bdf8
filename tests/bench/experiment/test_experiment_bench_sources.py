"""The benchmark's one loop takes any split source and reporter: a user's runs every part, resumably."""

from __future__ import annotations

import dataclasses

from posenc_bench.experiment.bench import Prepared, Report, run_bench
from posenc_bench.experiment.config import BenchPlan
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.runs import METRICS, ClassifyTask, run_dir


class KeepRecords:
    """A reporter that keeps what it was given and writes nothing."""

    def report(self, records, context):
        self.records, self.context = records, context
        return Report(len(records), f"{len(records)} runs", {})


class TwoSubsets:
    """A split source with one split seed and two parts (subsets ``a`` and ``b``) of the same windows."""

    def __init__(self, splits):
        self.splits, self.reporter = splits, KeepRecords()

    def prepare(self, plan):
        data = {(0, "a"): self.splits, (0, "b"): self.splits}
        return Prepared(None, data, ClassifyTask(), self.reporter, ("f1",), ("f1",), ["two subsets"])


def test_a_users_source_runs_every_part_and_resumes(tmp_path, tiny_splits, tiny_config):
    plan = BenchPlan(tiny_config, ("none",), seeds=1, baseline=False, shuffle_control=False)
    source, lines = TwoSubsets(tiny_splits), []
    result = run_bench(plan, out=tmp_path, source=source, progress=False, log=lines.append)
    records = source.reporter.records
    assert result.table == "2 runs" and (result.trained, result.skipped) == (2, 0)
    assert all(isinstance(r, RunRecord) and r.kind == "model" for r in records)
    assert [r.subset for r in records] == ["a", "b"] and lines[0] == "two subsets"
    for r in records:  # each part is its own run directory
        config = dataclasses.replace(tiny_config, encoding="none", subset=r.subset)
        assert (run_dir(tmp_path, config) / METRICS).is_file()
    assert source.reporter.context.meta["runs_trained"] == 2 and "[2/2] none/native b" in lines[-1]
    again = run_bench(plan, out=tmp_path, source=TwoSubsets(tiny_splits), progress=False, log=lines.append)
    assert (again.trained, again.skipped) == (0, 2)
