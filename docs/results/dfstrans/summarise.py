"""Tables of the DFStrans reproduction: from run folders to ``runs.csv`` and ``baselines.csv``, from the
data to ``splits.csv``, and from those three committed files to ``tables.md``.

    python docs/results/dfstrans/summarise.py runs OUT_DFSTRANS OUT_BLOCKED        # writes runs.csv
    python docs/results/dfstrans/summarise.py baselines OUT_DFSTRANS OUT_BLOCKED   # writes baselines.csv
    python docs/results/dfstrans/summarise.py splits                               # writes splits.csv (MSL data)
    python docs/results/dfstrans/summarise.py tables                               # writes tables.md

``runs`` reads every finished run (``metrics.json`` and its per-epoch ``log.csv``) of each ``--out``
folder of ``posenc bench --model spatiotemporal`` into one row per run; ``baselines`` reads the
untrained baselines the bench stores beside them (``baselines/…/NAME/splitK/record.json``: gradient
boosting on order-free window summaries and on lagged values, the matrix profile, the largest
absolute value), one row per baseline and split. ``splits`` re-makes each protocol's five splits from
the MSL data with the command's settings (:data:`SETTINGS`) and records each test split's windows,
positives and events. ``tables`` needs neither the run folders nor the data: mean ± std per
(encoding, scale), the baselines and the flag-all line of each split's prevalence; the paired
differences against ``sinusoidal`` and against ``none`` over the (split, training seed) pairs both
hold; and how the variance of each arm divides between splits and training seeds.

Paired tests. A pair shares split and training seed (the same data, the same initial CNN weights).
``p pairs``: the sign-flip test over all pairs, exact conditional on these splits (Monte Carlo above
16 pairs). ``p splits``: the same test on the per-split mean differences, the split being the unit
that generalises to new splits (with 5 splits its smallest value is 2/2⁵ = 0.0625). Each has its
Holm (1979) adjustment over every paired test of the file beside it. The 95% CI is
:func:`posenc_bench.experiment.stats.paired_interval`: with five splits, Student t over the five
per-split mean differences (4 degrees of freedom).
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from posenc_bench.experiment import stats
from posenc_bench.experiment.compare import csv_text, no_skill_metrics

HERE = Path(__file__).resolve().parent
RUNS, SPLITS, TABLES = HERE / "runs.csv", HERE / "splits.csv", HERE / "tables.md"
BASELINES = HERE / "baselines.csv"
METRICS = ("f1", "precision", "recall", "auprc")
ORDER = ["none", "sinusoidal", "dft", "dfstrans_dft"]
PROTOCOLS = ("dfstrans", "blocked")
RUN_FIELDS = (
    "protocol",
    "encoding",
    "scale",
    "split_seed",
    "seed",
    *METRICS,
    "threshold",
    "best_epoch",
    "epochs_run",
    "train_seconds",
    "windows_per_s",
    "row_norm_first",
    "row_norm_last",
    "test_events",
    "test_events_in_train",
)
SPLIT_FIELDS = (
    "protocol",
    "split_seed",
    "test_windows",
    "test_positive_windows",
    "test_events",
    "test_events_in_train",
)
BASELINE_FIELDS = ("protocol", "baseline", "split_seed", *METRICS)
TEXT_FIELDS = ("protocol", "encoding", "scale", "baseline")
SETTINGS = (
    "--dataset msl --model spatiotemporal --n-windows 8 --window-length 16 --d-model 16 --heads 2 "
    "--dropout 0.1 --epochs 8 --patience 3 --batch-size 32 --lr 1e-3 --weight-decay 1e-2 --monitor loss "
    "--splits 5 --encodings none,sinusoidal,dft,dfstrans_dft --no-shuffle-control --no-baseline"
)
"""The README's grid settings; only the data, window and split options shape the splits."""


def read_runs(roots: Iterable[Path]) -> list[dict]:
    """One row per finished run of the ``--out`` folders: its test metrics, its protocol and the added
    encoding's row norm at the first and the last epoch (``log.csv``)."""
    runs = []
    for root in roots:
        for path in sorted(Path(root).glob("runs/*/*/split*-seed*/metrics.json")):
            record = json.loads(path.read_text())
            with open(path.parent / "log.csv", newline="") as f:
                log = list(csv.DictReader(f))
            config = json.loads((path.parent / "config.json").read_text())["config"]
            row = {k: record["test"][k] if k in METRICS else record.get(k) for k in RUN_FIELDS}
            row.update(
                protocol=config["protocol"],
                row_norm_first=float(log[0]["encoding_row_norm"]),
                row_norm_last=float(log[-1]["encoding_row_norm"]),
            )
            runs.append(row)
    return runs


