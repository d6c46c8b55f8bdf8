"""Built-in synthetic telemetry with three families of injected anomalies (``docs/datasets.md``).

Each series has ``n_sensors`` continuous channels, then a binary ``command`` channel and a
noise-free ``response`` channel (a valve-position indicator, say): ``n_sensors + 2`` features.

* **Sensors**: ``a_j · fast(t) + b_j · slow(t) + c_j + noise``, a fast periodic source
  (period 40–60 steps), a slow one (300–600 steps), per-sensor random mixing and offset,
  Gaussian noise σ = 0.1. The sensors know nothing of the commands.
* **Procedures**: a command pulse (``command = 1`` at one step ``c``) every 24–48 steps; in
  normal operation the response pulse ``RESPONSE = (0.5, 1, 0.5)`` follows at the fixed lag
  ``LAG = 4`` (``response[c + 4 : c + 7] = RESPONSE``), and is 0 elsewhere.

Anomalies, the events, in three families (``Series.event_kinds`` names each event's kind;
``FAMILIES`` maps kinds to families). The number of each kind is a rate per 1,000 steps.

1. **Point** — ``spike``: one sensor at one step is off by ``±SPIKE_SIZE`` (6) of its standard
   deviations; nothing else changes. Visible in a single time step.
2. **Order/timing** — a procedure whose response comes at the wrong time, the same command
   and the same response pulse, moved: ``order``, the response *precedes* the command
   (``response[c - 6 : c - 3] = RESPONSE``, the nominal pattern reversed in time); ``timing``,
   the response follows at a wrong lag, ``TIMING_LAGS = (1, 7)`` instead of 4. Every other
   value is what it would be in normal operation, so a window that holds the procedure has the
   same per-feature multiset of values as if the procedure were normal, and — the sensors being
   independent of the procedures — its rows are distributed as in a normal window: order-free
   statistics cannot tell them apart. The event runs from the first to the last step of the
   displaced pattern (command and response).
3. **Long-range** — over ``LONG_SPAN`` = 96–192 steps (3–6 windows of 32):
   ``level_shift``, two sensors shift by ``SHIFT_SIZE`` (2.5) of their standard deviations;
   ``frequency``, the fast source runs 3 times slower (``FREQUENCY_FACTOR`` = 1/3),
   phase-continuous. Kinds alternate, ``level_shift`` first in even-numbered series.

Events never overlap and are at least ``MARGIN`` steps apart. Deterministic by ``seed``:
series ``i`` draws its channel (source periods, mixing, offsets) from
``numpy.random.SeedSequence([seed, i, 2])`` and the rest from ``SeedSequence([seed, i])``, spawned
into one stream per component (signal phases and noise, long-range, schedule, order/timing,
spikes); its optional nominal training array shares the channel and draws the rest from
``SeedSequence([seed, i, 1])``. Spikes avoid every procedure
(normal or not), so changing the order/timing rates moves nothing else, and changing the
spike rate moves nothing else either: ``make_synthetic(order=0, timing=0)`` is the nominal
counterpart of the default data (tests rely on this).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from numpy.typing import NDArray

from posenc import validate
from posenc_bench.data.containers import Dataset, Series

LAG = 4
RESPONSE = np.array([0.5, 1.0, 0.5])
ORDER_LAG = -(LAG + len(RESPONSE) - 1)  # the nominal pattern reversed: response ends LAG steps before c
TIMING_LAGS = (1, 7)
PROCEDURE_GAP = (24, 48)  # steps between commands, inclusive
SPIKE_SIZE = 6.0
SHIFT_SIZE = 2.5
FREQUENCY_FACTOR = 1 / 3
LONG_SPAN = (96, 192)  # inclusive
MARGIN = 4  # steps kept free between events
FAMILIES = {
    "spike": "point",
    "order": "order/timing",
    "timing": "order/timing",
    "level_shift": "long-range",
    "frequency": "long-range",
}
KINDS = tuple(FAMILIES)

# the steps a procedure at c may touch, over every variant: [c + REACH[0], c + REACH[1]]
REACH = (min(0, ORDER_LAG), max(LAG, *TIMING_LAGS) + len(RESPONSE) - 1)


def _count(rate: float, length: int) -> int:
    """Events of a kind in a series: ``round(rate · length / 1000)``."""
    return int(round(rate * length / 1000))


def _long_ranges(rng: np.random.Generator, length: int, count: int) -> list[tuple[int, int]]:
    """``count`` disjoint ranges of ``LONG_SPAN`` steps, at least ``LONG_SPAN[0]`` apart and off the ends."""
    gap = LONG_SPAN[0]
    placed: list[tuple[int, int]] = []
    for _ in range(100 * count):
        if len(placed) == count:
            break
        span = int(rng.integers(LONG_SPAN[0], LONG_SPAN[1] + 1))
        if length - span - gap < gap:
            break
        begin = int(rng.integers(gap, length - span - gap + 1))
        end = begin + span - 1
        if all(end + gap < b or begin > e + gap for b, e in placed):
            placed.append((begin, end))
    if len(placed) < count:
        raise ValueError(
            f"length={length} is too short for {count} long-range anomalies of "
            f"{LONG_SPAN[0]}-{LONG_SPAN[1]} steps each"
        )
    return sorted(placed)


def _procedure_times(rng: np.random.Generator, length: int) -> NDArray[np.int64]:
    """Command steps ``c``, gaps uniform in ``PROCEDURE_GAP``, every variant inside ``[0, length)``."""
    gaps = rng.integers(PROCEDURE_GAP[0], PROCEDURE_GAP[1] + 1, size=length // PROCEDURE_GAP[0] + 1)
    times = np.cumsum(gaps) - PROCEDURE_GAP[0] // 2
    return times[(times + REACH[0] >= 0) & (times + REACH[1] < length)]


def _channel(rng: np.random.Generator, n_sensors: int) -> dict[str, NDArray[np.float64]]:
    """What makes a series one channel: source periods, sensor mixing and offsets (shared by its train array)."""
    return {
        "fast_period": rng.uniform(40, 60, size=1),
        "slow_period": rng.uniform(300, 600, size=1),
        "mixing": rng.normal(0.0, 1.0, (n_sensors, 2)),
        "offsets": rng.normal(0.0, 1.0, n_sensors),
    }


def _one_series(
    name: str,
    seeds: np.random.SeedSequence,
    *,
    length: int,
    n_sensors: int,
    counts: dict[str, int],
    first_long: int,
    channel: dict[str, NDArray[np.float64]],
    train_only: bool = False,
) -> Series:
    signal_rng, long_rng, schedule_rng, procedure_rng, spike_rng = (
        np.random.default_rng(s) for s in seeds.spawn(5)
    )
    events: list[tuple[int, int]] = []
    kinds: list[str] = []

    # long-range ranges first: everything else keeps clear of them
    long_ranges = _long_ranges(long_rng, length, counts["long_range"])
    long_kinds = [("level_shift", "frequency")[(first_long + k) % 2] for k in range(len(long_ranges))]
    busy = np.zeros(length, dtype=bool)  # steps (with margins) that a later spike must avoid
    for (begin, end), kind in zip(long_ranges, long_kinds):
        busy[max(0, begin - MARGIN) : end + MARGIN + 1] = True
        events.append((begin, end))
        kinds.append(kind)

    # sensors: fast and slow sources, mixed, plus noise; the frequency anomaly speeds up the fast one
    t = np.arange(length)
    frequency = np.full(length, 1.0 / channel["fast_period"][0])
    for (begin, end), kind in zip(long_ranges, long_kinds):
        if kind == "frequency":
            frequency[begin : end + 1] *= FREQUENCY_FACTOR
    fast = np.sin(2 * np.pi * np.cumsum(frequency) + signal_rng.uniform(0, 2 * np.pi))
    slow = np.sin(2 * np.pi * t / channel["slow_period"][0] + signal_rng.uniform(0, 2 * np.pi))
    mixing, offsets = channel["mixing"], channel["offsets"]
    noise = signal_rng.normal(0.0, 0.1, (length, n_sensors))
    sensors = np.stack([fast, slow], axis=1) @ mixing.T + offsets + noise
    sensor_std = sensors.std(axis=0)
    for (begin, end), kind in zip(long_ranges, long_kinds):
        if kind == "level_shift":
            channels = long_rng.choice(n_sensors, size=min(2, n_sensors), replace=False)
            sensors[begin : end + 1, channels] += SHIFT_SIZE * sensor_std[channels]

    # procedures: every one is normal unless drawn as an order/timing anomaly
    commands = _procedure_times(schedule_rng, length)
    lags = np.full(len(commands), LAG)
    for c in commands:
        busy[max(0, c + REACH[0] - MARGIN) : c + REACH[1] + MARGIN + 1] = True
    in_long = np.zeros(length, dtype=bool)
    for begin, end in long_ranges:
        in_long[max(0, begin - MARGIN - REACH[1]) : end + MARGIN - REACH[0] + 1] = True
    candidates = procedure_rng.permutation(np.flatnonzero(~in_long[commands]))
    n_order, n_timing = counts["order"], counts["timing"]
    if len(candidates) < n_order + n_timing:
        raise ValueError(
            f"length={length} is too short for {n_order} order and {n_timing} timing anomalies "
            f"({len(candidates)} procedures available)"
        )
    lags[candidates[:n_order]] = ORDER_LAG
    lags[candidates[n_order : n_order + n_timing]] = procedure_rng.choice(TIMING_LAGS, size=n_timing)
    for k in candidates[: n_order + n_timing]:
        c, lag = int(commands[k]), int(lags[k])
        events.append((min(c, c + lag), max(c, c + lag + len(RESPONSE) - 1)))
        kinds.append("order" if lag == ORDER_LAG else "timing")
    command = np.zeros(length)
    command[commands] = 1.0
    response = np.zeros(length)
    for offset, value in enumerate(RESPONSE):
        response[commands + lags + offset] = value

    # spikes: single steps clear of long ranges, of every procedure and of each other
    placed = 0
    for step in spike_rng.permutation(np.flatnonzero(~busy)):
        if placed == counts["spikes"]:
            break
        if busy[step]:
            continue
        sensor = int(spike_rng.integers(n_sensors))
        sensors[step, sensor] += spike_rng.choice([-1.0, 1.0]) * SPIKE_SIZE * sensor_std[sensor]
        busy[max(0, step - MARGIN) : step + MARGIN + 1] = True
        events.append((int(step), int(step)))
        kinds.append("spike")
        placed += 1
    if placed < counts["spikes"]:
        raise ValueError(f"length={length} is too short for {counts['spikes']} spikes")
    values = np.concatenate([sensors, command[:, None], response[:, None]], axis=1)
    return Series.from_events(name, values, events, event_kinds=kinds, train_only=train_only)


def _rate(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0 (events per 1,000 steps), got {value!r}")
    return float(value)


def make_synthetic(
    *,
    n_series: int = 5,
    length: int = 6144,
    seed: int = 0,
    n_sensors: int = 4,
    spikes: float = 1.0,
    order: float = 5.0,
    timing: float = 5.0,
    long_range: float = 0.3,
    nominal_length: int = 0,
) -> Dataset:
    """The built-in synthetic dataset (module docstring): ``n_series`` series of ``[length, n_sensors + 2]``.

    Args:
        n_series: number of independent series (channels).
        length: time steps per series (at least 512).
        seed: selects everything; series ``i`` uses ``SeedSequence([seed, i])``.
        n_sensors: continuous channels (then ``command`` and ``response``).
        spikes, order, timing, long_range: events of each kind per 1,000 steps; a series holds
            ``round(rate · length / 1000)`` of each (long-range kinds alternate).
        nominal_length: when > 0, each series ``synthetic-i`` also gets a nominal training array
            ``synthetic-i:train`` of this many steps (``train_only``, no anomalies): the same
            channel (source periods, mixing, offsets) with its own phases, noise and procedure
            schedule (``SeedSequence([seed, i, 1])``). This is what ``posenc bench --task detect`` trains on.

    The default (5 × 6144 steps; per series 6 spikes, 31 order, 31 timing and 2 long-range
    events) gives about 1,750 windows of 32 steps at stride 16 (``posenc bench``'s default). Order
    and timing anomalies dominate on purpose: there the label is carried by the order of steps
    alone, so the default benchmark can tell encodings that give order from ``none``.

    Raises:
        ValueError: a bad option, or more events than a series of ``length`` steps can hold.
    """
    n_series = validate.positive_int("n_series", n_series)
    length = validate.positive_int("length", length)
    n_sensors = validate.positive_int("n_sensors", n_sensors)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if length < 512:
        raise ValueError(f"length must be at least 512 steps, got {length}")
    if (
        isinstance(nominal_length, bool)
        or not isinstance(nominal_length, numbers.Integral)
        or not (nominal_length == 0 or nominal_length >= 512)
    ):
        raise ValueError(
            f"nominal_length must be 0 (no training arrays) or an int >= 512, got {nominal_length!r}"
        )
    rates = {
        name: _rate(name, value)
        for name, value in (
            ("spikes", spikes),
            ("order", order),
            ("timing", timing),
            ("long_range", long_range),
        )
    }
    counts = {name: _count(rate, length) for name, rate in rates.items()}
    nominal = dict.fromkeys(counts, 0)
    series = []
    for i in range(n_series):
        sequence = np.random.SeedSequence([int(seed), i])
        channel = _channel(np.random.default_rng(np.random.SeedSequence([int(seed), i, 2])), n_sensors)
        series.append(
            _one_series(
                f"synthetic-{i}",
                sequence,
                length=length,
                n_sensors=n_sensors,
                counts=counts,
                first_long=i % 2,
                channel=channel,
            )
        )
        if nominal_length:
            series.append(
                _one_series(
                    f"synthetic-{i}:train",
                    np.random.SeedSequence([int(seed), i, 1]),
                    length=int(nominal_length),
                    n_sensors=n_sensors,
                    counts=nominal,
                    first_long=0,
                    channel=channel,
                    train_only=True,
                )
            )
    description = (
        f"synthetic telemetry (seed {seed}): {n_series} series × {length} steps, "
        f"{n_sensors} sensors + command + response; per series {counts['spikes']} spike, "
        f"{counts['order']} order, {counts['timing']} timing and {counts['long_range']} "
        "long-range anomalies"
        + (f"; plus a nominal training array of {nominal_length} steps per series" if nominal_length else "")
    )
    return Dataset("synthetic", series, n_sensors + 2, description)
