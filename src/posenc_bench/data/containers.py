"""The containers of the data layer: a labelled series, a dataset, windows, splits.

Shapes (DESIGN "Conventions"): a series holds ``values[T, F]`` (time steps × features),
``labels[T]`` and its anomaly *events* — inclusive ``[start, end]`` index ranges, the
telemanom / OmniAnomaly convention (``labels[start:end + 1] = True``, MSL README).
A window set holds ``X[n, window, F]``.

Events are numbered across a dataset series by series, in order: the events of
``dataset.series[0]`` are ids ``0 … len(events) - 1``, the next series continues; the id
of every window's first overlapping event is stored in :attr:`WindowSet.event`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import validate

SPLIT_NAMES = ("train", "val", "test")


def label_runs(labels: ArrayLike) -> list[tuple[int, int]]:
    """The maximal runs of ``True`` in ``labels[T]`` as inclusive ``(start, end)`` pairs."""
    mask = np.asarray(labels, dtype=bool).astype(np.int8)
    edges = np.diff(np.concatenate(([0], mask, [0])))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1) - 1
    return [(int(s), int(e)) for s, e in zip(starts, ends)]


@dataclass
class Series:
    """One labelled multivariate series.

    Attributes:
        name: identifies the series in messages (a channel id, a machine, a file name).
        values: ``[T, F]`` float64, finite.
        labels: ``[T]`` bool, ``True`` at anomalous time steps; equals the union of ``events``.
        events: inclusive ``(start, end)`` ranges, sorted, disjoint, ``0 ≤ start ≤ end < T``.
        event_kinds: one kind per event (e.g. MSL ``point``/``contextual``, synthetic
            ``spike``/``order``/…), or empty when unknown.
        train_only: nominal-only data that :func:`posenc_bench.data.make_splits` puts wholly in the
            training split (e.g. the unlabelled telemanom train arrays, ``include_train=True``).
    """

    name: str
    values: NDArray[np.float64]
    labels: NDArray[np.bool_]
    events: list[tuple[int, int]]
    event_kinds: list[str] = field(default_factory=list)
    train_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Series name must be a non-empty str, got {self.name!r}")
        where = f"series {self.name!r}"
        self.values = validate.finite_array(f"{where} values", self.values, ndim=2)
        n_steps, n_features = self.values.shape
        if n_steps == 0 or n_features == 0:
            raise ValueError(
                f"{where} values must have at least one time step and one feature, "
                f"got shape {self.values.shape}"
            )
        labels = np.asarray(self.labels)
        if labels.shape != (n_steps,) or labels.dtype != np.bool_:
            raise ValueError(
                f"{where} labels must be a bool array of shape ({n_steps},), "
                f"got {labels.dtype} of shape {labels.shape}"
            )
        self.labels = labels
        self.events = [(int(s), int(e)) for s, e in self.events]
        previous_end = -1
        for start, end in self.events:
            if not 0 <= start <= end < n_steps:
                raise ValueError(
                    f"{where} event [{start}, {end}] is out of bounds: events are "
                    f"inclusive ranges with 0 <= start <= end < T = {n_steps}"
                )
            if start <= previous_end:
                raise ValueError(
                    f"{where} events must be sorted and disjoint; [{start}, {end}] "
                    f"starts at or before the end {previous_end} of the previous event"
                )
            previous_end = end
        expected = np.zeros(n_steps, dtype=bool)
        for start, end in self.events:
            expected[start : end + 1] = True
        if not np.array_equal(expected, labels):
            first = int(np.flatnonzero(expected != labels)[0])
            raise ValueError(
                f"{where} labels disagree with its events at time step {first}; "
                "build the series with Series.from_events or Series.from_labels"
            )
        self.event_kinds = [str(kind) for kind in self.event_kinds]
        if self.event_kinds and len(self.event_kinds) != len(self.events):
            raise ValueError(
                f"{where} has {len(self.events)} events but {len(self.event_kinds)} "
                "event_kinds; give one kind per event or none"
            )

    @classmethod
    def from_events(
        cls,
        name: str,
        values: ArrayLike,
        events: list[tuple[int, int]],
        *,
        event_kinds: list[str] | None = None,
        train_only: bool = False,
    ) -> Series:
        """A series whose labels are the union of the inclusive ``events`` (sorted here)."""
        values = validate.finite_array(f"series {name!r} values", values, ndim=2)
        n_steps = values.shape[0]
        kinds = list(event_kinds) if event_kinds else []
        pairs = [(int(s), int(e)) for s, e in events]
        if kinds and len(kinds) != len(pairs):
            raise ValueError(
                f"series {name!r} has {len(pairs)} events but {len(kinds)} event_kinds; "
                "give one kind per event or none"
            )
        order = sorted(range(len(pairs)), key=lambda i: pairs[i])
        labels = np.zeros(n_steps, dtype=bool)
        for start, end in pairs:
            if not 0 <= start <= end < n_steps:
                raise ValueError(
                    f"series {name!r} event [{start}, {end}] is out of bounds: events are "
                    f"inclusive ranges with 0 <= start <= end < T = {n_steps}"
                )
            labels[start : end + 1] = True
        return cls(
            name,
            values,
            labels,
            [pairs[i] for i in order],
            [kinds[i] for i in order] if kinds else [],
            train_only,
        )

    @classmethod
    def from_labels(
        cls, name: str, values: ArrayLike, labels: ArrayLike, *, train_only: bool = False
    ) -> Series:
        """A series whose events are the maximal runs of anomalous steps in ``labels[T]``."""
        flags = np.asarray(labels)
        if flags.dtype != np.bool_:
            if flags.size and not np.isin(flags, (0, 1)).all():
                bad = flags.ravel()[~np.isin(flags.ravel(), (0, 1))][0]
                raise ValueError(f"series {name!r} labels must be 0 or 1, got {bad!r}")
            flags = flags.astype(bool)
        array = validate.finite_array(f"series {name!r} values", values, ndim=2)
        return cls(name, array, flags, label_runs(flags), [], train_only)

    @property
    def length(self) -> int:
        """``T``, the number of time steps."""
        return int(self.values.shape[0])

    @property
    def n_features(self) -> int:
        """``F``, the number of features."""
        return int(self.values.shape[1])


@dataclass
class Dataset:
    """Labelled series with a common feature count.

    Attributes:
        name: the dataset's name (``"msl"``, ``"synthetic"``, a path, …).
        series: the series, in a fixed order (series indices and event ids follow it).
        n_features: ``F``, shared by every series.
        description: where the data came from and what was selected.
    """

    name: str
    series: list[Series]
    n_features: int
    description: str = ""

    def __post_init__(self) -> None:
        if not self.series or not all(isinstance(s, Series) for s in self.series):
            raise ValueError(f"dataset {self.name!r} must hold at least one Series")
        self.n_features = validate.positive_int("n_features", self.n_features)
        names = [s.name for s in self.series]
        for s in self.series:
            if s.n_features != self.n_features:
                raise ValueError(
                    f"dataset {self.name!r}: series {s.name!r} has {s.n_features} "
                    f"features, the dataset {self.n_features}"
                )
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"dataset {self.name!r}: series names must be unique, repeated: {duplicated}")

    def event_table(self) -> list[tuple[int, int, int]]:
        """``(series index, start, end)`` per event, indexed by event id (module docstring)."""
        return [(i, s, e) for i, series in enumerate(self.series) for s, e in series.events]

    def event_offsets(self) -> NDArray[np.int64]:
        """The id of the first event of each series (``[len(series) + 1]``, cumulative)."""
        counts = [len(s.events) for s in self.series]
        return np.concatenate(([0], np.cumsum(counts))).astype(np.int64)


@dataclass
class WindowSet:
    """Fixed-length windows ready for a model.

    Attributes:
        X: ``[n, window, F]`` float32, normalised.
        y: ``[n]`` int64, 1 when any time step of the window is anomalous.
        series: ``[n]`` index of the source series in ``dataset.series`` (for probes: the
            index of the positive/negative pair the window belongs to).
        start: ``[n]`` first time step of the window in its series.
        event: ``[n]`` id of the first event the window overlaps, ``-1`` for none.
    """

    X: NDArray[np.float32]
    y: NDArray[np.int64]
    series: NDArray[np.int64]
    start: NDArray[np.int64]
    event: NDArray[np.int64]

    def __post_init__(self) -> None:
        if self.X.ndim != 3 or self.X.dtype != np.float32:
            raise ValueError(
                f"WindowSet X must be float32 of shape [n, window, F], got "
                f"{self.X.dtype} of shape {self.X.shape}"
            )
        n = self.X.shape[0]
        for name in ("y", "series", "start", "event"):
            arr = getattr(self, name)
            if arr.shape != (n,) or arr.dtype != np.int64:
                raise ValueError(
                    f"WindowSet {name} must be int64 of shape ({n},), got {arr.dtype} of shape {arr.shape}"
                )

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def window(self) -> int:
        """The window length."""
        return int(self.X.shape[1])

    @property
    def n_features(self) -> int:
        """``F``."""
        return int(self.X.shape[2])


@dataclass
class Splits:
    """Train / validation / test windows and how they were made.

    Attributes:
        train, val, test: the windows of each split.
        summary: per split name, ``{"windows": n, "positives": n, "events": n}`` — windows,
            positive windows, and distinct events overlapped by at least one window.
        center, scale: ``[F]`` the normalisation fitted on training time steps,
            ``X = (values - center) / scale``; ``None`` when not fitted (probes).
        protocol: the resolved options and the exact time ranges of each split
            (``docs/protocol.md``).
    """

    train: WindowSet
    val: WindowSet
    test: WindowSet
    summary: dict[str, dict[str, int]]
    center: NDArray[np.float64] | None = None
    scale: NDArray[np.float64] | None = None
    protocol: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> WindowSet:
        return getattr(self, validate.choice("split", name, SPLIT_NAMES))
