"""Windows over labelled series: where they start, their labels, normalisation.

A window of length ``W`` starting at ``t`` holds the time steps ``t … t + W - 1``; its label
is 1 when **any** of them is anomalous (``docs/protocol.md``). Inside a time range
``[begin, end)`` windows start at ``begin, begin + stride, …`` and one more window ends
exactly at ``end`` when the stride grid stops short of it, so every step of the range is
covered when ``stride ≤ W``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc.errors import UsageError
from posenc_bench.data.containers import Dataset, WindowSet

Segment = tuple[int, int, int]  # (series index, begin, end): the time steps begin … end - 1


def segment_starts(begin: int, end: int, *, window: int, stride: int) -> NDArray[np.int64]:
    """Window starts inside ``[begin, end)`` (module docstring); empty when ``end - begin < window``."""
    last = end - window
    if last < begin:
        return np.empty(0, dtype=np.int64)
    starts = np.arange(begin, last + 1, stride, dtype=np.int64)
    if starts[-1] != last:
        starts = np.append(starts, np.int64(last))
    return starts


def window_labels(labels: NDArray[np.bool_], starts: NDArray[np.int64], window: int) -> NDArray[np.int64]:
    """``y[i] = 1`` iff ``labels[starts[i] : starts[i] + window]`` holds any anomalous step."""
    counts = np.concatenate(([0], np.cumsum(labels, dtype=np.int64)))
    return (counts[starts + window] - counts[starts] > 0).astype(np.int64)


def first_events(events: list[tuple[int, int]], starts: NDArray[np.int64], window: int) -> NDArray[np.int64]:
    """Index into ``events`` (sorted, disjoint, inclusive) of the first one each window overlaps, or -1."""
    if not events:
        return np.full(starts.shape, -1, dtype=np.int64)
    ev_starts = np.array([s for s, _ in events], dtype=np.int64)
    ev_ends = np.array([e for _, e in events], dtype=np.int64)
    first = np.searchsorted(ev_ends, starts, side="left")  # first event ending at or after the start
    inside = first < len(events)
    hit = inside & (ev_starts[np.minimum(first, len(events) - 1)] <= starts + window - 1)
    return np.where(hit, first, -1).astype(np.int64)


def events_covered(
    events: list[tuple[int, int]], starts: NDArray[np.int64], window: int
) -> NDArray[np.bool_]:
    """For each event, whether at least one window (``starts`` sorted) overlaps it."""
    if not events:
        return np.zeros(0, dtype=bool)
    ev = np.asarray(events, dtype=np.int64)
    # a window [t, t + W - 1] overlaps [s, e] iff s - W + 1 <= t <= e
    lo = np.searchsorted(starts, ev[:, 0] - window + 1, side="left")
    hi = np.searchsorted(starts, ev[:, 1], side="right")
    return hi > lo


NORMALISATIONS = ("robust", "zscore", "none")
IQR_TO_STD = 1.3489795003921634  # q75 - q25 of the standard normal: IQR / this estimates σ


def fit_normalisation(
    rows: NDArray[np.float64], *, method: str = "robust"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per-feature ``(center, scale)`` of ``rows[N, F]`` for ``(x - center) / scale``.

    * ``"robust"``: center = median, scale = (q75 − q25) / 1.349 (the interquartile range made
      consistent with σ for Gaussian data), or, when the quartiles coincide (a mostly constant
      feature such as a sparse binary command), the range max − min, so such a feature stays
      within [-1, 1] on training data instead of being blown up by a tiny σ. Extreme values —
      labelled anomalies in the training split — barely move it.
    * ``"zscore"``: center = mean, scale = standard deviation.
    * ``"none"``: center 0, scale 1.

    A feature that is constant on ``rows`` gets scale 1 and its constant as center, so there is
    never a division by zero and a constant training feature maps to exactly 0.
    """
    validate.choice("normalisation", method, NORMALISATIONS)
    if rows.ndim != 2 or rows.shape[0] == 0:
        raise ValueError(
            f"cannot fit a normalisation on zero training time steps (rows of shape {rows.shape})"
        )
    n_features = rows.shape[1]
    if method == "none":
        return np.zeros(n_features), np.ones(n_features)
    constant = rows.max(axis=0) == rows.min(axis=0)
    if method == "zscore":
        center, scale = rows.mean(axis=0), rows.std(axis=0)
    else:
        q25, center, q75 = np.percentile(rows, [25, 50, 75], axis=0)
        scale = np.where(q75 > q25, (q75 - q25) / IQR_TO_STD, rows.max(axis=0) - rows.min(axis=0))
    center = np.where(constant, rows[0], center)
    scale = np.where(constant | (scale == 0), 1.0, scale)
    return center, scale