def read_baselines(roots: Iterable[Path]) -> list[dict]:
    """One row per (baseline, split) of the ``--out`` folders: its test metrics and protocol."""
    out = []
    for root in roots:
        for path in sorted(Path(root).glob("baselines/*/*/split*/record.json")):
            stored = json.loads(path.read_text())
            record = stored["record"]
            out.append({"protocol": stored["key"]["settings"]["protocol"], "baseline": record["name"],
                        "split_seed": record["split_seed"], **{m: record["test"][m] for m in METRICS}})  # fmt: skip
    return out


def data_splits() -> list[dict]:
    """Each protocol's test splits as the grid made them (:data:`SETTINGS`), from the MSL data."""
    from posenc.cli import build_parser
    from posenc_bench.cli import plan_from_args
    from posenc_bench.experiment.bench import prepare

    out = []
    for protocol in PROTOCOLS:
        argv = ["bench", *SETTINGS.split(), "--protocol", protocol, "--out", "unused"]
        _, splits = prepare(plan_from_args(build_parser("bench").parse_args(argv)))
        for k, split in sorted(splits.items()):
            test = split.summary["test"]
            out.append(
                {
                    "protocol": protocol,
                    "split_seed": k,
                    "test_windows": test["windows"],
                    "test_positive_windows": test["positives"],
                    "test_events": test["events"],
                    "test_events_in_train": test.get("events_in_train", 0),
                }
            )
    return out


def csv_rows(rows: list[dict], fields: tuple[str, ...]) -> str:
    """``rows`` as CSV text with ``fields`` as its header (:func:`posenc_bench.experiment.compare.csv_text`)."""
    return csv_text([fields, *([row[f] for f in fields] for row in rows)])


def read_csv(path: Path) -> list[dict]:
    """Rows of ``runs.csv`` / ``splits.csv`` with their numbers parsed (the text fields kept)."""
    with open(path, newline="") as f:
        return [
            {
                k: v if k in TEXT_FIELDS else (int(v) if v.lstrip("-").isdigit() else float(v))
                for k, v in row.items()
            }
            for row in csv.DictReader(f)
        ]


def _pm(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if a.size > 1 else f"{a.mean():.3f}"


def _p(p: float) -> str:
    return "n/a" if np.isnan(p) else f"{p:.3g}"


def rows(runs: list[dict]) -> list[tuple[str, str]]:
    keys = {(r["encoding"], r["scale"]) for r in runs}
    return sorted(keys, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1] != "native", k[1]))


