"""Results that cannot drift: every interval and every ``mean ± std`` a results README quotes is one
that a committed table of its folder (``*.md`` beside it or below it, or in a folder it links to)
holds, at the README's rounding; a ``mean ± std`` may also come from the folder's committed CSV (two
adjacent columns), from the per-seed values of a committed study file (a JSON object keyed
``task/encoding/seed``, as the randomized-positions study writes), or from the other numbers of its own
table row."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"

NUMBER = r"[+\-−]?\d+(?:\.\d+)?"
INTERVAL = re.compile(rf"\[({NUMBER}),\s+({NUMBER})\]")
PLUS_MINUS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?) ± (\d+(?:\.\d+)?)")
SCALES = (1.0, 100.0)
"""A README may quote a fraction of a table as points (%)."""


def _value(text: str) -> float:
    return float(text.replace("−", "-"))


def _decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def _pairs(pattern: re.Pattern[str], text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in pattern.finditer(text)]


def _rounds_to(quoted: str, value: float) -> bool:
    """Whether ``value`` written at ``quoted``'s decimals gives ``quoted`` (±0 and rounding either way at a
    half: the table may hold more digits than it prints)."""
    return abs(value - _value(quoted)) <= 0.5 * 10.0 ** -_decimals(quoted) + 1e-9


def _held(quoted: tuple[str, str], table: list[tuple[float, float]]) -> bool:
    return any(
        _rounds_to(quoted[0], s * a) and _rounds_to(quoted[1], s * b) for a, b in table for s in SCALES
    )


SEEDED = re.compile(r"^(.+)/(\d+)$")


def _leaves(value: object, path: str = "") -> dict[str, float]:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _leaves(item, f"{path}/{key}").items()}
    return {path: float(value)} if isinstance(value, int | float) and not isinstance(value, bool) else {}


def seed_summaries(path: Path) -> list[tuple[float, float]]:
    """``(mean, std)`` (``ddof=1``) over seeds of every number of a JSON object keyed ``…/<seed>``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not data or not all(SEEDED.match(k) for k in data):
        return []
    groups: dict[tuple[str, str], list[float]] = {}
    for key, entry in data.items():
        match = SEEDED.match(key)
        assert match is not None
        for leaf, v in _leaves(entry).items():
            groups.setdefault((match.group(1), leaf), []).append(v)
    return [(float(np.mean(v)), float(np.std(v, ddof=1))) for v in groups.values() if len(v) > 1]


LINK = re.compile(r"\]\(([^)#\s]+)")


def cited_tables(readme: Path) -> list[Path]:
    """The tables a README may quote: every ``*.md`` of its folder and below, and of each folder or file
    it links to (``[…](../copy-reverse/README.md)`` cites that folder's tables)."""
    folders = {readme.parent.resolve()}
    files = set()
    for target in LINK.findall(readme.read_text(encoding="utf-8")):
        path = (readme.parent / target).resolve()
        if path.is_dir() or path.name == "README.md":
            folders.add(path if path.is_dir() else path.parent)
        elif path.suffix == ".md" and path.is_file():
            files.add(path)
    files |= {p for f in folders for p in f.rglob("*.md") if p.name != "README.md"}
    return sorted(files)


def row_summaries(text: str) -> list[tuple[float, float]]:
    """``(mean, std)`` (``ddof=1``) of the other numbers of each Markdown table row that quotes a
    ``mean ± std`` (a README row listing per-fold values and their summary)."""
    out = []
    for line in text.splitlines():
        if line.startswith("|") and " ± " in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            values = [float(c) for c in cells if re.fullmatch(r"-?\d+(?:\.\d+)?", c)]
            if len(values) > 1:
                out.append((float(np.mean(values)), float(np.std(values, ddof=1))))
    return out


def csv_pairs(path: Path) -> list[tuple[float, float]]:
    """Every two adjacent numeric cells of a committed CSV (``mean, std`` columns)."""
    out = []
    for row in csv.reader(path.read_text(encoding="utf-8").splitlines()):
        for a, b in zip(row, row[1:], strict=False):
            try:
                out.append((float(a), float(b)))
            except ValueError:
                continue
    return out


