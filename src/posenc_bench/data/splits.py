"""Leakage-free, event-aware, blocked train / validation / test splits (``docs/protocol.md``).

1. **Timelines.** Series with byte-identical values (exact duplicates, detected by content,
   e.g. MSL's two channels with one test array) form one timeline and move together.
2. **Blocks.** Each timeline is cut into contiguous blocks of about ``block`` steps. With
   ``group_events`` a cut ``c`` is never placed where an event ``[s, e]`` (of any series of
   the timeline) would fall on both sides of it or inside the purge gap after it
   (``s - purge < c <= e``): the cut moves to the nearest allowed position, and cuts that
   would leave a block shorter than ``window + purge`` are dropped.
3. **Assignment.** Blocks holding an anomalous step and blocks holding none are two strata;
   each stratum is shuffled with ``seed`` and dealt to train/val/test by largest deficit
   against ``fractions`` (block counts), so every split receives anomalous blocks as soon as
   there are enough of them. Blocks of ``train_only`` series go to train.
4. **Purge.** Adjacent blocks of one split merge into a segment; a segment that follows a
   segment of another split starts ``purge`` steps late, so at least ``purge`` unused steps
   separate any two windows of different splits. Windows never leave their segment.
5. **Normalisation** (median/IQR by default) is fitted on the time steps covered by training
   windows only, pooled over series: one center and one scale per feature.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc_bench.data.containers import SPLIT_NAMES, Dataset, Splits
from posenc_bench.data.windows import (
    NORMALISATIONS,
    Segment,
    WindowIndex,
    events_covered,
    fit_normalisation,
    materialise,
    require_length,
    window_index,
)

DEFAULT_WINDOW = 64
DEFAULT_STRIDE = 16
BLOCKS_PER_WINDOW = 8  # default block = 8 windows


def _fractions(value: Sequence[float]) -> NDArray[np.float64]:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"fractions must be three numbers (train, val, test), got {value!r}") from None
    if arr.shape != (3,) or not np.isfinite(arr).all() or (arr <= 0).any() or abs(arr.sum() - 1) > 1e-9:
        raise ValueError(
            f"fractions must be three numbers > 0 summing to 1 (train, val, test), got {value!r}"
        )
    return arr


def duplicate_groups(dataset: Dataset) -> list[list[int]]:
    """Indices of series grouped by byte-identical ``values`` (shape and content), in order."""
    groups: dict[tuple[tuple[int, ...], bytes], list[int]] = {}
    for index, series in enumerate(dataset.series):
        values = np.ascontiguousarray(series.values)
        key = (values.shape, hashlib.blake2b(values.tobytes(), digest_size=16).digest())
        groups.setdefault(key, []).append(index)
    out: list[list[int]] = []
    for members in groups.values():  # a hash collision must not merge different series
        while members:
            head = dataset.series[members[0]].values
            same = [m for m in members if np.array_equal(dataset.series[m].values, head)]
            out.append(same)
            members = [m for m in members if m not in same]
    return sorted(out)


def _merge(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of inclusive integer intervals, sorted; touching intervals merge."""
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def block_cuts(
    length: int, events: list[tuple[int, int]], *, block: int, purge: int, min_block: int
) -> list[int]:
    """Cut positions ``c`` (a block ends at ``c - 1``, the next starts at ``c``) for one timeline.

    Nominal cuts at multiples of ``block``; a cut forbidden by an event (``s - purge < c <= e``)
    moves to the nearest allowed position; cuts leaving a block shorter than ``min_block`` are
    dropped (greedily, left to right).
    """
    forbidden = _merge([(s - purge + 1, e) for s, e in events])
    cuts: list[int] = []
    for c in range(block, length, block):
        for lo, hi in forbidden:
            if lo <= c <= hi:
                c = lo - 1 if c - (lo - 1) <= (hi + 1) - c else hi + 1
                break
        cuts.append(c)
    kept: list[int] = []
    for c in sorted(set(cuts)):
        if c - (kept[-1] if kept else 0) >= min_block and length - c >= min_block:
            kept.append(c)
    return kept


def _deal(
    units: NDArray[np.int64], fractions: NDArray[np.float64], rng: np.random.Generator, out: NDArray[np.int64]
) -> None:
    """Shuffle ``units`` and give each to the split furthest below its share (counts)."""
    counts = np.zeros(3)
    for i, unit in enumerate(rng.permutation(units)):
        k = int(np.argmax(fractions * (i + 1) - counts))
        out[unit] = k
        counts[k] += 1


def _summary(dataset: Dataset, index: WindowIndex, window: int) -> dict[str, int]:
    covered = 0
    for i, series in enumerate(dataset.series):
        starts = np.sort(index.start[index.series == i])
        covered += int(events_covered(series.events, starts, window).sum())
    return {"windows": len(index.start), "positives": int(index.y.sum()), "events": covered}


