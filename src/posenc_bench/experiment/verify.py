"""Re-run a written result and say how far each run lands from it (``posenc bench --verify DIR``).

``DIR/results.json`` holds the grid (``meta``: hyperparameters, encodings, scales, seeds, splits)
and every trained run's record. :func:`verify` rebuilds that grid, trains every run again in a
fresh output folder (no baselines), and compares each run with its written record: the largest
absolute difference over its test and validation metrics, its score threshold (classify), its
shuffled-test metrics and its per-series scores, and the metric where it occurs. A run is
*bit-identical* when every one of those numbers is equal. The threshold is a score itself, so it
tells a re-run whose model rounds differently from the written one even where every rank statistic
(AUPRC, and F1 at the same decisions) comes out equal.

What to expect: training is a function of ``(seed, epoch)`` and the checkpointed state, so on the
same machine type and software a re-run gives the same bits; another CPU model (or another
torch/NumPy build) may choose other kernels and round differently, and a first-epoch difference
of one rounding grows over training. Each record names the CPU, ATen's CPU kernel set and the
versions it ran on (``environment`` in ``config.json`` and in ``meta``), so the report says whether
they match.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from posenc.errors import UsageError
from posenc_bench.experiment.config import BenchPlan, RunConfig
from posenc_bench.experiment.environment import environment
from posenc_bench.experiment.records import RunRecord, as_record


@dataclasses.dataclass(frozen=True)
class Deviation:
    """One run's largest ``|re-run − written|`` and the metric where it occurs (``""``: nothing compared)."""

    run: str
    largest: float
    metric: str
    compared: int

    @property
    def identical(self) -> bool:
        return self.compared > 0 and self.largest == 0.0


def _key(r: RunRecord) -> tuple[str, str, str, int, int]:
    return (r.detector or "", r.encoding, r.scale or "", r.split_seed, r.seed or 0)


def _meta_field(meta: Mapping[str, Any], name: str) -> Any:
    """``meta[name]``, checked to be what ``posenc bench`` writes there; ``ValueError`` saying what is wrong."""
    if name not in meta:
        raise ValueError(f"meta.{name} is missing")
    value = meta[name]
    if name in ("seeds", "splits"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"meta.{name} must be a positive int, got {value!r}")
    elif name == "hyperparameters":
        if not isinstance(value, dict):
            raise ValueError(f"meta.{name} must be an object of run settings, got {value!r}")
    elif not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"meta.{name} must be a list of names, got {value!r}")
    return value


def _records(results: Mapping[str, Any]) -> list[RunRecord]:
    """``results["runs"]`` as records; ``ValueError`` naming the first that is not one."""
    runs = results.get("runs")
    if not isinstance(runs, list):
        raise ValueError(f"runs must be a list of run records, got {type(runs).__name__}")
    records = []
    for i, r in enumerate(runs):
        try:
            records.append(as_record(r))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"runs[{i}] is not a run record ({exc})") from None
    return records