class WindowIndex(NamedTuple):
    """Where the windows of a set are and their labels, without their values (each ``[n]`` int64)."""

    series: NDArray[np.int64]
    start: NDArray[np.int64]
    y: NDArray[np.int64]
    event: NDArray[np.int64]


def window_index(dataset: Dataset, segments: list[Segment], *, window: int, stride: int) -> WindowIndex:
    """Series, start, label and first event id of every window inside ``segments`` (in order)."""
    offsets = dataset.event_offsets()
    parts: list[tuple[NDArray[np.int64], ...]] = []
    for index, begin, end in segments:
        source = dataset.series[index]
        starts = segment_starts(begin, end, window=window, stride=stride)
        local = first_events(source.events, starts, window)
        parts.append(
            (
                np.full(len(starts), index, dtype=np.int64),
                starts,
                window_labels(source.labels, starts, window),
                np.where(local >= 0, local + offsets[index], -1).astype(np.int64),
            )
        )
    if not parts:
        return WindowIndex(*(np.empty(0, dtype=np.int64) for _ in range(4)))
    return WindowIndex(*(np.concatenate(column) for column in zip(*parts)))


def materialise(
    dataset: Dataset,
    index: WindowIndex,
    *,
    window: int,
    center: NDArray[np.float64] | None = None,
    scale: NDArray[np.float64] | None = None,
) -> WindowSet:
    """The windows listed by ``index``, normalised by ``(center, scale)`` if given.

    Returns a :class:`WindowSet` with ``X[n, window, F]`` float32 (computed in float64, then cast).
    """
    X = np.empty((len(index.start), window, dataset.n_features), dtype=np.float32)
    steps = np.arange(window)
    for i in np.unique(index.series):
        rows = np.flatnonzero(index.series == i)
        values = dataset.series[int(i)].values[index.start[rows, None] + steps]  # [m, window, F] float64
        X[rows] = values if center is None else (values - center) / scale
    return WindowSet(X, index.y, index.series, index.start, index.event)


def make_windows(
    dataset: Dataset,
    *,
    window: int,
    stride: int,
    center: NDArray[np.float64] | None = None,
    scale: NDArray[np.float64] | None = None,
) -> WindowSet:
    """Every window of every series (no split), e.g. to score new data with a trained model.

    Pass the ``center``/``scale`` of :class:`~posenc_bench.data.Splits` to normalise as in training.
    """
    window = validate.positive_int("window", window)
    stride = validate.positive_int("stride", stride)
    require_length(dataset, window)
    segments = [(i, 0, s.length) for i, s in enumerate(dataset.series)]
    index = window_index(dataset, segments, window=window, stride=stride)
    return materialise(dataset, index, window=window, center=center, scale=scale)


def require_length(dataset: Dataset, window: int) -> None:
    """Raise unless every series holds at least one window of length ``window``."""
    short = [s for s in dataset.series if s.length < window]
    if short:
        shortest = min(short, key=lambda s: s.length)
        raise UsageError(
            f"window={window} is longer than series {shortest.name!r} of dataset "
            f"{dataset.name!r} ({shortest.length} time steps; {len(short)} series are "
            f"shorter than the window); use window <= "
            f"{min(s.length for s in dataset.series)}"
        )
