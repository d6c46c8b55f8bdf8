"""The benchmark: validate a grid, make the splits, train every run (resumable), compare, write.

:func:`run_bench` is what ``posenc bench`` calls. Every check that can fail runs **before
any training**: unknown encodings or scale policies (in :class:`BenchPlan`), an unknown
dataset (``load_dataset``), a window longer than a series or a split without positives
(``make_splits`` — all split seeds are made first), and a DFT encoding whose window exceeds
its dimension (Idé, Labaien & Chen 2024, Theorem 1: faithful only for positions < d).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import torch

from posenc_bench.experiment.baseline_store import BaselineJob, stored_baselines
from posenc_bench.experiment.compare import BASELINE, Record, compare, markdown, write
from posenc_bench.experiment.config import BenchPlan, RunConfig
from posenc_bench.experiment.distributed import World, select_device
from posenc_bench.experiment.environment import environment
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.runs import METRICS, ClassifyTask, RunTask, claim_each, execute, run_dir
from posenc_bench.experiment.train import EpochHook

if TYPE_CHECKING:
    from posenc_bench.data import Dataset


#: Where a run's data lie: ``(split seed, subset)`` (subset ``""``: the whole dataset; probes ``"k<k>"``).
Part = tuple[int, str]


@dataclass(frozen=True)
class Report:
    """What a :class:`Reporter` made of the records: its summary, the table printed, the files written."""

    summary: Any
    table: str
    paths: dict[str, Path]


@dataclass(frozen=True)
class BenchResult:
    """What :func:`run_bench` produced: the report (summary, table, files written by rank 0), wall time, runs trained.

    ``summary`` is a :class:`~posenc_bench.experiment.compare.Comparison` for the classify and detect
    sources, a :class:`~posenc_bench.experiment.probes.ProbeResult` for the probe suite.
    """

    summary: Any
    table: str
    paths: dict[str, Path]
    seconds: float
    trained: int
    skipped: int


def check_faithful_window(encodings: tuple[str, ...], *, window: int, d_model: int) -> None:
    """Refuse an encoding for windows longer than the positions it encodes faithfully.

    Each registry entry's ``faithful_length(d_model)`` says how many; e.g. the DFT encoding of
    position ``s`` is the DFT of the one-hot at ``s`` on the lattice ``0 … d−1`` (Idé, Labaien
    & Chen, Theorem 1): invertible only for ``s < d``, position ``s + d`` gets the vector of ``s``.
    """
    from posenc import registry

    for name in encodings:
        limit = registry.get(name).faithful_length
        if limit is not None and window > limit(d_model):
            most = limit(d_model)
            raise ValueError(
                f"encoding {name!r} with window={window}: it is faithful (injective) only for positions "
                f"0 … {most - 1} at d_model={d_model}; later positions would repeat earlier vectors. "
                f"Use --window <= {most} or a larger --d-model"
            )


def prepare(plan: BenchPlan) -> tuple[Any, dict[int, Any]]:
    """Load the dataset and make every split seed's splits (raises before any training)."""
    from posenc_bench.data import load_dataset, make_splits

    base = plan.base
    positions = base.n_windows if base.axes.model.spatiotemporal else base.window  # what the encoding indexes
    check_faithful_window(plan.encodings, window=positions, d_model=base.d_model)
    dataset = cast("Dataset", load_dataset(base.dataset, **base.dataset_options))  # probes: ProbeSource
    splits = {
        k: make_splits(
            dataset,
            window=base.window,
            stride=base.stride,
            seed=k,
            protocol=base.protocol,
            anomaly_percent=base.anomaly_percent,
        )
        for k in range(plan.splits)
    }
    return dataset, splits


@dataclass(frozen=True)
class ReportContext:
    """What a reporter may use besides the records.

    Attributes:
        prepared, plan: the source's data and the grid.
        out: the output directory (rank 0 writes there).
        meta: the benchmark's metadata (environment, hyperparameters, runs trained and skipped).
        start: ``time.perf_counter()`` when the benchmark began (wall time includes the reporter's baselines).
        world: data-parallel position.
        log: where progress lines go.
        progress: whether to show tqdm bars (for the stages that take more than a few seconds).
    """

    prepared: Prepared
    plan: BenchPlan
    out: Path
    meta: dict[str, Any]
    start: float
    world: World
    log: Callable[[str], None]
    progress: bool = False


class Reporter(Protocol):
    """Turns every run's record into the benchmark's summary, its printed table and its files."""

    def report(self, records: list[RunRecord], context: ReportContext) -> Report: ...


