"""NASA telemanom data (MSL, SMAP): labelled test arrays per channel.

Two layouts hold the same arrays and one ``labeled_anomalies.csv`` (columns ``chan_id,
spacecraft, anomaly_sequences, class, num_values``; Hundman et al., KDD 2018):

* the original: ``train/<chan>.npy``, ``test/<chan>.npy``;
* a compact copy: ``train.npz``, ``test.npz`` with one array per channel, keyed by
  ``chan_id`` (the same arrays as the original folders, one archive per part).

Labels exist only for the **test** arrays, so the labelled series are the test arrays, one
per csv row (arrays without a row, like ``T-10``, are ignored). ``anomaly_sequences`` are
**inclusive** ``[start, end]`` row ranges. The unlabelled train arrays are left out by
default; ``include_train=True`` adds each as a nominal-only series ``"<chan>:train"``
(``train_only``: all of it goes to the training split) — telemanom's own assumption that
training telemetry is nominal, which is not verified by any label.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc_bench.data.containers import Dataset, Series
from posenc_bench.data.readers import (
    DataFormatError,
    check_matrix,
    npz_member,
    read_csv_rows,
    read_npy,
    read_npz,
)

LABELS_FILE = "labeled_anomalies.csv"
REQUIRED_COLUMNS = ("chan_id", "spacecraft", "anomaly_sequences", "num_values")

Reader = Callable[[str, str], tuple[NDArray[np.float64], str]]  # (part, chan) -> (array, where)


def is_telemanom(root: Path) -> bool:
    """Whether ``root`` holds ``labeled_anomalies.csv`` and either ``test.npz`` or ``test/*.npy``."""
    return (root / LABELS_FILE).is_file() and (
        (root / "test.npz").is_file() or any((root / "test").glob("*.npy"))
    )


def _npz_reader(root: Path) -> Reader:
    archives: dict[str, np.lib.npyio.NpzFile] = {}

    def read(part: str, chan: str) -> tuple[NDArray[np.float64], str]:
        path = root / f"{part}.npz"
        if part not in archives:
            archives[part] = read_npz(path, what=f"the {part} arrays of every channel, keyed by chan_id")
        where = f"{path}[{chan!r}]"
        if chan not in archives[part].files:
            raise DataFormatError(f"{path}: no array {chan!r}, although {LABELS_FILE} lists that channel")
        return check_matrix(where, npz_member(archives[part], chan, where)), where

    return read


def _npy_reader(root: Path) -> Reader:
    def read(part: str, chan: str) -> tuple[NDArray[np.float64], str]:
        path = root / part / f"{chan}.npy"
        return read_npy(path, what=f"the {part} array of channel {chan!r}"), str(path)

    return read


def _ranges(csv_path: Path, row: int, chan: str, text: str) -> list[tuple[int, int]]:
    where = f"{csv_path}: row {row} (chan_id {chan!r})"
    try:
        pairs = json.loads(text)
    except json.JSONDecodeError:
        raise DataFormatError(
            f"{where}: anomaly_sequences {text!r} is not a list of [start, end] pairs"
        ) from None
    if not isinstance(pairs, list) or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, int) for v in p) for p in pairs
    ):
        raise DataFormatError(
            f"{where}: anomaly_sequences {text!r} is not a list of [start, end] integer pairs"
        )
    return [(p[0], p[1]) for p in pairs]


def _kinds(csv_path: Path, row: int, chan: str, text: str | None, n: int) -> list[str]:
    if not text:
        return []
    kinds = [k.strip() for k in text.strip().strip("[]").split(",") if k.strip()]
    if len(kinds) != n:
        raise DataFormatError(
            f"{csv_path}: row {row} (chan_id {chan!r}): class lists {len(kinds)} kinds for {n} anomaly ranges"
        )
    return kinds


def _row_events(
    csv_path: Path, row: int, r: dict[str, str], n_rows: int, where: str
) -> list[tuple[int, int, str]]:
    """The ``(start, end, kind)`` events of csv row ``row`` (checked against the ``n_rows`` test rows)."""
    chan = r["chan_id"]
    if r["num_values"].strip() != str(n_rows):
        raise DataFormatError(
            f"{csv_path}: row {row} (chan_id {chan!r}): num_values {r['num_values']!r} "
            f"but {where} has {n_rows} rows"
        )
    ranges = _ranges(csv_path, row, chan, r["anomaly_sequences"])
    for start, end in ranges:
        if not 0 <= start <= end < n_rows:
            raise DataFormatError(
                f"{csv_path}: row {row} (chan_id {chan!r}): label range [{start}, {end}] "
                f"is out of bounds for {where} with {n_rows} rows (ranges are "
                f"inclusive: 0 <= start <= end < {n_rows})"
            )
    ordered = sorted(ranges)
    for (_, end), (start, _) in zip(ordered[:-1], ordered[1:]):
        if start <= end:
            raise DataFormatError(
                f"{csv_path}: row {row} (chan_id {chan!r}): label ranges overlap at row {start} of {where}"
            )
    kinds = _kinds(csv_path, row, chan, r.get("class"), len(ranges)) or [""] * len(ranges)
    return [(start, end, kind) for (start, end), kind in zip(ranges, kinds)]


def _unite(events: list[tuple[int, int, str]]) -> tuple[list[tuple[int, int]], list[str]]:
    """Inclusive ranges of the union of ``events`` (overlapping ones merged), with their kinds joined by ``+``."""
    ranges: list[list[int]] = []
    kinds: list[list[str]] = []
    for start, end, kind in sorted(events):
        if ranges and start <= ranges[-1][1]:
            ranges[-1][1] = max(ranges[-1][1], end)
            if kind not in kinds[-1]:
                kinds[-1].append(kind)
        else:
            ranges.append([start, end])
            kinds.append([kind])
    return [(a, b) for a, b in ranges], ["+".join(k for k in ks if k) for ks in kinds]


def load_telemanom(
    root: str | Path,
    *,
    spacecraft: str | None = None,
    channels: Sequence[str] | str | None = None,
    include_train: bool = False,
) -> Dataset:
    """Load MSL/SMAP from either telemanom layout (module docstring).

    Args:
        root: folder with ``labeled_anomalies.csv`` and ``test.npz``/``train.npz`` or
            ``test/``/``train/`` of ``<chan>.npy``.
        spacecraft: keep only csv rows of this spacecraft (``"MSL"``, ``"SMAP"``); required
            when the csv lists several (their feature counts differ: 55 vs 25).
        channels: keep only these ``chan_id`` values (a list, or one comma-separated string;
            default: every row kept).
        include_train: also add the unlabelled train arrays as nominal-only series.

    Returns:
        A :class:`Dataset` with one series per channel (its test array), named by ``chan_id``.
    """
    root = Path(root)
    include_train = validate.boolean("include_train", include_train)
    csv_path = root / LABELS_FILE
    rows = read_csv_rows(
        csv_path, what="one row per channel: chan_id, spacecraft, anomaly_sequences, class, num_values"
    )
    missing = [c for c in REQUIRED_COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise DataFormatError(
            f"{csv_path}: expected columns {', '.join(REQUIRED_COLUMNS)}"
            + (f"; missing {missing}" if rows else "; the file has no data rows")
        )
    craft = sorted({r["spacecraft"] for r in rows})
    if spacecraft is None and len(craft) > 1:
        raise ValueError(f"{csv_path} lists spacecraft {craft}; pass spacecraft= one of them")
    if spacecraft is not None and spacecraft not in craft:
        raise ValueError(f"spacecraft must be one of {craft} (from {csv_path}), got {spacecraft!r}")
    numbered = [(i + 2, r) for i, r in enumerate(rows) if spacecraft is None or r["spacecraft"] == spacecraft]
    known = list(dict.fromkeys(r["chan_id"] for _, r in numbered))
    if channels is not None:
        channels = validate.names("channels", channels)
        unknown = [c for c in channels if c not in known]
        if unknown:
            raise ValueError(f"channels {unknown} are not in {csv_path}; available: {known}")
        numbered = [(i, r) for i, r in numbered if r["chan_id"] in set(channels)]

    read = _npz_reader(root) if (root / "test.npz").is_file() else _npy_reader(root)
    by_channel: dict[str, list[tuple[int, dict[str, str]]]] = {}
    for row, r in numbered:  # a channel listed on several rows: its labelled ranges are united
        by_channel.setdefault(r["chan_id"], []).append((row, r))
    series: list[Series] = []
    n_features: int | None = None
    first_where = ""
    for chan, listed in by_channel.items():
        test, where = read("test", chan)
        if n_features is None:
            n_features, first_where = test.shape[1], where
        elif test.shape[1] != n_features:
            raise DataFormatError(
                f"{where}: {test.shape[1]} features, but {first_where} has {n_features}; "
                "every channel must have the same feature count"
            )
        events: list[tuple[int, int, str]] = []
        for row, r in listed:
            events += _row_events(csv_path, row, r, test.shape[0], where)
        ranges, kinds = _unite(events)
        series.append(Series.from_events(chan, test, ranges, event_kinds=kinds if any(kinds) else []))
        if include_train:
            train, train_where = read("train", chan)
            if train.shape[1] != n_features:
                raise DataFormatError(
                    f"{train_where}: {train.shape[1]} features, but {first_where} has {n_features}"
                )
            series.append(
                Series(f"{chan}:train", train, np.zeros(train.shape[0], dtype=bool), [], train_only=True)
            )
    if not series:
        raise ValueError(
            f"no channel selected from {csv_path} (spacecraft={spacecraft!r}, channels={channels!r})"
        )
    label = spacecraft or craft[0]
    description = (
        f"telemanom {label} from {root}: {len(by_channel)} channels, labelled test arrays "
        f"(inclusive ranges from {LABELS_FILE})"
        + ("; plus the train arrays as nominal-only training series" if include_train else "")
    )
    assert n_features is not None  # at least one channel was read, or we raised above
    return Dataset(label.lower(), series, n_features, description)