def missing(readme: Path) -> dict[str, list[str]]:
    """The intervals and ``mean ± std`` pairs of ``readme`` that no table of its folder holds."""
    folder = readme.parent
    tables = "\n".join(p.read_text(encoding="utf-8") for p in cited_tables(readme))
    text = readme.read_text(encoding="utf-8")
    studies = [pair for p in folder.glob("*.json") for pair in seed_summaries(p)]
    studies += [pair for p in folder.glob("*.csv") for pair in csv_pairs(p)] + row_summaries(text)
    out = {}
    for name, pattern in (("interval", INTERVAL), ("mean ± std", PLUS_MINUS)):
        table = [(_value(a), _value(b)) for a, b in _pairs(pattern, tables)]
        table += studies if pattern is PLUS_MINUS else []
        out[name] = [f"{a}, {b}" for a, b in _pairs(pattern, text) if not _held((a, b), table)]
    return out


def test_the_matcher_finds_rounded_and_scaled_quotes(tmp_path):
    (tmp_path / "t.md").write_text("| x | +0.0688 [+0.0662, +0.0709] | 0.906 ± 0.023 |\n")
    readme = tmp_path / "README.md"
    readme.write_text("alibi +6.9 [+6.6, +7.1] points; 90.6 ± 2.3 %; old [+0.4, +8.6]; 90.6 ± 2.4\n")
    assert missing(readme) == {"interval": ["+0.4, +8.6"], "mean ± std": ["90.6, 2.4"]}
    (tmp_path / "study.json").write_text('{"copy/rope/0": {"8": 0.5}, "copy/rope/1": {"8": 0.7}}')
    readme.write_text("rope 60.0 ± 14.1, 60.0 ± 14.2\n")  # mean 0.6, std 0.1414 over the two seeds
    assert missing(readme)["mean ± std"] == ["60.0, 14.2"]
    readme.write_text("| fold values | 0.5 | 0.7 | 0.600 ± 0.141 |\n| again | 0.5 | 0.7 | 0.600 ± 0.150 |\n")
    assert missing(readme)["mean ± std"] == ["0.600, 0.150"]  # a row's own values give its mean ± std


CHECKED = sorted(p.relative_to(RESULTS).as_posix() for p in RESULTS.rglob("README.md"))


@pytest.mark.parametrize("readme", CHECKED)
def test_every_quoted_interval_is_in_a_committed_table(readme):
    assert missing(RESULTS / readme) == {"interval": [], "mean ± std": []}


RESULTS_JSON = sorted(p.relative_to(RESULTS).as_posix() for p in RESULTS.glob("*/results*.json"))
LENGTHGEN_JSON = sorted(
    p.relative_to(RESULTS).as_posix() for p in RESULTS.glob("lengthgen/**/lengthgen.json")
)


@pytest.mark.parametrize("path", RESULTS_JSON)
def test_every_committed_results_table_is_what_its_json_makes(path):
    """``results.md`` is :func:`~posenc_bench.experiment.compare.markdown` of its own ``results.json``:
    the table a README quotes cannot drift from the records it was made from."""
    from posenc_bench.experiment.compare import from_json, markdown

    json_path = RESULTS / path
    made = markdown(from_json(json_path.read_text(encoding="utf-8")))
    assert made == json_path.with_suffix(".md").read_text(encoding="utf-8")


@pytest.mark.slow  # each re-generates the test sets of its grid for the trivial-strategy floors
@pytest.mark.parametrize("path", LENGTHGEN_JSON)
def test_every_committed_lengthgen_table_is_what_its_json_makes(path, tmp_path):
    """``lengthgen.md`` and ``.json`` are what :func:`~posenc_bench.experiment.lengthgen.rewrite` makes of
    the committed ``lengthgen.json`` (its per-seed accuracies and criteria), byte for byte."""
    import shutil

    from posenc_bench.experiment import lengthgen

    committed = (RESULTS / path).parent
    shutil.copy(committed / "lengthgen.json", tmp_path / "lengthgen.json")
    lengthgen.rewrite(tmp_path)
    for name in ("lengthgen.md", "lengthgen.json", "lengthgen.csv"):
        assert (tmp_path / name).read_bytes() == (committed / name).read_bytes(), name