@dataclass
class Prepared:
    """A source's data, validated before any training: ``data[(split seed, subset)]`` and how it is reported.

    Attributes:
        dataset: the loaded dataset (for its description).
        data: the task's data per :data:`Part` (``Splits`` or ``DetectionData``); every run of the
            grid is trained on each part of its split seed.
        task: what :func:`posenc_bench.experiment.runs.execute` trains and evaluates with.
        reporter: what makes the table and the files from the records.
        metrics, paired_metrics: the table's columns and those tested in pairs (these are logged per run).
        lines: what the data look like, logged before training.
    """

    dataset: Any
    data: dict[Part, Any]
    task: RunTask
    reporter: Reporter
    metrics: tuple[str, ...]
    paired_metrics: tuple[str, ...]
    lines: list[str]


class SplitSource(Protocol):
    """Where a benchmark's data come from: loaded, validated and split before any training."""

    def prepare(self, plan: BenchPlan) -> Prepared: ...


@dataclass(frozen=True)
class CompareReporter:
    """The comparison table (:mod:`posenc_bench.experiment.compare`): runs, baselines, flag-all, paired tests.

    ``baselines`` and ``no_skill`` give the source's untrained rows (``no_skill`` ``None``: from
    each split's test prevalence, :func:`posenc_bench.experiment.compare.no_skill_metrics`).
    """

    baselines: Callable[[Prepared, BenchPlan], Sequence[BaselineJob]]
    no_skill: Callable[[Prepared, BenchPlan], Sequence[Record] | None] = lambda prepared, plan: None

    def report(self, records: list[RunRecord], context: ReportContext) -> Report:
        prepared, plan, world = context.prepared, context.plan, context.world
        baseline: list[RunRecord] = []
        if plan.baseline and world.is_main:
            t0 = time.perf_counter()
            baseline, read = stored_baselines(
                self.baselines(prepared, plan),
                root=context.out,
                base=plan.base,
                fingerprint=prepared.task.fingerprint,
                progress=context.progress,
            )
            context.log(
                f"baselines ({', '.join(dict.fromkeys(b.name or BASELINE for b in baseline))}): "
                f"{time.perf_counter() - t0:.1f} s"
                + (f" ({read} of {len(baseline)} read from earlier runs)" if read else "")
            )
        comparison = compare(
            records,
            baseline=baseline,
            metrics=prepared.metrics,
            paired_metrics=prepared.paired_metrics,
            no_skill=self.no_skill(prepared, plan),
        )
        comparison.meta.update(context.meta, wall_seconds=time.perf_counter() - context.start)
        paths = write(comparison, context.out) if world.is_main else {}
        return Report(comparison, markdown(comparison), paths)


def test_families(dataset: Any, windows: Any) -> np.ndarray:
    """The family of each window's first event (synthetic kinds mapped by ``FAMILIES``; ``""`` for none)."""
    from posenc_bench.data.synthetic import FAMILIES

    kinds = [
        FAMILIES.get(k, k) if s.event_kinds else ""
        for s in dataset.series
        for k in (s.event_kinds or [""] * len(s.events))
    ]
    table = np.array(kinds + [""], dtype=object)  # index -1 (no event) → ""
    return table[windows.event].astype(str)


