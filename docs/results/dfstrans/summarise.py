"""Tables of the DFStrans reproduction from finished ``posenc bench`` run directories.

    python docs/results/dfstrans/summarise.py OUT_DFSTRANS OUT_BLOCKED > docs/results/dfstrans/tables.md

Each argument is a ``--out`` folder of ``posenc bench --model spatiotemporal``; every finished run
(``metrics.json``) is read, with its per-epoch ``log.csv``. Writes ``runs.csv`` (one row per run)
beside this script and prints the markdown tables: mean ± std per (encoding, scale); the paired
differences against ``sinusoidal`` and against ``none`` over the (split, training seed) pairs both
hold; and, where a split has several training seeds, how the variance of each arm divides
between splits and training seeds.

Paired tests. A pair shares split and training seed (the same data, the same initial CNN weights).
``p pairs``: exact sign-flip test over all pairs, exact conditional on these splits (the posenc
convention, :mod:`posenc_bench.experiment.stats`). ``p splits``: the same test on the per-split mean
differences — the split is the unit that generalises to new splits; with 5 splits its smallest
value is 0.0625. The 95% CI is the two-stage bootstrap (splits, then seeds within a split).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import numpy as np

from posenc_bench.experiment import stats
from posenc_bench.experiment.compare import no_skill_metrics

METRICS = ("f1", "precision", "recall", "auprc")
ORDER = ["none", "sinusoidal", "dft", "dfstrans_dft"]


def load(root: Path) -> list[dict]:
    runs = []
    for path in sorted(root.glob("runs/*/*/split*-seed*/metrics.json")):
        record = json.loads(path.read_text())
        with open(path.parent / "log.csv", newline="") as f:
            log = list(csv.DictReader(f))
        config = json.loads((path.parent / "config.json").read_text())["config"]
        record["protocol"] = config["protocol"]
        record["row_norm_first"] = float(log[0]["encoding_row_norm"])
        record["row_norm_last"] = float(log[-1]["encoding_row_norm"])
        runs.append(record)
    return runs


def _pm(values: list[float]) -> str:
    a = np.asarray(values, dtype=float)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if a.size > 1 else f"{a.mean():.3f}"


def rows(runs: list[dict]) -> list[tuple[str, str]]:
    keys = {(r["encoding"], r["scale"]) for r in runs}
    return sorted(keys, key=lambda k: (ORDER.index(k[0]) if k[0] in ORDER else 99, k[1] != "native", k[1]))


def table(runs: list[dict]) -> str:
    out = ["| encoding | scale | n | F1 | precision | recall | AUPRC | added row norm, epoch 1 → last |",
           "|---|---|---|---|---|---|---|---|"]
    for enc, scale in rows(runs):
        mine = [r for r in runs if (r["encoding"], r["scale"]) == (enc, scale)]
        norms = (f"{np.median([r['row_norm_first'] for r in mine]):.3g} → "
                 f"{np.median([r['row_norm_last'] for r in mine]):.3g}") if enc != "none" else "—"
        out.append(f"| {enc} | {scale} | {len(mine)} | "
                   + " | ".join(_pm([r["test"][m] for r in mine]) for m in METRICS) + f" | {norms} |")
    # the no-skill line: flag every test instance, per split (prevalence = positives / instances)
    splits = {r["split_seed"]: r["test_positive_windows"] / r["test_windows"] for r in runs}
    flag_all = [no_skill_metrics(p) for _, p in sorted(splits.items())]
    out.append(f"| flag-all (no skill) | - | {len(flag_all)} | "
               + " | ".join(_pm([f[m] for f in flag_all]) for m in METRICS) + " | — |")
    return "\n".join(out)


def paired(runs: list[dict], reference: str) -> str:
    out = [f"| encoding | scale | vs `{reference}` | metric | pairs (splits) | mean diff | bootstrap 95% CI | "
           "p pairs | p splits | p Wilcoxon |", "|---|---|---|---|---|---|---|---|---|---|"]
    for enc, scale in rows(runs):
        if enc == reference:
            continue
        ref_scale = scale if reference != "none" else "native"
        ref = {(r["split_seed"], r["seed"]): r for r in runs if (r["encoding"], r["scale"]) == (reference, ref_scale)}
        if reference == "sinusoidal" and scale not in {r["scale"] for r in runs if r["encoding"] == reference}:
            continue
        mine = {(r["split_seed"], r["seed"]): r for r in runs if (r["encoding"], r["scale"]) == (enc, scale)}
        common = sorted(set(ref) & set(mine))
        if len(common) < 2:  # one pair tests nothing
            continue
        for metric in ("f1", "auprc"):
            by_split: dict[int, list[float]] = {}
            for k in common:
                by_split.setdefault(k[0], []).append(mine[k]["test"][metric] - ref[k]["test"][metric])
            d = np.concatenate([np.asarray(v) for v in by_split.values()])
            split_means = np.array([np.mean(v) for v in by_split.values()])
            lo, hi = stats.two_stage_bootstrap_ci(list(by_split.values()))
            wil = stats.wilcoxon_p(d)
            p_splits = f"{stats.sign_flip_p(split_means):.3g}" if split_means.size > 1 else "n/a"
            out.append(f"| {enc} | {scale} | {reference}/{ref_scale} | {metric} | {len(d)} ({len(by_split)}) | "
                       f"{d.mean():+.4f} | [{lo:+.4f}, {hi:+.4f}] | {stats.sign_flip_p(d):.3g} | {p_splits} | "
                       f"{'n/a' if np.isnan(wil) else f'{wil:.3g}'} |")
    return "\n".join(out)


def variance(runs: list[dict]) -> str:
    """One-way random-effects split of each arm's variance: between splits and between training seeds.

    With ``n`` seeds in each of ``K`` splits: MS_between = n·var(split means), MS_within = mean of the
    within-split variances; seed component σ²_seed = MS_within, split component
    σ²_split = max(0, (MS_between − MS_within)/n). Arms without ≥ 2 seeds in every split are left out.
    """
    out = ["| encoding | scale | splits × seeds | metric | σ split | σ seed | seed share of variance |",
           "|---|---|---|---|---|---|---|"]
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
            values = np.array([[r["test"][metric] for r in g] for g in groups.values()])
            within = values.var(axis=1, ddof=1).mean()
            between = max(0.0, (n * values.mean(axis=1).var(ddof=1) - within) / n)
            share = within / (within + between) if within + between > 0 else float("nan")
            out.append(f"| {enc} | {scale} | {len(groups)} × {n} | {metric} | {np.sqrt(between):.3f} | "
                       f"{np.sqrt(within):.3f} | {share:.0%} |")
    return "\n".join(out) if len(out) > 2 else ""


def main(roots: list[str]) -> None:
    everything = []
    for root in roots:
        runs = load(Path(root))
        everything += runs
        protocol = runs[0]["protocol"]
        leak = [r["test_events_in_train"] / max(r["test_events"], 1) for r in runs if r["encoding"] == "none"]
        events = {(r["split_seed"], r["test_events_in_train"], r["test_events"]) for r in runs}
        print(f"## Protocol `{protocol}`\n")
        print("Test events that also have instances in training, per split: "
              + ", ".join(f"split {k}: {a} of {b}" for k, a, b in sorted(events))
              + f" (mean share {np.mean(leak):.2f}).\n")
        print(table(runs) + "\n")
        print(paired(runs, "sinusoidal") + "\n")
        print(paired(runs, "none") + "\n")
        split_vs_seed = variance(runs)
        if split_vs_seed:
            print("Variance of each arm between splits and between training seeds "
                  "(one-way random effects; seed share = σ²seed / (σ²seed + σ²split)):\n")
            print(split_vs_seed + "\n")
    fields = ["protocol", "encoding", "scale", "split_seed", "seed", "f1", "precision", "recall", "auprc",
              "threshold", "best_epoch", "epochs_run", "train_seconds", "windows_per_s", "row_norm_first",
              "row_norm_last", "test_events", "test_events_in_train"]
    with open(Path(__file__).with_name("runs.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in everything:
            writer.writerow({k: r["test"][k] if k in METRICS else r[k] for k in fields})


if __name__ == "__main__":
    main(sys.argv[1:])