def _dfstrans_summarise():
    """``docs/results/dfstrans/summarise.py`` (a results script, not a package module)."""
    spec = importlib.util.spec_from_file_location("dfstrans_summarise", RESULTS / "dfstrans" / "summarise.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dfstrans_csvs(summarise):
    return [summarise.read_csv(path) for path in (summarise.RUNS, summarise.SPLITS, summarise.BASELINES)]


def test_the_dfstrans_tables_are_what_its_committed_csvs_make():
    """``tables.md`` is made from ``runs.csv``, ``splits.csv`` and ``baselines.csv`` alone: Student t CIs over
    the splits, Holm beside both p-values, the baselines and the flag-all line from each split's prevalence."""
    summarise = _dfstrans_summarise()
    made = summarise.tables(*_dfstrans_csvs(summarise))
    assert made == summarise.TABLES.read_text(encoding="utf-8")
    assert made.count("(baseline) |") == 8  # four baselines under each protocol


def test_the_dfstrans_tables_refuse_runs_of_other_splits():
    summarise = _dfstrans_summarise()
    runs, splits, baselines = _dfstrans_csvs(summarise)
    changed = [{**runs[0], "test_events": runs[0]["test_events"] + 1}, *runs[1:]]
    with pytest.raises(ValueError, match=r"split 0 seed 0 of protocol dfstrans has test events 12"):
        summarise.tables(changed, splits, baselines)
    with pytest.raises(
        ValueError, match=r"baselines.csv has splits of protocol blocked that splits.csv does not"
    ):
        summarise.tables(runs, splits, [*baselines, {**baselines[-1], "split_seed": 7}])


def test_the_dfstrans_runs_csv_rows_come_from_the_run_folders(tmp_path):
    """``summarise.py runs``: one row per finished run, its test metrics, its protocol (``config.json``) and
    the added encoding's row norm at the first and last epoch (``log.csv``); read back as ``runs.csv`` is."""
    summarise = _dfstrans_summarise()
    run = tmp_path / "out" / "runs" / "spatiotemporal" / "sinusoidal-native" / "split2-seed3"
    run.mkdir(parents=True)
    metrics = {"encoding": "sinusoidal", "scale": "native", "split_seed": 2, "seed": 3, "threshold": 0.5,
               "best_epoch": 4, "epochs_run": 7, "train_seconds": 9.5, "windows_per_s": 120.0, "test_events": 11,
               "test_events_in_train": 9, "test": {"f1": 0.25, "precision": 0.2, "recall": 1 / 3, "auprc": 0.3}}  # fmt: skip
    (run / "metrics.json").write_text(json.dumps(metrics))
    (run / "config.json").write_text(json.dumps({"config": {"protocol": "dfstrans"}}))
    (run / "log.csv").write_text("epoch,encoding_row_norm\n1,2.5\n2,2.25\n3,0.125\n")
    rows = summarise.read_runs([tmp_path / "out"])
    assert rows == [{**{k: v for k, v in metrics.items() if k != "test"}, **metrics["test"], "protocol": "dfstrans",
                     "row_norm_first": 2.5, "row_norm_last": 0.125}]  # fmt: skip
    (tmp_path / "runs.csv").write_text(summarise.csv_rows(rows, summarise.RUN_FIELDS))
    assert summarise.read_csv(tmp_path / "runs.csv") == rows
    baseline = tmp_path / "out" / "baselines" / "msl-dfstrans" / "hgb-summary" / "split2"
    baseline.mkdir(parents=True)
    record = {"name": "hgb-summary", "split_seed": 2, "test": {**metrics["test"], "threshold": 0.4}}
    (baseline / "record.json").write_text(
        json.dumps({"key": {"settings": {"protocol": "dfstrans"}}, "record": record})
    )
    assert summarise.read_baselines([tmp_path / "out"]) == [
        {"protocol": "dfstrans", "baseline": "hgb-summary", "split_seed": 2, **metrics["test"]}
    ]


def test_the_dfstrans_splits_are_what_the_data_make(msl_dir, monkeypatch):
    """``splits.csv`` (each test split's windows, positives and events) is what the grid's settings make
    of the MSL data, so the flag-all line is that of the splits the runs were trained on."""
    monkeypatch.setenv("POSENC_DATA", str(msl_dir.parent))
    summarise = _dfstrans_summarise()
    made = summarise.csv_rows(summarise.data_splits(), summarise.SPLIT_FIELDS)
    assert made.encode() == summarise.SPLITS.read_bytes()