class ClassifySource:
    """Labelled windows in blocked splits (:func:`prepare`); baselines per split; flag-all from prevalence."""

    def prepare(self, plan: BenchPlan) -> Prepared:
        from posenc_bench.experiment.compare import PAIRED_METRICS
        from posenc_bench.experiment.metrics import METRICS

        dataset, splits = prepare(plan)
        lines = [
            f"split {k}: "
            + ", ".join(
                f"{name} {v['windows']} windows / {v['positives']} positive / {v['events']} events"
                for name, v in s.summary.items()
            )
            for k, s in splits.items()
        ]
        self.families = {k: test_families(dataset, s.test) for k, s in splits.items()}
        present = sorted({f for fam in self.families.values() for f in fam if f})
        metrics = METRICS + tuple(f"auprc:{f}" for f in present) if len(present) > 1 else METRICS
        return Prepared(
            dataset,
            {(k, ""): s for k, s in splits.items()},
            ClassifyTask(self.families, [s.name for s in dataset.series]),
            CompareReporter(self.baselines, self.no_skill),
            metrics,
            PAIRED_METRICS,
            lines,
        )

    def baselines(self, prepared: Prepared, plan: BenchPlan) -> list[BaselineJob]:
        """Per split: the order-free and the lagged gradient boosting, the matrix profile, max |x|;
        on the built-in synthetic data also the oracle of its generating rule (each stored like a run)."""
        from posenc_bench.experiment import lagged, oracle
        from posenc_bench.experiment.baselines import (
            NAMES,
            WindowScorer,
            classify_window_scores,
            scorer_metrics,
        )
        from posenc_bench.experiment.controls import hgb_scorer, window_summary
        from posenc_bench.experiment.runs import test_series

        names = [s.name for s in prepared.dataset.series]
        scorers: dict[str, Callable[[Any], WindowScorer]] = {
            BASELINE: partial(hgb_scorer, window_summary),
            lagged.NAME: lagged.lagged_scorer,
            **{name: partial(classify_window_scores, name) for name in NAMES},
        }
        if plan.base.dataset == "synthetic":
            scorers[oracle.NAME] = oracle.synthetic_oracle

        def job(name: str, k: int, subset: str, splits: Any) -> BaselineJob:
            def compute() -> RunRecord:
                metrics, scores = scorer_metrics(scorers[name](splits), splits, families=self.families[k])
                series = {"series": test_series(splits.test, scores, names, plan.base)}
                return RunRecord("baseline", k, metrics, name=name, extra=series)

            return BaselineJob(name, k, subset, splits, compute)

        return [job(name, k, subset, s) for (k, subset), s in prepared.data.items() for name in scorers]

    def no_skill(self, prepared: Prepared, plan: BenchPlan) -> list[RunRecord]:
        """Flag-all per split: its metrics at the test prevalence, each series scored with a constant score."""
        from posenc_bench.experiment.compare import no_skill_metrics
        from posenc_bench.experiment.runs import test_series

        names = [s.name for s in prepared.dataset.series]
        out = []
        for (k, _), s in prepared.data.items():
            if not s.test.y.any():
                continue
            series = test_series(s.test, np.ones(len(s.test.y)), names, plan.base)
            out.append(
                RunRecord("no-skill", k, no_skill_metrics(float(s.test.y.mean())), extra={"series": series})
            )
        return out


class DetectSource:
    """Nominal training arrays and labelled test arrays per channel (:mod:`posenc_bench.experiment.detect`)."""

    def prepare(self, plan: BenchPlan) -> Prepared:
        from posenc_bench.data import load_dataset
        from posenc_bench.data.nominal import NOMINAL_OPTIONS, detection_data
        from posenc_bench.experiment.detect import DetectTask
        from posenc_bench.experiment.events import DETECT_METRICS, DETECT_PAIRED

        base = plan.base
        if base.model != "transformer":
            raise ValueError(
                f"--model {base.model} applies to the classify task; --task detect builds its own "
                "forecaster/reconstructor (--detector)"
            )
        if plan.splits != 1:
            raise ValueError(
                f"--splits applies to the classify task; detect trains on the nominal training arrays "
                f"and tests on the test arrays, so use --splits 1 (got {plan.splits})"
            )
        check_faithful_window(plan.encodings, window=base.window, d_model=base.d_model)
        options = dict(base.dataset_options)
        kind = base.dataset.partition(":")[0] if ":" in base.dataset else base.dataset  # "ucr:PATH" → "ucr"
        if kind in NOMINAL_OPTIONS:
            key, value = NOMINAL_OPTIONS[kind]
            options.setdefault(key, value)
        dataset = cast("Dataset", load_dataset(base.dataset, **options))
        data = detection_data(dataset, window=base.window, horizon=base.horizon, holdout=base.holdout)
        fit_steps = sum(len(c.fit) for c in data.channels)
        lines = [
            (
                f"detect: {data.n_channels} channels, {fit_steps} nominal training steps "
                f"({sum(len(c.holdout) for c in data.channels)} held out), "
                f"{sum(len(c.test) for c in data.channels)} test steps, "
                f"{sum(len(c.series.events) for c in data.channels)} test events; targets {list(data.targets)}"
            )
        ]
        reporter = CompareReporter(self.baselines, self.no_skill)
        return Prepared(
            dataset, {(0, ""): data}, DetectTask(), reporter, DETECT_METRICS, DETECT_PAIRED, lines
        )

    def baselines(self, prepared: Prepared, plan: BenchPlan) -> list[BaselineJob]:
        from posenc_bench.experiment.baselines import NAMES
        from posenc_bench.experiment.detect import baseline_records

        data = prepared.data[0, ""]
        return [
            BaselineJob(
                name, 0, "", data, partial(lambda n: baseline_records(data, plan.base, names=(n,))[0], name)
            )
            for name in NAMES
        ]

    def no_skill(self, prepared: Prepared, plan: BenchPlan) -> list[RunRecord]:
        from posenc_bench.experiment.detect import no_skill_record

        return [no_skill_record(prepared.data[0, ""], plan.base)]