def covered_steps(dataset: Dataset, index: WindowIndex, window: int) -> list[NDArray[np.bool_]]:
    """Per series, ``[T]`` bool: the time steps that some window of ``index`` holds."""
    masks = []
    for i, series in enumerate(dataset.series):
        change = np.zeros(series.length + 1, dtype=np.int64)
        starts = index.start[index.series == i]
        np.add.at(change, starts, 1)
        np.add.at(change, starts + window, -1)
        masks.append(np.cumsum(change)[:-1] > 0)
    return masks


PROTOCOLS = ("blocked", "random_windows", "dfstrans")
"""Split protocols. ``"blocked"`` (default) is leakage-free (module docstring). ``"random_windows"``
deals windows to splits at random, as much of the literature does: overlapping windows then
share time steps across splits and whole events are seen in training, so test scores are
inflated. It exists to *measure* that inflation, never to report a result. ``"dfstrans"`` is the
protocol of Labaien et al. (2023): stratified random splits of non-overlapping segments with
min–max scaling (:func:`posenc_bench.data.instances.instance_splits`), also leaky; it exists to
reproduce their results."""


def make_splits(
    dataset: Dataset,
    *,
    window: int = DEFAULT_WINDOW,
    stride: int = DEFAULT_STRIDE,
    purge: int | None = None,
    fractions: Sequence[float] = (0.6, 0.2, 0.2),
    seed: int = 0,
    group_events: bool = True,
    group_duplicates: bool = True,
    block: int | None = None,
    normalisation: str = "robust",
    protocol: str = "blocked",
    anomaly_percent: float = 100.0,
) -> Splits:
    """Split ``dataset`` into train / val / test windows without leakage (module docstring).

    Args:
        dataset: the labelled series.
        window: window length ``W`` (time steps per window).
        stride: step between window starts inside a segment.
        purge: unused steps between segments of different splits; default ``window``.
        fractions: target shares of blocks for (train, val, test), each > 0, summing to 1.
        seed: selects the block assignment; repeated splits are different seeds.
        group_events: keep every event (and the purge before it) inside one block.
        group_duplicates: move series with byte-identical values together.
        block: nominal block length; default ``max(8 * window, 2 * (window + purge))``; at
            least ``window + purge``.
        normalisation: ``"robust"`` (median / IQR), ``"zscore"`` or ``"none"``
            (:func:`~posenc_bench.data.fit_normalisation`), fitted on training time steps.
        protocol: ``"blocked"`` (leakage-free, the default) or ``"random_windows"`` (LEAKY:
            windows dealt at random, shares of windows; ``purge``, ``block`` and the grouping
            options do not apply) — see :data:`PROTOCOLS`; or ``"dfstrans"``: instances are
            non-overlapping windows, split by :func:`posenc_bench.data.instances.instance_splits` (only
            ``seed`` and ``anomaly_percent`` apply).
        anomaly_percent: ``"dfstrans"`` only: anomalous instances kept, percent of all, in (0, 100].

    Returns:
        :class:`Splits` with ``X[n, window, F]`` normalised by statistics of the training
        time steps, the per-split summary and the protocol (resolved options, segments).

    Raises:
        ValueError: bad options, a series shorter than ``window``, or a split without
            positive windows (raised before any window is materialised).
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(
            f"dataset must be a posenc_bench.data.Dataset, got {type(dataset).__name__}"
            + (
                "; a probe suite gives its splits per distance: suite.splits(k)"
                if hasattr(dataset, "splits")
                else ""
            )
        )
    validate.choice("protocol", protocol, PROTOCOLS)
    group_events = validate.boolean("group_events", group_events)
    group_duplicates = validate.boolean("group_duplicates", group_duplicates)
    if protocol == "dfstrans":
        from posenc_bench.data.instances import instance_splits

        return instance_splits(dataset, segment=window, seed=seed, anomaly_percent=anomaly_percent)
    window = validate.positive_int("window", window)
    stride = validate.positive_int("stride", stride)
    purge = window if purge is None else validate.non_negative_int("purge", purge)
    block = (
        max(BLOCKS_PER_WINDOW * window, 2 * (window + purge))
        if block is None
        else validate.positive_int("block", block)
    )
    if block < window + purge:
        raise ValueError(f"block must be at least window + purge = {window + purge}, got {block}")
    seed = validate.non_negative_int("seed", seed)
    validate.choice("normalisation", normalisation, NORMALISATIONS)
    shares = _fractions(fractions)
    require_length(dataset, window)
    if not any(s.events for s in dataset.series):
        raise ValueError(
            f"dataset {dataset.name!r} has no labelled anomalies, so no split can hold positive windows"
        )
    if all(s.labels.all() for s in dataset.series):
        raise ValueError(
            f"dataset {dataset.name!r} has no normal time steps (every label is 1), so no split can "
            "hold negative windows; a classifier needs both classes"
        )
    rng = np.random.default_rng(seed)
    if protocol == "random_windows":
        indices, record = _random_window_indices(
            dataset, window=window, stride=stride, shares=shares, rng=rng
        )
    else:
        indices, record = _blocked_indices(
            dataset,
            window=window,
            stride=stride,
            purge=purge,
            block=block,
            shares=shares,
            rng=rng,
            group_events=group_events,
            group_duplicates=group_duplicates,
        )
    why_empty = record.pop("why_empty", "")
    summary = {name: _summary(dataset, indices[name], window) for name in SPLIT_NAMES}
    empty = [name for name in SPLIT_NAMES if summary[name]["positives"] == 0]
    if empty:
        n_events = sum(len(s.events) for s in dataset.series)
        raise ValueError(
            f"split {empty[0]!r} of dataset {dataset.name!r} has no positive windows (seed={seed}, "
            f"protocol={protocol!r}, fractions={tuple(float(f) for f in shares)}, block={block}, purge={purge}): "
            f"{why_empty}{n_events} events in all; use a smaller block, a shorter window "
            f"or purge, or other fractions; counts per split: {summary}"
        )

    rows = np.concatenate(
        [
            dataset.series[i].values[mask]
            for i, mask in enumerate(covered_steps(dataset, indices["train"], window))
        ]
    )
    center, scale = fit_normalisation(rows, method=normalisation)

    windows = {
        name: materialise(dataset, indices[name], window=window, center=center, scale=scale)
        for name in SPLIT_NAMES
    }
    protocol_record = {
        "protocol": protocol,
        "leakage_free": protocol == "blocked",
        "dataset": dataset.name,
        "window": window,
        "stride": stride,
        "fractions": [float(f) for f in shares],
        "seed": seed,
        "normalisation": normalisation,
        **record,
        "train_time_steps": int(rows.shape[0]),
    }
    return Splits(windows["train"], windows["val"], windows["test"], summary, center, scale, protocol_record)


def _random_window_indices(
    dataset: Dataset, *, window: int, stride: int, shares: NDArray[np.float64], rng: np.random.Generator
) -> tuple[dict[str, WindowIndex], dict]:
    """LEAKY protocol: every window of every series, shuffled and cut by ``shares`` of windows."""
    everything = window_index(
        dataset, [(i, 0, s.length) for i, s in enumerate(dataset.series)], window=window, stride=stride
    )
    order = rng.permutation(len(everything.start))
    bounds = np.round(np.cumsum(shares)[:-1] * len(order)).astype(int)
    parts = np.split(order, bounds)
    indices = {
        name: WindowIndex(*(column[np.sort(part)] for column in everything))
        for name, part in zip(SPLIT_NAMES, parts)
    }
    return indices, {"windows": {name: len(part) for name, part in zip(SPLIT_NAMES, parts)}}


def _blocked_indices(
    dataset: Dataset,
    *,
    window: int,
    stride: int,
    purge: int,
    block: int,
    shares: NDArray[np.float64],
    rng: np.random.Generator,
    group_events: bool,
    group_duplicates: bool,
) -> tuple[dict[str, WindowIndex], dict]:
    """The leakage-free blocked assignment of the module docstring: window indices per split and its record."""
    timelines = duplicate_groups(dataset) if group_duplicates else [[i] for i in range(len(dataset.series))]
    units: list[tuple[int, int, int]] = []  # (timeline, begin, end)
    for t, members in enumerate(timelines):
        length = dataset.series[members[0]].length
        events = [ev for m in members for ev in dataset.series[m].events] if group_events else []
        cuts = block_cuts(length, events, block=block, purge=purge, min_block=window + purge)
        bounds = [0, *cuts, length]
        units.extend((t, b, e) for b, e in zip(bounds[:-1], bounds[1:]))

    positive = np.array([any(dataset.series[m].labels[b:e].any() for m in timelines[t]) for t, b, e in units])
    forced = np.array([any(dataset.series[m].train_only for m in timelines[t]) for t, _, _ in units])
    assignment = np.zeros(len(units), dtype=np.int64)
    for stratum in (positive & ~forced, ~positive & ~forced):
        _deal(np.flatnonzero(stratum), shares, rng, assignment)

    segments: dict[str, list[Segment]] = {name: [] for name in SPLIT_NAMES}
    previous: tuple[int, int] | None = None  # (timeline, split) of the last merged segment
    merged: list[list[int]] = []  # [timeline, begin, end, split]
    for (t, b, e), k in zip(units, assignment):
        if previous == (t, int(k)):
            merged[-1][2] = e
        else:
            begin = b + purge if previous is not None and previous[0] == t else b
            merged.append([t, begin, e, int(k)])
        previous = (t, int(k))
    for t, begin, end, part in merged:
        segments[SPLIT_NAMES[part]].extend((m, begin, end) for m in timelines[t])

    indices = {
        name: window_index(dataset, segments[name], window=window, stride=stride) for name in SPLIT_NAMES
    }
    names = [s.name for s in dataset.series]
    record = {
        "purge": purge,
        "block": block,
        "group_events": group_events,
        "group_duplicates": group_duplicates,
        "duplicate_groups": [[names[m] for m in g] for g in timelines if len(g) > 1],
        "blocks": {name: int((assignment == k).sum()) for k, name in enumerate(SPLIT_NAMES)},
        "segments": {name: [(names[i], b, e) for i, b, e in segments[name]] for name in SPLIT_NAMES},
        "why_empty": f"only {int((positive & ~forced).sum())} blocks hold anomalies; ",
    }
    return indices, record
