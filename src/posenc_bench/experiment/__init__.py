"""The experiment of the faithful-PE paper (Idé, Labaien & Chen 2024, §5), done properly: train, evaluate, compare.

One job per module; what ``posenc bench`` runs, in order:

* :mod:`~posenc_bench.experiment.config` — :class:`RunConfig` (one run) and :class:`BenchPlan` (the grid), typed and frozen.
* :mod:`~posenc_bench.experiment.scale` — scale policies of additive encodings and the seeded classifier they build.
* :mod:`~posenc_bench.experiment.train` — the one epoch loop (``fit_loop``: AdamW, early stopping, exact resume,
  divergence check) that every task drives through its ``EpochSteps`` (batches, loss, validation).
* :mod:`~posenc_bench.experiment.metrics` — precision/recall/F1/AUPRC (scikit-learn), threshold chosen on validation.
* :mod:`~posenc_bench.experiment.runs` — a run directory: config, log, atomic checkpoint, metrics; resume and skip,
  for every task (``execute``). A ``RunTask`` (classify here, detect in :mod:`~posenc_bench.experiment.detect`) gives
  it the model, the epoch steps and the evaluation; lengthgen's ``LengthgenRuns``
  (:mod:`~posenc_bench.experiment.lengthgen`) its step loop and test sets.
* :mod:`~posenc_bench.experiment.records` — ``RunRecord`` (a run's, baseline's or no-skill row's results) and
  ``LengthgenRecord`` (a lengthgen run's), typed and frozen.
* :mod:`~posenc_bench.experiment.controls` — time-shuffle control and the order-free gradient-boosting baseline.
* :mod:`~posenc_bench.experiment.stats` — paired sign-flip and Wilcoxon tests, Holm adjustment, Student t and two-stage bootstrap CIs.
* :mod:`~posenc_bench.experiment.compare` — the results table (md/csv/json) and :mod:`~posenc_bench.experiment.figures` its plot.
* :mod:`~posenc_bench.experiment.bench` — the one loop over (split and subset, encoding, scale, seed): a split
  source (labelled windows, nominal arrays, :mod:`~posenc_bench.experiment.probes`' suite) prepares the data
  before any training, and its reporter makes the table (comparison, or accuracy by lag).
* :mod:`~posenc_bench.experiment.distributed` — DDP under ``torchrun`` (gloo on CPU, NCCL on GPU).

Importing this package imports nothing heavy; the modules that train import torch.
"""

from posenc_bench.experiment.config import SCALE_POLICIES, BenchPlan, RunConfig

__all__ = ["SCALE_POLICIES", "BenchPlan", "RunConfig"]