def table(runs: list[dict], splits: list[dict], baselines: list[dict]) -> str:
    out = [
        "| encoding | scale | n | F1 | precision | recall | AUPRC | added row norm, epoch 1 → last |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for enc, scale in rows(runs):
        mine = [r for r in runs if (r["encoding"], r["scale"]) == (enc, scale)]
        norms = (
            (
                f"{np.median([r['row_norm_first'] for r in mine]):.3g} → "
                f"{np.median([r['row_norm_last'] for r in mine]):.3g}"
            )
            if enc != "none"
            else "—"
        )
        out.append(
            f"| {enc} | {scale} | {len(mine)} | "
            + " | ".join(_pm([r[m] for r in mine]) for m in METRICS)
            + f" | {norms} |"
        )
    for name in dict.fromkeys(
        b["baseline"] for b in baselines
    ):  # the untrained baselines, one value per split
        mine = [b for b in baselines if b["baseline"] == name]
        out.append(
            f"| {name} (baseline) | - | {len(mine)} | "
            + " | ".join(_pm([b[m] for b in mine]) for m in METRICS)
            + " | — |"
        )
    # the no-skill line: flag every test instance, per split (prevalence = positives / instances)
    flag_all = [no_skill_metrics(s["test_positive_windows"] / s["test_windows"]) for s in splits]
    out.append(
        f"| flag-all (no skill) | - | {len(flag_all)} | "
        + " | ".join(_pm([f[m] for f in flag_all]) for m in METRICS)
        + " | — |"
    )
    return "\n".join(out)


def paired_tests(runs: list[dict], reference: str) -> list[dict]:
    """Every (encoding, scale, metric) against ``reference`` (``none`` at its one scale; ``sinusoidal``
    at the row's scale) over the pairs both hold, with its interval and its two sign-flip p-values."""
    tests = []
    for enc, scale in rows(runs):
        if enc == reference:
            continue
        ref_scale = scale if reference != "none" else "native"
        if reference == "sinusoidal" and scale not in {
            r["scale"] for r in runs if r["encoding"] == reference
        }:
            continue
        ref = {
            (r["split_seed"], r["seed"]): r
            for r in runs
            if (r["encoding"], r["scale"]) == (reference, ref_scale)
        }
        mine = {(r["split_seed"], r["seed"]): r for r in runs if (r["encoding"], r["scale"]) == (enc, scale)}
        common = sorted(set(ref) & set(mine))
        if len(common) < 2:  # one pair tests nothing
            continue
        for metric in ("f1", "auprc"):
            by_split: dict[int, list[float]] = {}
            for k in common:
                by_split.setdefault(k[0], []).append(mine[k][metric] - ref[k][metric])
            d = np.concatenate([np.asarray(v) for v in by_split.values()])
            split_means = np.array([np.mean(v) for v in by_split.values()])
            tests.append(
                {
                    "encoding": enc,
                    "scale": scale,
                    "reference": f"{reference}/{ref_scale}",
                    "metric": metric,
                    "pairs": d.size,
                    "splits": len(by_split),
                    "mean": float(d.mean()),
                    "interval": stats.paired_interval(list(by_split.values())),
                    "p_pairs": stats.sign_flip_p(d),
                    "p_splits": stats.sign_flip_p(split_means) if split_means.size > 1 else float("nan"),
                    "p_wilcoxon": stats.wilcoxon_p(d),
                }
            )
    return tests


def with_holm(tests: list[dict]) -> list[dict]:
    """``tests`` with both sign-flip p-values Holm-adjusted over all of them (one family: the file)."""
    pairs = stats.holm([t["p_pairs"] for t in tests])
    splits = stats.holm([t["p_splits"] for t in tests])
    return [
        {**t, "holm_pairs": float(a), "holm_splits": float(b)}
        for t, a, b in zip(tests, pairs, splits, strict=True)
    ]


def paired(tests: list[dict], reference: str) -> str:
    out = [
        f"| encoding | scale | vs `{reference}` | metric | pairs (splits) | mean diff | 95% CI | CI by | "
        "p pairs | Holm | p splits | Holm | p Wilcoxon |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in tests:
        ci = t["interval"]
        out.append(
            f"| {t['encoding']} | {t['scale']} | {t['reference']} | {t['metric']} | {t['pairs']} ({t['splits']}) | "
            f"{t['mean']:+.4f} | [{ci.low:+.4f}, {ci.high:+.4f}] | {ci.describe()} | {_p(t['p_pairs'])} | "
            f"{_p(t['holm_pairs'])} | {_p(t['p_splits'])} | {_p(t['holm_splits'])} | {_p(t['p_wilcoxon'])} |"
        )
    return "\n".join(out)


def variance(runs: list[dict]) -> str:
    """One-way random-effects split of each arm's variance: between splits and between training seeds.

    With ``n`` seeds in each of ``K`` splits: MS_between = n·var(split means), MS_within = mean of the
    within-split variances; seed component σ²_seed = MS_within, split component
    σ²_split = max(0, (MS_between − MS_within)/n). Arms without ≥ 2 seeds in every split are left out.
    """
    out = [
        "| encoding | scale | splits × seeds | metric | σ split | σ seed | seed share of variance |",
        "|---|---|---|---|---|---|---|",
    ]
    for enc, scale in rows(runs):
        groups: dict[int, list[dict]] = {}
        for r in runs:
            if (r["encoding"], r["scale"]) == (enc, scale):
                groups.setdefault(r["split_seed"], []).append(r)
        sizes = {len(g) for g in groups.values()}
        if len(groups) < 2 or len(sizes) != 1 or min(sizes) < 2:
            continue
        n = sizes.pop()
        for metric in ("f1", "auprc"):
            values = np.array([[r[metric] for r in g] for g in groups.values()])
            within = values.var(axis=1, ddof=1).mean()
            between = max(0.0, (n * values.mean(axis=1).var(ddof=1) - within) / n)
            share = within / (within + between) if within + between > 0 else float("nan")
            out.append(
                f"| {enc} | {scale} | {len(groups)} × {n} | {metric} | {np.sqrt(between):.3f} | "
                f"{np.sqrt(within):.3f} | {share:.0%} |"
            )
    return "\n".join(out) if len(out) > 2 else ""


def _check_splits(runs: list[dict], splits: list[dict], protocol: str) -> None:
    """Every run's test events are its split's (``splits.csv`` describes the splits the runs had)."""
    known = {s["split_seed"]: (s["test_events"], s["test_events_in_train"]) for s in splits}
    for r in runs:
        if known.get(r["split_seed"]) != (r["test_events"], r["test_events_in_train"]):
            raise ValueError(
                f"run {r['encoding']}/{r['scale']} split {r['split_seed']} seed {r['seed']} of protocol "
                f"{protocol} has test events {r['test_events']} ({r['test_events_in_train']} in train); "
                f"splits.csv has {known.get(r['split_seed'])}"
            )


def tables(runs: list[dict], splits: list[dict], baselines: list[dict]) -> str:
    """``tables.md``: per protocol, the arms beside the baselines and flag-all, the paired tests (Holm over
    the whole file), the variance split."""
    protocols = [p for p in PROTOCOLS if any(r["protocol"] == p for r in runs)]
    tests = {
        (p, ref): paired_tests([r for r in runs if r["protocol"] == p], ref)
        for p in protocols
        for ref in ("sinusoidal", "none")
    }
    adjusted = iter(with_holm([t for family in tests.values() for t in family]))
    tests = {key: [next(adjusted) for _ in family] for key, family in tests.items()}
    n_tests = sum(len(family) for family in tests.values())
    parts = []
    for protocol in protocols:
        mine = [r for r in runs if r["protocol"] == protocol]
        theirs = [s for s in splits if s["protocol"] == protocol]
        _check_splits(mine, theirs, protocol)
        untrained = [b for b in baselines if b["protocol"] == protocol]
        if {b["split_seed"] for b in untrained} - {s["split_seed"] for s in theirs}:
            raise ValueError(f"baselines.csv has splits of protocol {protocol} that splits.csv does not")
        leak = [s["test_events_in_train"] / max(s["test_events"], 1) for s in theirs]
        parts += [
            f"## Protocol `{protocol}`\n",
            "Test events that also have instances in training, per split: "
            + ", ".join(
                f"split {s['split_seed']}: {s['test_events_in_train']} of {s['test_events']}" for s in theirs
            )
            + f" (mean share {np.mean(leak):.2f}). Test instances, per split: "
            + ", ".join(f"{s['test_positive_windows']} positive of {s['test_windows']}" for s in theirs)
            + ".\n",
            table(mine, theirs, untrained) + "\n",
            paired(tests[protocol, "sinusoidal"], "sinusoidal") + "\n",
            paired(tests[protocol, "none"], "none") + "\n",
        ]
        split_vs_seed = variance(mine)
        if split_vs_seed:
            parts += [
                "Variance of each arm between splits and between training seeds "
                "(one-way random effects; seed share = σ²seed / (σ²seed + σ²split)):\n",
                split_vs_seed + "\n",
            ]
    parts.append(
        f"Paired tests: a pair shares split and training seed. p pairs: the sign-flip test over the pairs, "
        f"conditional on these splits (exact up to 16 pairs, Monte Carlo with 100000 flips above); p splits: "
        f"the same test on the per-split mean differences (smallest attainable value 2/2^K for K splits); "
        f"each Holm: Holm's step-down adjustment of the column before it over all {n_tests} paired tests of "
        f"this file. {stats.INTERVAL_NOTE}\n"
    )
    return "\n".join(parts)


def main(argv: list[str]) -> None:
    if argv[:1] == ["runs"] and len(argv) > 1:
        RUNS.write_text(csv_rows(read_runs(Path(a) for a in argv[1:]), RUN_FIELDS))
    elif argv[:1] == ["baselines"] and len(argv) > 1:
        BASELINES.write_text(csv_rows(read_baselines(Path(a) for a in argv[1:]), BASELINE_FIELDS))
    elif argv == ["splits"]:
        SPLITS.write_text(csv_rows(data_splits(), SPLIT_FIELDS))
    elif argv == ["tables"]:
        TABLES.write_text(tables(read_csv(RUNS), read_csv(SPLITS), read_csv(BASELINES)))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
