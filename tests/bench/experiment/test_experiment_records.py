"""Typed run records: a lossless round trip through JSON, and every results file on record still loads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.experiment import records
from posenc_bench.experiment.compare import from_json, markdown, to_json

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"

names = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
metrics = st.dictionaries(
    st.one_of(names, st.builds(lambda m, f: f"{m}:{f}", names, names)), finite, max_size=5
)
counts = st.integers(0, 10**6)


@st.composite
def run_records(draw: st.DrawFn) -> records.RunRecord:
    kind = draw(st.sampled_from(["model", "baseline", "no-skill"]))
    model = kind == "model"
    return records.RunRecord(
        kind,
        draw(counts),
        draw(metrics),
        name=draw(names) if model else draw(st.one_of(st.none(), names) if kind == "baseline" else st.none()),
        scale=draw(names) if model else None,
        seed=draw(counts) if model else None,
        dataset=draw(st.one_of(st.none(), names)),
        subset=draw(st.one_of(st.none(), names)),
        detector=draw(st.one_of(st.none(), names)),
        encoding_options=draw(
            st.one_of(st.none(), st.dictionaries(names, st.one_of(counts, names), max_size=2))
        ),
        val=draw(st.one_of(st.none(), metrics)),
        shuffled_test=draw(st.one_of(st.none(), metrics)),
        threshold=draw(st.one_of(st.none(), finite)),
        test_split=draw(
            st.one_of(
                st.none(), st.builds(records.TestSplit, counts, counts, counts, st.one_of(st.none(), counts))
            )
        ),
        training=draw(
            st.one_of(st.none(), st.builds(records.Training, counts, counts, st.booleans(), finite, finite))
        ),
        score_seconds=draw(st.one_of(st.none(), finite)),
        seconds=draw(st.one_of(st.none(), finite)),
        skipped=draw(st.one_of(st.none(), st.booleans())),
        extra=draw(
            st.dictionaries(st.builds(lambda n: f"x_{n}", names), st.one_of(counts, names), max_size=2)
        ),
    )


@given(run_records())
def test_a_record_survives_json(record):
    text = json.dumps(record.to_json())  # through text: what metrics.json and results.json hold
    assert records.RunRecord.from_json(json.loads(text), kind=record.kind) == record


@given(run_records())
def test_to_json_writes_the_files_keys_and_nothing_twice(record):
    data = record.to_json()
    assert data["split_seed"] == record.split_seed and data["test"] == dict(record.test)
    assert ("encoding" in data) == (record.kind == "model")
    assert ("name" in data) == (record.kind == "baseline" and record.name is not None)
    assert ("test_windows" in data) == (record.test_split is not None)
    assert ("best_epoch" in data) == (record.training is not None)
    assert all((key in data) == (getattr(record, key) is not None) for key in ("seed", "scale", "threshold"))


def test_nan_written_as_null_reads_back_as_nan():
    record = records.RunRecord.from_json(
        {
            "encoding": "none",
            "scale": "native",
            "seed": 0,
            "split_seed": 1,
            "test": {"auprc": None, "f1": 0.5},
        }
    )
    assert math.isnan(record.test["auprc"]) and record.test["f1"] == 0.5 and record.encoding == "none"


@pytest.mark.parametrize(
    "data, kind, message",
    [
        ({"split_seed": 0}, "model", "needs 'split_seed' and 'test'"),
        ({"split_seed": 0, "test": {"f1": "high"}}, "baseline", "metric 'f1' must be a number"),
        ({"split_seed": 0, "test": [0.5]}, "baseline", "'test' must be an object"),
        ({"split_seed": -1, "test": {}}, "no-skill", "split_seed must be an int >= 0"),
        ({"split_seed": 0, "test": {}}, "model", "needs its encoding"),
        ({"split_seed": 0, "test": {}}, "winner", "kind must be one of model, baseline, no-skill"),
    ],
)
def test_a_bad_record_is_refused_naming_the_key(data, kind, message):
    with pytest.raises(ValueError, match=message):
        records.RunRecord.from_json(data, kind=kind)


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*/results.json")), ids=lambda p: p.parent.name)
def test_every_committed_results_file_loads_and_writes_back_what_it_holds(path):
    stored = json.loads(path.read_text(encoding="utf-8"))
    comparison = from_json(path.read_text(encoding="utf-8"))
    assert all(
        isinstance(r, records.RunRecord) for r in comparison.runs + comparison.baseline + comparison.no_skill
    )
    assert len(comparison.runs) == len(stored["runs"]) > 0
    again = json.loads(to_json(comparison))
    for key in ("runs", "baseline", "no_skill"):  # every record written back key for key
        assert again[key] == stored.get(key, []), key
    for key in ("rows", "paired"):  # recomputed as stored (older files lack the later "model" key)
        assert [{k: new[k] for k in old} for new, old in zip(again[key], stored[key])] == stored[key], key
    assert "| encoding |" in markdown(comparison) or "| model |" in markdown(comparison)


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*/probes.json")), ids=lambda p: p.parent.name)
def test_every_committed_probe_run_is_a_record(path):
    runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
    for data in runs:
        record = records.RunRecord.from_json(data)
        assert record.to_json() == data and record.extra == {"k": data["k"]}
        assert record.subset == f"k{data['k']}"


#: sha256 (first 16 hex digits) of each committed grid's run directories and run identities
#: (``RunConfig.to_dict`` as sorted JSON), as written before the run configuration was split into axes.
RUN_IDENTITIES = {
    "msl-detect": "72964add98825836",
    "msl-leaky": "484f32c9729ecdb7",
    "msl-rigour": "d9cd95e277f3c70e",
    "msl-series": "72964add98825836",
    "msl": "d16d44e7d495bfff",
    "synthetic-series": "e6befbc61b7ffe6d",
    "synthetic": "e6befbc61b7ffe6d",
}


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*/results.json")), ids=lambda p: p.parent.name)
def test_every_committed_grid_keeps_its_run_identities_and_directories(path):
    """A run's identity (its config.json) and directory name key it on disk: a refactoring of the
    configuration must leave both as they were for every committed grid, or re-runs would not find them."""
    import hashlib

    from posenc_bench.experiment.config import RunConfig
    from posenc_bench.experiment.runs import run_dir
    from posenc_bench.experiment.verify import plan_of

    results = json.loads(path.read_text(encoding="utf-8"))
    stored = results["meta"]["hyperparameters"]
    written = RunConfig(**stored).to_dict()
    assert {k: written[k] for k in stored} == stored  # older files lack fields added later, nothing else
    assert json.dumps(RunConfig.from_dict(written).to_dict()) == json.dumps(written)
    configs = list(plan_of(results).runs())
    assert len(configs) == len(results["runs"])
    dirs = sorted(str(run_dir(Path("."), c).as_posix()) for c in configs)
    ids = sorted(json.dumps(c.to_dict(), sort_keys=True) for c in configs)
    digest = hashlib.sha256("\n".join(dirs + ids).encode()).hexdigest()[:16]
    assert digest == RUN_IDENTITIES[path.parent.name]


FIXTURE_RUNS = Path(__file__).parent / "fixtures" / "lengthgen-v1" / "runs"


@pytest.mark.parametrize("path", sorted(FIXTURE_RUNS.rglob("metrics.json")), ids=lambda p: p.parts[-3])
def test_a_lengthgen_metrics_file_of_the_earlier_code_is_a_record_and_writes_back_as_it_was(path):
    data = json.loads(path.read_text(encoding="utf-8"))
    record = records.LengthgenRecord.from_json(data)
    assert record.to_json() == data and json.dumps(record.to_json(), sort_keys=True) == json.dumps(
        data, sort_keys=True
    )
    assert record.accuracy["8"] == data["accuracy"]["8"] and record.fit is None and record.scaled is None


@given(
    accuracy=st.dictionaries(st.sampled_from(["4", "8", "16"]), st.floats(0, 1), min_size=1),
    step=st.integers(1, 10**6),
    reached=st.booleans(),
    loss=st.one_of(st.none(), finite),
)
def test_a_lengthgen_record_survives_json(accuracy, step, reached, loss):
    record = records.LengthgenRecord(accuracy, {n: {"0": a} for n, a in accuracy.items()}, loss, 1.5, 640, 426.7,
                                     scaled=accuracy, fit=records.FitReached(0.5, step, reached))  # fmt: skip
    assert records.LengthgenRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"accuracy": None}, "needs accuracy, depths, .*; missing accuracy"),
        ({"accuracy": {"8": "high"}}, "'accuracy' must be an object of name → number"),
        ({"depths": [0.5]}, "'depths' must be an object"),
        ({"fit": {"accuracy": 0.5}}, "'fit' must hold accuracy, step and reached"),
    ],
)
def test_a_bad_lengthgen_record_is_refused_naming_the_key(change, message):
    data = {"accuracy": {"8": 0.5}, "depths": {}, "final_loss": 1.0, "train_seconds": 1.0, "train_tokens": 10,
            "tokens_per_s": 10.0, **change}  # fmt: skip
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(ValueError, match=message):
        records.LengthgenRecord.from_json(data)
