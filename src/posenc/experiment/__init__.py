"""The experiment of the faithful-PE paper (Idé, Labaien & Chen 2024, §5), done properly: train, evaluate, compare.

One job per module; what ``posenc bench`` runs, in order:

* :mod:`~posenc.experiment.config` — :class:`RunConfig` (one run) and :class:`BenchPlan` (the grid), typed and frozen.
* :mod:`~posenc.experiment.scale` — scale policies of additive encodings and the seeded classifier they build.
* :mod:`~posenc.experiment.train` — AdamW, ``pos_weight``, early stopping on validation, exact resume.
* :mod:`~posenc.experiment.metrics` — precision/recall/F1/AUPRC (scikit-learn), threshold chosen on validation.
* :mod:`~posenc.experiment.runs` — a run directory: config, log, atomic checkpoint, metrics; resume and skip.
* :mod:`~posenc.experiment.controls` — time-shuffle control and the order-free gradient-boosting baseline.
* :mod:`~posenc.experiment.stats` — paired sign-flip and Wilcoxon tests, two-stage bootstrap CI.
* :mod:`~posenc.experiment.compare` — the results table (md/csv/json) and :mod:`~posenc.experiment.figures` its plot.
* :mod:`~posenc.experiment.bench` / :mod:`~posenc.experiment.probes` — the benchmark and the probe suite.
* :mod:`~posenc.experiment.distributed` — DDP under ``torchrun`` (gloo on CPU, NCCL on GPU).

Importing this package imports nothing heavy; the modules that train import torch.
"""

from posenc.experiment.config import SCALE_POLICIES, BenchPlan, RunConfig

__all__ = ["SCALE_POLICIES", "BenchPlan", "RunConfig"]
