"""The positional probe suite: accuracy against lag ``k``, one curve per encoding.

Each probe window's label depends only on the order or lag of two pulses ``k`` steps apart
(:mod:`posenc_bench.data.probes`; the two classes hold the same rows pair by pair), so an
order-free model is at chance and what a model gets right it gets from position. For every
encoding (× scale policy), distance ``k`` and seed one classifier is trained on that ``k``'s
training windows — by the benchmark's own loop (:func:`posenc_bench.experiment.bench.run_bench` with
:class:`ProbeSource`: one part per ``k``, subset ``k<k>``, the same training, threshold rule and run
directories) — and :class:`ProbeReporter` records its test accuracy.
This is the experimental counterpart of the Fourier analysis (Idé, Labaien & Chen 2024, §3): a low-pass encoding
should fail at short lags, a faithful one should not. Compare encodings at ``matched`` scale.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from posenc_bench.data.probes import ProbeSuite
from posenc_bench.experiment.bench import check_faithful_window
from posenc_bench.experiment.compare import md_table
from posenc_bench.experiment.config import BenchPlan
from posenc_bench.experiment.files import write_text_atomic

if TYPE_CHECKING:
    from posenc_bench.experiment.bench import Prepared, Report, ReportContext
    from posenc_bench.experiment.records import RunRecord


@dataclass(frozen=True)
class ProbeResult:
    """Mean test accuracy ``accuracy[label][k]`` over seeds (label ``encoding`` or ``encoding (scale)``)."""

    accuracy: dict[str, dict[int, float]]
    std: dict[str, dict[int, float]]
    runs: list[dict[str, Any]]
    task: str
    window: int
    seconds: float
    paths: dict[str, Path]


def load_suite(plan: BenchPlan) -> ProbeSuite:
    """The :class:`posenc_bench.data.ProbeSuite` of ``plan`` (window from the plan), validated before training."""
    from posenc_bench.data import load_dataset

    base = plan.base
    if plan.splits != 1:
        raise ValueError(
            f"--splits applies to anomaly datasets; probes draw independent train/val/test sets "
            f"per distance k, so use --splits 1 (got {plan.splits})"
        )
    options = dict(base.dataset_options)
    if options.setdefault("window", base.window) != base.window:
        raise ValueError(
            f"the probe window is --window ({base.window}); do not also pass window={options['window']} "
            "as a dataset option"
        )
    check_faithful_window(plan.encodings, window=base.window, d_model=base.d_model)
    suite = load_dataset("probes", **options)
    assert isinstance(suite, ProbeSuite)
    return suite


def _label(encoding: str, scale: str) -> str:
    return encoding if scale == "native" else f"{encoding} ({scale})"


class ProbeSource:
    """The probe suite as a split source: one part per distance ``k`` (subset ``k<k>``, split seed 0)."""

    def prepare(self, plan: BenchPlan) -> Prepared:
        from posenc_bench.experiment.bench import Prepared
        from posenc_bench.experiment.runs import ClassifyTask

        base = plan.base
        if not base.axes.task.classify:
            raise ValueError(
                "--task detect needs a dataset with nominal training arrays (msl, smd, synthetic, a "
                "telemanom/SMD path); probes have none"
            )
        if not base.axes.protocol.blocked:
            raise ValueError(
                f"--protocol {base.protocol} does not apply to --dataset probes (independent draws per split)"
            )
        suite = load_suite(plan)
        data = {(0, f"k{k}"): suite.splits(k) for k in suite.distances}
        lines = [
            f"probes {suite.task}: window {suite.window}, distances {', '.join(map(str, suite.distances))}"
        ]
        return Prepared(
            suite, data, ClassifyTask(), ProbeReporter(suite), ("accuracy",), ("accuracy",), lines
        )


@dataclass(frozen=True)
class ProbeReporter:
    """Test accuracy by distance ``k``, mean and spread over seeds: ``probes.{md,csv,json,png}``."""

    suite: ProbeSuite

    def report(self, records: list[RunRecord], context: ReportContext) -> Report:
        from posenc_bench.experiment.bench import Report

        acc: dict[str, dict[int, list[float]]] = {}
        runs = []
        for record in records:
            k = int((record.subset or "").removeprefix("k"))
            label = _label(record.encoding, record.scale or "native")
            acc.setdefault(label, {}).setdefault(k, []).append(record.test["accuracy"])
            runs.append({**record.to_json(), "k": k})
        for label, by_k in acc.items():
            context.log(
                f"{label} task {self.suite.task}: accuracy by k "
                + " ".join(f"{k}:{np.mean(v):.2f}" for k, v in sorted(by_k.items()))
            )
        accuracy = {
            label: {k: float(np.mean(v)) for k, v in sorted(by_k.items())} for label, by_k in acc.items()
        }
        std = {
            label: {
                k: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan") for k, v in sorted(by_k.items())
            }
            for label, by_k in acc.items()
        }
        seconds = time.perf_counter() - context.start
        result = ProbeResult(accuracy, std, runs, self.suite.task, self.suite.window, seconds, {})
        n_seeds = context.plan.seeds
        paths = write(result, context.out, n_seeds=n_seeds) if context.world.is_main else {}
        result = dataclasses.replace(result, paths=paths)
        return Report(result, markdown(result, n_seeds=n_seeds), paths)


def markdown(result: ProbeResult, *, n_seeds: int) -> str:
    """Accuracy table: one row per encoding (× scale), one column per distance ``k``."""
    ks = sorted({k for by_k in result.accuracy.values() for k in by_k})
    lines = [
        f"Probe task `{result.task}`, window {result.window}: test accuracy (chance 0.5), mean over "
        f"{n_seeds} seed(s), by distance k.",
        "",
    ]
    labels = list(result.accuracy)
    lines += md_table(
        ["encoding"],
        [[label] for label in labels],
        [(f"k={k}", [f"{result.accuracy[label][k]:.2f}" for label in labels]) for k in ks],
    )
    lines += ["", f"Wall time {result.seconds:.1f} s."]
    return "\n".join(lines) + "\n"


def write(result: ProbeResult, out: Path, *, n_seeds: int) -> dict[str, Path]:
    """Write ``probes.md``, ``probes.csv`` (label, k, mean, std), ``probes.json`` and the plot ``probes.png``."""
    from posenc_bench.experiment.figures import probe_plot

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {ext: out / f"probes.{ext}" for ext in ("md", "csv", "json", "png")}
    write_text_atomic(paths["md"], markdown(result, n_seeds=n_seeds))
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["encoding", "k", "accuracy_mean", "accuracy_std", "seeds"])
    for label, by_k in result.accuracy.items():
        for k, mean in by_k.items():
            sd = result.std[label][k]
            writer.writerow([label, k, mean, "" if np.isnan(sd) else sd, n_seeds])
    write_text_atomic(paths["csv"], buf.getvalue())
    payload = {
        "task": result.task,
        "window": result.window,
        "seconds": result.seconds,
        "accuracy": result.accuracy,
        "runs": result.runs,
    }
    write_text_atomic(paths["json"], json.dumps(payload, indent=2, default=str))
    probe_plot(result.accuracy, paths["png"], title=f"probe '{result.task}', window {result.window}")
    return paths