def plan_of(results: Any, path: Path | str = "results.json") -> BenchPlan:
    """The grid that wrote ``results`` (a ``results.json`` object read from ``path``), baselines off;
    :class:`~posenc.UsageError` naming ``path`` and what is wrong when it is not such an object."""
    try:
        if not isinstance(results, dict):
            raise ValueError(f"holds a JSON {type(results).__name__}, not an object")
        meta = results.get("meta")
        if not isinstance(meta, dict):
            raise ValueError("meta is missing (or not an object)")
        fields = {
            k: _meta_field(meta, k) for k in ("hyperparameters", "encodings", "scales", "seeds", "splits")
        }
        try:
            base = RunConfig.from_dict(fields["hyperparameters"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"meta.hyperparameters: {exc}") from None
        runs = _records(results)
        seed_start = meta.get("seed_start", 0)  # written since seeds may be a range
        if not isinstance(seed_start, int) or isinstance(seed_start, bool) or seed_start < 0:
            raise ValueError(f"meta.seed_start must be an int >= 0, got {seed_start!r}")
        options = {r.encoding: dict(r.encoding_options) for r in runs if r.encoding_options}
        return BenchPlan(
            base,
            tuple(fields["encodings"]),
            tuple(fields["scales"]),
            seeds=fields["seeds"],
            splits=fields["splits"],
            seed_start=seed_start,
            shuffle_control=any(r.shuffled_test is not None for r in runs),
            baseline=False,
            encoding_options=options,
            detectors=tuple(dict.fromkeys(r.detector for r in runs if r.detector)),
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"--verify: {path}: {exc}; not a results.json as posenc bench writes it") from None


def _numbers(r: RunRecord) -> Iterator[tuple[str, float]]:
    yield from ((f"test.{k}", v) for k, v in r.test.items())
    yield from ((f"val.{k}", v) for k, v in (r.val or {}).items())
    if r.threshold is not None:  # a score, not a rank statistic: the first number a rounding moves
        yield "threshold", r.threshold
    yield from ((f"shuffled_test.{k}", v) for k, v in (r.shuffled_test or {}).items())
    for metric in ("auprc", "vus_pr"):
        yield from ((f"series.{name}.{metric}", v) for name, v in r.per_series(metric).items())


def deviation(written: RunRecord, rerun: RunRecord) -> Deviation:
    """The largest ``|rerun − written|`` over the numbers both records hold (module docstring)."""
    mine = dict(_numbers(rerun))
    largest, where, n = 0.0, "", 0
    for name, v in _numbers(written):
        if name not in mine:
            continue
        n += 1
        a, b = mine[name], v
        d = 0.0 if (math.isnan(a) and math.isnan(b)) or a == b else abs(a - b)
        if d > largest or math.isnan(d):
            largest, where = d, name
    detector, encoding, scale, split, seed = _key(written)
    label = f"{detector + ' ' if detector else ''}{encoding}/{scale} split {split} seed {seed}"
    return Deviation(label, largest, where, n)


def report(deviations: list[Deviation], written_env: Mapping[str, Any] | None) -> str:
    """The verification as Markdown: one line per run, a summary, and the two environments."""
    lines = ["| run | largest abs deviation | where | numbers compared |", "|---|---|---|---|"]
    lines += [f"| {d.run} | {d.largest:.3g} | {d.metric or '—'} | {d.compared} |" for d in deviations]
    same = sum(d.identical for d in deviations)
    worst = max(deviations, key=lambda d: d.largest) if deviations else None
    lines += [
        "",
        f"{same} of {len(deviations)} runs bit-identical"
        + (
            f"; largest deviation {worst.largest:.3g} ({worst.run}, {worst.metric})."
            if worst and worst.metric
            else "."
        ),
    ]
    now = environment()
    if written_env:
        keys = ("cpu", "cpu_capability", "numpy", "torch", "python")
        # a key an older record lacks is reported as such, not as a difference
        differ = [k for k in keys if k in written_env and written_env[k] != now.get(k)]
        lines.append(
            "Written on: "
            + ", ".join(f"{k} {written_env.get(k, 'not recorded')}" for k in keys)
            + ". Re-run on: "
            + ", ".join(f"{k} {now.get(k)}" for k in keys)
            + (f" (differs in {', '.join(differ)})." if differ else " (the same).")
        )
    else:
        lines.append(f"The written result does not record its CPU and versions; re-run on CPU {now['cpu']}.")
    return "\n".join(lines) + "\n"


def verify(
    folder: Path, *, out: Path, run: Callable[[BenchPlan, Path], list[RunRecord]]
) -> tuple[list[Deviation], str]:
    """Re-run ``folder/results.json``'s runs into ``out`` with ``run(plan, out)``; each run's :class:`Deviation` and the report."""
    path = Path(folder) / "results.json"
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"--verify {folder}: cannot read {path} ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(
            f"--verify: {path}: not UTF-8 JSON ({type(exc).__name__} at byte {exc.start if isinstance(exc, UnicodeDecodeError) else exc.pos})"
        ) from None
    plan = plan_of(results, path)
    if (Path(out) / "runs").exists():
        raise UsageError(
            f"--verify: --out {out} already holds runs, which would be reused; use an empty folder"
        )
    rerun = {_key(r): r for r in run(plan, Path(out))}
    deviations = [deviation(w, rerun[_key(w)]) for w in _records(results) if _key(w) in rerun]
    written_env = results["meta"].get("environment")
    return deviations, report(deviations, written_env if isinstance(written_env, dict) else None)
