"""Untrained baselines stored like runs, so that a re-run reads them instead of computing them again.

Layout, beside the runs (:func:`posenc_bench.experiment.runs.run_dir`)::

    ROOT/baselines/<dataset>[-<protocol>]/[detect-<detector>/][<subset>/]<name>/split<k>/
        record.json   {"key": …, "record": …}: what it was computed from, and the baseline's record
        claim.lock    held while one process computes it (:mod:`posenc_bench.experiment.claims`)

``key`` holds the data fingerprint of the split (the task's, as a run records it) and every setting
of the benchmark except those that name a trained run (encoding and its options, scale, seeds).
A stored record is returned only when its key equals the present one; otherwise (other data, other
settings, an unreadable file) the baseline is computed again and its record replaced.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from posenc_bench.experiment.claims import claim
from posenc_bench.experiment.config import RunConfig
from posenc_bench.experiment.files import write_text_atomic
from posenc_bench.experiment.records import RunRecord
from posenc_bench.experiment.runs import run_dir
from posenc_bench.experiment.train import Bar

RECORD = "record.json"
_RUN_ONLY = ("encoding", "encoding_options", "scale", "seed", "split_seed", "subset")


@dataclass(frozen=True)
class BaselineJob:
    """One baseline on one part of the data: ``compute()`` makes its record when none is stored."""

    name: str
    split_seed: int
    subset: str
    data: Any
    compute: Callable[[], RunRecord]


def baseline_dir(root: Path, base: RunConfig, job: BaselineJob) -> Path:
    """Where ``job``'s record lies under ``root`` (module docstring)."""
    part = run_dir(root, dataclasses.replace(base, subset=job.subset)).parent.parent
    return (
        Path(root) / "baselines" / part.relative_to(Path(root) / "runs") / job.name / f"split{job.split_seed}"
    )


def _key(base: RunConfig, fingerprint: str) -> dict[str, Any]:
    settings = {k: v for k, v in base.to_dict().items() if k not in _RUN_ONLY}
    return {"data_fingerprint": fingerprint, "settings": settings}


def _stored(path: Path, key: dict[str, Any]) -> RunRecord | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["key"] != key:
            return None
        return RunRecord.from_json(data["record"], kind="baseline")
    except (OSError, ValueError, TypeError, KeyError):
        return None


def stored_baselines(
    jobs: Sequence[BaselineJob],
    *,
    root: Path,
    base: RunConfig,
    fingerprint: Callable[[Any], str],
    progress: bool = False,
) -> tuple[list[RunRecord], int]:
    """Every job's record, read where stored under ``root`` with the same key, else computed and stored
    (``progress``: a tqdm bar over the jobs, naming the one being computed).

    Returns the records in ``jobs``' order and how many were read instead of computed.
    """
    records, read = [], 0
    bar = Bar(total=len(jobs), desc="baselines", unit="baseline", leave=False) if progress else None
    for job in jobs:
        if bar is not None:
            bar.set_postfix_str(f"{job.name} split {job.split_seed}", refresh=True)
        directory = baseline_dir(root, base, job)
        key = _key(base, fingerprint(job.data))
        with claim(directory, wait=True):
            record = _stored(directory / RECORD, key)
            if record is None:
                record = job.compute()
                payload = {"key": key, "record": record.to_json()}
                write_text_atomic(directory / RECORD, json.dumps(payload, indent=2, sort_keys=True))
            else:
                read += 1
        records.append(record)
        if bar is not None:
            bar.update()
    if bar is not None:
        bar.close()
    return records, read
