"""Channels for unsupervised detection: a nominal training array and a labelled test series each.

The detection protocol of Hundman et al. (2018, "Detecting spacecraft anomalies using LSTMs and
nonparametric dynamic thresholding", KDD) learns normal behaviour from each channel's *nominal*
training telemetry and scores the channel's labelled test telemetry. A :class:`Dataset` holds
such training data as ``train_only`` series named ``"<channel>:train"`` next to the labelled
series ``"<channel>"``. Loaders that provide it:

* ``msl`` / telemanom paths: ``include_train=True`` (the unlabelled ``train`` arrays);
* ``smd``: ``include_train=True`` (the ``train/<machine>.txt`` files);
* ``synthetic``: ``nominal_length=N`` (a nominal array of ``N`` steps per series).

Per channel, the last ``holdout`` fraction of the training array is held out: the detector is
not trained on it, and its errors calibrate the channel's score scale and threshold. Values are
normalised with :func:`posenc_bench.data.fit_normalisation` (robust) fitted on the training parts of
all channels together — per channel, a channel whose telemetry is (nearly) constant in training
would be blown up by a tiny scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from posenc_bench.data.containers import Dataset, Series
from posenc_bench.data.windows import fit_normalisation

TRAIN_SUFFIX = ":train"
#: Which loader option gives each named dataset its nominal training arrays.
NOMINAL_OPTIONS = {
    "msl": ("include_train", True),
    "smd": ("include_train", True),
    "synthetic": ("nominal_length", 8192),
    "ucr": ("include_train", True),
    "tsb-ad": ("include_train", True),
}


@dataclass
class Channel:
    """One channel, normalised: ``train[T_fit, F]`` (fit), ``holdout[T_hold, F]``, ``test[T_test, F]`` and its labels.

    Attributes:
        name: the channel id.
        index: position in :attr:`DetectionData.channels` (the model's channel-identity input).
        fit, holdout, test: float32 arrays, normalised with the channel's ``fit`` statistics.
        series: the labelled test :class:`Series` (raw values, labels, events, event kinds).
    """

    name: str
    index: int
    fit: NDArray[np.float32]
    holdout: NDArray[np.float32]
    test: NDArray[np.float32]
    series: Series


@dataclass
class DetectionData:
    """Every channel of a dataset for detection, and the features a detector predicts (``targets``)."""

    name: str
    channels: list[Channel]
    n_features: int
    targets: tuple[int, ...]
    description: str = ""

    @property
    def n_channels(self) -> int:
        return len(self.channels)


def default_targets(dataset: Dataset) -> tuple[int, ...]:
    """Feature 0 (the telemetry value) for telemanom data (MSL/SMAP, whose other columns are commands); else all."""
    if dataset.name in ("msl", "smap") or dataset.description.startswith("telemanom"):
        return (0,)
    return tuple(range(dataset.n_features))


def detection_data(
    dataset: Dataset,
    *,
    window: int,
    horizon: int = 1,
    holdout: float = 0.2,
    targets: tuple[int, ...] | None = None,
) -> DetectionData:
    """Pair each labelled series with its nominal ``"<name>:train"`` series (module docstring) and normalise.

    Raises (before any training):
        ValueError: the dataset has no nominal training series (naming the loader options that
            provide them), a labelled series has none, or a channel's training part, held-out part
            or test array is shorter than ``window + horizon`` steps.
    """
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be a fraction in (0, 1), got {holdout!r}")
    train = {
        s.name[: -len(TRAIN_SUFFIX)]: s
        for s in dataset.series
        if s.train_only and s.name.endswith(TRAIN_SUFFIX)
    }
    labelled = [s for s in dataset.series if not s.train_only]
    if not train:
        options = "; ".join(
            f"{name}: --dataset-option {k}={str(v).lower()}" for name, (k, v) in NOMINAL_OPTIONS.items()
        )
        raise ValueError(
            f"--task detect needs nominal training arrays, and dataset {dataset.name!r} has none "
            f"(no train_only series named '<channel>{TRAIN_SUFFIX}'). Loaders that provide them: "
            f"{options} (set automatically for these names)"
        )
    missing = [s.name for s in labelled if s.name not in train]
    if missing:
        raise ValueError(
            f"dataset {dataset.name!r}: channels {missing} have no nominal training array "
            f"'<channel>{TRAIN_SUFFIX}'"
        )
    targets = default_targets(dataset) if targets is None else tuple(targets)
    bad = [t for t in targets if not 0 <= t < dataset.n_features]
    if not targets or bad:
        raise ValueError(f"targets must be feature indices in [0, {dataset.n_features}), got {targets!r}")
    need = window + horizon
    cuts = {s.name: round(train[s.name].length * (1 - holdout)) for s in labelled}
    center, scale = fit_normalisation(
        np.concatenate([train[s.name].values[: cuts[s.name]] for s in labelled])
    )
    channels = []
    for index, series in enumerate(labelled):
        values = train[series.name].values
        cut = cuts[series.name]
        for part, n in (
            ("training part", cut),
            ("held-out part", values.shape[0] - cut),
            ("test array", series.length),
        ):
            if n < need:
                raise ValueError(
                    f"channel {series.name!r}: its {part} has {n} steps, shorter than window + horizon "
                    f"= {window} + {horizon} = {need} (train array {values.shape[0]} steps, holdout "
                    f"{holdout}); use a shorter --window or --horizon, or leave the channel out"
                )
        fit, hold, test = (
            ((x - center) / scale).astype(np.float32) for x in (values[:cut], values[cut:], series.values)
        )
        channels.append(Channel(series.name, index, fit, hold, test, series))
    return DetectionData(dataset.name, channels, dataset.n_features, targets, dataset.description)
