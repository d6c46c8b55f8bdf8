"""The field's single-series archives: the UCR Anomaly Archive and TSB-AD's CSV files.

* **UCR Anomaly Archive** (Wu & Keogh 2021, "Current time series anomaly detection benchmarks
  are flawed", IEEE TKDE): one univariate series per ``.txt`` file, its values separated by
  whitespace (one per line in most files, all on one line in some). The file name carries the
  labels: ``NNN_UCR_Anomaly_<name>_<train end>_<begin>_<end>.txt`` — steps before ``train end``
  are normal (the training part), and the one anomaly covers steps ``begin … end − 1`` counted
  from 0 (a half-open range). The archive does not state its counting; this is how TimeEval's
  KDD-TSAD release, shipped in aeon (Middlehurst et al. 2024), labels its series 135
  (``…_1200_4187_4199``: steps 4187 … 4198), so that labels agree step for step with the
  packages users compare against. Read as 1-based and inclusive, the same numbers would mark
  ``begin − 1 … end − 1``: one step earlier.
* **TSB-AD** (Liu & Paparrizos 2024, NeurIPS Datasets and Benchmarks): one series per ``.csv``
  file with a header; the column ``Label`` holds 0/1 per step, every other column is a feature
  (TSB-AD-U one, TSB-AD-M several). The file name carries the training part's length as
  ``…_tr_<train end>_1st_<first anomaly>….csv``.

Each file is one series, named by its file stem, of the steps after the training part (the
test part, holding the labels); ``include_train=True`` adds the training part as a nominal-only
series ``"<stem>:train"`` (what ``--task detect`` trains on; set automatically for ``ucr:`` and
``tsb-ad:`` paths), otherwise the training part stays in the labelled series (all of the file).
A folder gives one series per matching file, sorted by name; ``limit`` keeps the first ``limit``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc_bench.data.containers import Dataset, Series
from posenc_bench.data.readers import DataFormatError, check_matrix, read_csv_columns, read_header

UCR_NAME = re.compile(r"^\d+_UCR_Anomaly_(?P<name>.+)_(?P<train>\d+)_(?P<begin>\d+)_(?P<end>\d+)$")
TSB_NAME = re.compile(r"_tr_(?P<train>\d+)_1st_(?P<first>\d+)")
TSB_LABEL = "Label"


def parse_ucr_name(stem: str) -> tuple[int, int, int]:
    """``(train end, first anomalous step, last anomalous step)`` of a UCR file stem, steps from 0 (module docstring)."""
    match = UCR_NAME.match(stem)
    if match is None:
        raise DataFormatError(
            f"{stem!r} is not a UCR Anomaly Archive name: expected NNN_UCR_Anomaly_<name>_<train end>_<begin>_<end>"
        )
    train, begin, end = (int(match[k]) for k in ("train", "begin", "end"))
    if not begin < end:
        raise DataFormatError(
            f"{stem!r}: the anomaly covers steps begin … end - 1, so begin < end is needed, got {begin} … {end}"
        )
    return train, begin, end - 1


def parse_tsb_train(stem: str) -> int:
    """The training part's length in a TSB-AD file stem (``…_tr_<n>_1st_<m>…``)."""
    match = TSB_NAME.search(stem)
    if match is None:
        raise DataFormatError(
            f"{stem!r} is not a TSB-AD file name: expected …_tr_<train end>_1st_<first anomaly>…"
        )
    return int(match["train"])


def _files(path: Path, suffix: str) -> list[Path]:
    if path.is_file():
        return [path]
    files = sorted(p for p in path.glob(f"*{suffix}") if p.is_file()) if path.is_dir() else []
    if not files:
        raise DataFormatError(f"{path}: no {suffix} files")
    return files


def _series(
    stem: str, values: NDArray[np.float64], labels: NDArray[np.bool_], train: int, include_train: bool
) -> list[Series]:
    """The file's labelled series and, with ``include_train``, its training part as ``"<stem>:train"``."""
    if not 0 <= train < len(values):
        raise DataFormatError(f"{stem}: training part of {train} steps leaves no test steps in {len(values)}")
    if labels[:train].any():
        raise DataFormatError(f"{stem}: an anomalous step lies in the training part (before step {train})")
    if not include_train:
        return [Series.from_labels(stem, values, labels)]
    return [
        Series.from_labels(stem, values[train:], labels[train:]),
        Series(f"{stem}:train", values[:train], np.zeros(train, dtype=bool), [], train_only=True),
    ]


def _load(
    path: Path,
    suffix: str,
    read: Callable[[Path], tuple[NDArray[np.float64], NDArray[np.bool_], int]],
    what: str,
    *,
    include_train: bool,
    limit: int | None,
) -> Dataset:
    include_train = validate.boolean("include_train", include_train)
    files = _files(Path(path), suffix)
    if limit is not None:
        files = files[: validate.positive_int("limit", limit)]
    series = []
    for f in files:
        values, labels, train = read(f)
        series += _series(f.stem, values, labels, train, include_train)
    n_features = series[0].n_features
    return Dataset(str(path), series, n_features, f"{what}: {len(files)} series from {path}")


def _read_ucr(path: Path) -> tuple[NDArray[np.float64], NDArray[np.bool_], int]:
    train, begin, end = parse_ucr_name(path.stem)
    try:
        values = np.array(path.read_text(encoding="utf-8").split(), dtype=np.float64)
    except ValueError as exc:
        raise DataFormatError(f"{path}: unreadable value ({exc})") from None
    values = check_matrix(str(path), values[:, None])
    if end >= len(values):
        raise DataFormatError(
            f"{path}: the anomaly's last step {end} lies beyond the {len(values)} steps read"
        )
    labels = np.zeros(len(values), dtype=bool)
    labels[begin : end + 1] = True
    return values, labels, train


def _read_tsb(path: Path) -> tuple[NDArray[np.float64], NDArray[np.bool_], int]:
    names = read_header(path, what="a TSB-AD file")
    if TSB_LABEL not in names:
        raise DataFormatError(f"{path}: no {TSB_LABEL!r} column; TSB-AD files end with one")
    features = [n for n in names if n != TSB_LABEL]
    table = read_csv_columns(path, what="a TSB-AD file", numeric=[*features, TSB_LABEL])
    labels = table[:, -1]
    if not np.isin(labels, (0, 1)).all():
        raise DataFormatError(f"{path}: column {TSB_LABEL!r} must hold 0 or 1")
    return table[:, :-1], labels.astype(bool), parse_tsb_train(path.stem)


def load_ucr(path: str | Path, *, include_train: bool = False, limit: int | None = None) -> Dataset:
    """UCR Anomaly Archive files (module docstring): a ``.txt`` file or a folder of them."""
    return _load(
        Path(path), ".txt", _read_ucr, "UCR Anomaly Archive", include_train=include_train, limit=limit
    )


def load_tsb_ad(path: str | Path, *, include_train: bool = False, limit: int | None = None) -> Dataset:
    """TSB-AD CSV files (module docstring): a ``.csv`` file or a folder of them."""
    return _load(Path(path), ".csv", _read_tsb, "TSB-AD", include_train=include_train, limit=limit)
