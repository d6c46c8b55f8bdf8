"""Server Machine Dataset (SMD) in the OmniAnomaly layout (Su et al., KDD 2019).

``train/<machine>.txt``, ``test/<machine>.txt``, ``test_label/<machine>.txt``: comma-separated
text, one time step per line (38 features), the label file one 0/1 per line. As for
telemanom, labels exist only for the test files: the labelled series are the test files,
and ``include_train=True`` adds each train file as a nominal-only series
``"<machine>:train"`` (all of it in the training split).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from posenc import validate
from posenc_bench.data.containers import Dataset, Series
from posenc_bench.data.readers import DataFormatError, read_delimited


def is_smd(root: Path) -> bool:
    """Whether ``root`` holds ``test/*.txt`` and a ``test_label/`` folder."""
    return (root / "test_label").is_dir() and any((root / "test").glob("*.txt"))


def _natural(name: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def load_smd(
    root: str | Path, *, machines: Sequence[str] | str | None = None, include_train: bool = False
) -> Dataset:
    """Load SMD machines (module docstring) in natural name order (``machine-1-2`` before ``-10``).

    Args:
        root: folder with ``train/``, ``test/``, ``test_label/``.
        machines: keep only these file stems (a list, or one comma-separated string; default:
            every ``test/*.txt``).
        include_train: also add the unlabelled train files as nominal-only series.
    """
    root = Path(root)
    include_train = validate.boolean("include_train", include_train)
    found = sorted((p.stem for p in (root / "test").glob("*.txt")), key=_natural)
    if not found:
        raise FileNotFoundError(
            f"{root / 'test'}: no <machine>.txt files (SMD layout: train/, test/, test_label/)"
        )
    if machines is not None:
        machines = validate.names("machines", machines)
        unknown = [m for m in machines if m not in found]
        if unknown:
            raise ValueError(f"machines {unknown} are not in {root / 'test'}; available: {found}")
        found = [m for m in found if m in set(machines)]
    series: list[Series] = []
    n_features: int | None = None
    first = ""
    for machine in found:
        test_path = root / "test" / f"{machine}.txt"
        test = read_delimited(test_path, what="the test series")
        if n_features is None:
            n_features, first = test.shape[1], str(test_path)
        elif test.shape[1] != n_features:
            raise DataFormatError(
                f"{test_path}: {test.shape[1]} features, but {first} has {n_features}; "
                "every machine must have the same feature count"
            )
        label_path = root / "test_label" / f"{machine}.txt"
        labels = read_delimited(label_path, what=f"one 0/1 label per line of {test_path}")
        if labels.shape[1] != 1 or labels.shape[0] != test.shape[0]:
            raise DataFormatError(
                f"{label_path}: shape {labels.shape}, expected ({test.shape[0]}, 1): "
                f"one label per row of {test_path}"
            )
        bad = ~np.isin(labels[:, 0], (0.0, 1.0))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise DataFormatError(
                f"{label_path}: label {float(labels[row, 0])!r} at row {row}; labels must be 0 or 1"
            )
        series.append(Series.from_labels(machine, test, labels[:, 0] == 1.0))
        if include_train:
            train_path = root / "train" / f"{machine}.txt"
            train = read_delimited(train_path, what="the unlabelled train series")
            if train.shape[1] != n_features:
                raise DataFormatError(
                    f"{train_path}: {train.shape[1]} features, but {first} has {n_features}"
                )
            series.append(
                Series(f"{machine}:train", train, np.zeros(train.shape[0], dtype=bool), [], train_only=True)
            )
    description = f"SMD (OmniAnomaly layout) from {root}: {len(found)} machines, labelled test files" + (
        "; plus the train files as nominal-only training series" if include_train else ""
    )
    assert n_features is not None  # at least one machine was read, or we raised above
    return Dataset("smd", series, n_features, description)