def source_for(plan: BenchPlan) -> SplitSource:
    """The split source of ``plan``: the probe suite for dataset ``"probes"``, else its task's."""
    if plan.base.axes.data.probes:
        from posenc_bench.experiment.probes import ProbeSource

        return ProbeSource()
    return DetectSource() if plan.base.axes.task.detect else ClassifySource()


def _meta(plan: BenchPlan, dataset: Any, device: torch.device, world: World) -> dict[str, Any]:
    return {
        "dataset": plan.base.dataset,
        "dataset_description": getattr(dataset, "description", ""),
        "encodings": list(plan.encodings),
        "scales": list(plan.scales),
        "seeds": plan.seeds,
        "seed_start": plan.seed_start,
        "splits": plan.splits,
        "hyperparameters": plan.base.to_dict(),
        "device": str(device),
        "world_size": world.size,
        "torch_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "environment": environment(),
    }


def _name(i: int, n: int, config: RunConfig) -> str:
    """``[i/n] [detector ]encoding/scale[ subset] split k seed s``: run ``i`` of ``n`` in the progress lines."""
    model = f"{config.detector} " if config.axes.task.detect else ""
    part = f" {config.subset}" if config.subset else ""
    return f"[{i}/{n}] {model}{config.encoding}/{config.scale}{part} split {config.split_seed} seed {config.seed}"


def run_bench(
    plan: BenchPlan,
    *,
    out: Path,
    device: str | None = None,
    world: World = World(),
    progress: bool = True,
    on_epoch: EpochHook | None = None,
    log: Callable[[str], None] = print,
    source: SplitSource | None = None,
) -> BenchResult:
    """Train every run of ``plan`` on every part of its source (skipping finished runs), then report.

    One loop over (split seed and subset, detector, encoding, scale, seed) for every source
    (default :func:`source_for`: labelled windows, nominal arrays, the probe suite; or any
    :class:`SplitSource`); the source's reporter makes the table and files.

    Args:
        plan: the grid (validated on construction).
        out: output directory: ``out/runs/…`` per run, the reporter's files (``out/results.{md,csv,json,png}``,
            ``out/probes.{md,csv,json,png}``).
        device: ``"cpu"``, ``"cuda"``, … or ``None`` for CUDA when available.
        world: data-parallel position; only rank 0 writes and logs.
        progress: tqdm bars.
        on_epoch: extra hook after each epoch's checkpoint (tests use it to interrupt).
        log: where progress lines go (rank 0).
        source: where the data come from (default :func:`source_for` of ``plan``).
    """
    start = time.perf_counter()
    prepared = (source if source is not None else source_for(plan)).prepare(plan)
    torch_device = select_device(device, world)
    say = log if world.is_main else (lambda _: None)
    for line in prepared.lines:
        say(line)
    shown = prepared.paired_metrics
    trained = 0
    runs = [
        dataclasses.replace(config, subset=subset)
        for config in plan.runs()
        for split, subset in prepared.data
        if split == config.split_seed
    ]
    finished = sum((run_dir(out, config) / METRICS).is_file() for config in runs)
    if finished:
        say(f"resuming: {finished} of {len(runs)} runs done (under {out / 'runs'}); they are read back")
    done: dict[int, RunRecord] = {}

    def attempt(item: tuple[int, RunConfig], wait: bool) -> RunRecord | None:
        i, config = item
        record = execute(
            config,
            prepared.data[config.split_seed, config.subset],
            root=out,
            device=torch_device,
            world=world,
            shuffle_control=plan.shuffle_control,
            progress=progress,
            on_epoch=on_epoch,
            log=say,
            task=prepared.task,
            wait=wait,
        )
        if record is None:
            say(
                f"{_name(i, len(runs), config)}: being trained by another process; coming back to it after the others"
            )
        return record

    for i, record in claim_each(list(enumerate(runs, 1)), attempt):
        trained += not record.skipped
        say(
            f"{_name(i + 1, len(runs), runs[i])}: "
            + " ".join(f"{m} {record.test[m]:.3f}" for m in shown)
            + (" (finished earlier, skipped)" if record.skipped else "")
        )
        done[i] = record
    records = [done[i] for i in sorted(done)]
    meta = {
        **_meta(plan, prepared.dataset, torch_device, world),
        "runs_trained": trained,
        "runs_skipped": len(records) - trained,
    }
    report = prepared.reporter.report(
        records, ReportContext(prepared, plan, out, meta, start, world, say, progress and world.is_main)
    )
    world.barrier()
    seconds = time.perf_counter() - start
    return BenchResult(report.summary, report.table, report.paths, seconds, trained, len(records) - trained)
