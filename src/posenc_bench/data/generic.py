"""Your own data: one series per CSV or NPY file, with a 0/1 label column.

* **CSV** (``*.csv``): a header line of column names, then one comma-separated row per time
  step (cells may be quoted). The column named ``label`` (or ``label_column=``) holds 1 for
  anomalous steps and 0 otherwise; columns named in ``ignore_columns`` (e.g. a timestamp) are
  skipped and may hold text; every other column is a numeric feature.
* **NPY** (``*.npy``): a numeric ``[T, F + 1]`` array; column ``label_column`` (an index,
  default the last, ``-1``) holds the 0/1 labels, the other columns are the features
  (``ignore_columns`` takes indices).

A path to one file gives one series; a folder gives one series per file, sorted by name (a
folder must not mix ``.csv`` and ``.npy``). Series are named by file stem. Events are the
maximal runs of label 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
from numpy.typing import NDArray

from posenc_bench.data.containers import Dataset, Series
from posenc_bench.data.readers import DataFormatError, read_csv_columns, read_header, read_npy

FORMATS = (".csv", ".npy")


def table_files(path: Path) -> list[Path]:
    """The CSV or NPY files that ``path`` (a file or a folder of them) designates; empty if none."""
    if path.is_file():
        return [path] if path.suffix in FORMATS else []
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix in FORMATS) if path.is_dir() else []
    if len({p.suffix for p in files}) > 1:
        raise DataFormatError(f"{path}: mixes .csv and .npy files; keep one format per folder")
    return files


def _series(path: Path, features: NDArray[np.float64], labels: NDArray[np.float64]) -> Series:
    bad = ~np.isin(labels, (0.0, 1.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataFormatError(
            f"{path}: label {float(labels[row])!r} at data row {row}; labels must be 0 or 1"
        )
    if features.shape[1] == 0:
        raise DataFormatError(f"{path}: no feature columns besides the label")
    return Series.from_labels(path.stem, features, labels == 1.0)


def _read_csv(path: Path, label_column: str, ignore: Sequence[str | int]) -> Series:
    names = read_header(path, what="a header line, then one row per time step")
    for name in (label_column, *ignore):
        if not isinstance(name, str) or name not in names:
            raise DataFormatError(f"{path}: no column {name!r}; columns: {names}")
    features = [n for n in names if n != label_column and n not in ignore]
    table = read_csv_columns(
        path, what="a header line, then one row per time step", numeric=[label_column, *features]
    )
    return _series(path, table[:, 1:], table[:, 0])


def _read_npy(path: Path, label_column: int, ignore: Sequence[str | int]) -> Series:
    table = read_npy(path, what="a numeric [T, F + 1] array with a 0/1 label column")
    width = table.shape[1]
    for index in (label_column, *ignore):
        if isinstance(index, bool) or not isinstance(index, int) or not -width <= index < width:
            raise DataFormatError(f"{path}: column index {index!r} is not an int in [{-width}, {width})")
    label = label_column % width
    if label in {i % width for i in ignore}:
        raise DataFormatError(
            f"{path}: column {label} is both the label (label_column={label_column}) and in "
            f"ignore_columns {list(ignore)}"
        )
    skip = {label, *(i % width for i in ignore)}
    return _series(path, table[:, [c for c in range(width) if c not in skip]], table[:, label])


def load_table(
    path: str | Path, *, label_column: str | int | None = None, ignore_columns: Sequence[str | int] = ()
) -> Dataset:
    """Load one CSV/NPY file or a folder of them (module docstring for the format).

    Args:
        path: a ``.csv``/``.npy`` file or a folder of such files.
        label_column: the 0/1 label column: a name for CSV (default ``"label"``), an index
            for NPY (default ``-1``).
        ignore_columns: columns that are neither feature nor label (names for CSV, indices for NPY).
    """
    path = Path(path)
    if isinstance(ignore_columns, (str, bytes)) or not isinstance(ignore_columns, Sequence):
        raise TypeError(
            f"ignore_columns must be a list of column names (CSV) or indices (NPY), got {ignore_columns!r}"
        )
    if label_column is not None and label_column in ignore_columns:
        raise ValueError(
            f"label_column {label_column!r} is also in ignore_columns {list(ignore_columns)!r}; "
            "a column is either the label or ignored"
        )
    files = table_files(path)
    if not files:
        raise FileNotFoundError(f"{path}: no .csv or .npy file")
    series: list[Series] = []
    for file in files:
        if file.suffix == ".csv":
            item = _read_csv(
                file, "label" if label_column is None else cast(str, label_column), ignore_columns
            )
        else:
            item = _read_npy(file, -1 if label_column is None else cast(int, label_column), ignore_columns)
        if series and item.n_features != series[0].n_features:
            raise DataFormatError(
                f"{file}: {item.n_features} features, but {files[0]} has "
                f"{series[0].n_features}; every file must have the same feature count"
            )
        series.append(item)
    return Dataset(
        path.stem if path.is_file() else path.name,
        series,
        series[0].n_features,
        f"{len(series)} series from {path}",
    )
