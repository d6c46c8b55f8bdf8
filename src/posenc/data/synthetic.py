"""Built-in synthetic telemetry with injected anomalies of known kinds (``docs/datasets.md``).

Each series mimics MSL-like telemetry: ``n_sensors`` correlated continuous channels, then
three binary command features ``A, B, C`` (columns ``n_sensors … n_sensors + 2``).

* Sensors: a random mixture of a periodic source (period 40–60 steps), a slower periodic
  source (150–250 steps) and a slow random-walk drift, plus Gaussian noise (σ = 0.1).
* Commands: a *procedure* every 40–90 steps issues ``A`` and, ``LAG = 6`` steps later, ``B``;
  ``C`` fires at random (about one step in 100). Each command adds a short response bump
  (``RESPONSE``) to its own sensor (``A`` → sensor 0, ``B`` → 1, ``C`` → 2), right after it.

Anomalies (the events; each series has ``spikes + order + timing + long_range`` of them):

* ``spike`` — one sensor at one step is off by ±6 of its standard deviations: visible in a
  single point.
* ``order`` — a procedure issues ``B`` first and ``A`` ``LAG`` steps later; ``timing`` — ``B``
  comes 2 or 3 steps early or late. The window holds the same commands and the same response
  bumps, only moved in time, so order-free window statistics (counts, means, extremes) do not
  tell them from a normal procedure. The event runs from the procedure's first command to the
  end of the last response bump.
* ``level_shift`` (even series) — over 1/16–1/8 of the series, two sensors shift by 0.75 of
  their standard deviations; ``frequency`` (odd series) — over such a range the fast
  periodic source runs 1.6× faster (phase-continuous). Visible only over long ranges.

Deterministic by ``seed``: series ``i`` draws from ``numpy.random.SeedSequence([seed, i])``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from posenc import _validate
from posenc.data.containers import Dataset, Series

LAG = 6
RESPONSE = np.array([0.8, 0.5, 0.25])
SPIKE_SIZE = 6.0
SHIFT_SIZE = 0.75
FREQUENCY_FACTOR = 1.6
MARGIN = 8  # steps kept free around every event
KINDS = ("spike", "order", "timing", "level_shift", "frequency")


def _free(mask: NDArray[np.bool_], begin: int, end: int) -> bool:
    """Whether ``[begin - MARGIN, end + MARGIN]`` is clear of events in ``mask``."""
    return not mask[max(0, begin - MARGIN):end + MARGIN + 1].any()


def _one_series(name: str, rng: np.random.Generator, *, length: int, n_sensors: int, spikes: int,
                order: int, timing: int, long_kind: str | None) -> Series:
    t = np.arange(length)
    taken = np.zeros(length, dtype=bool)
    events: list[tuple[int, int]] = []
    kinds: list[str] = []

    def claim(begin: int, end: int, kind: str) -> None:
        taken[begin:end + 1] = True
        events.append((begin, end))
        kinds.append(kind)

    long_range = None
    if long_kind is not None:
        span = int(rng.integers(length // 16, length // 8 + 1))
        begin = int(rng.integers(length // 8, length - span - length // 8 + 1))
        long_range = (begin, begin + span - 1)
        claim(*long_range, long_kind)

    frequency = np.full(length, 1.0 / rng.uniform(40, 60))
    if long_kind == "frequency":
        frequency[long_range[0]:long_range[1] + 1] *= FREQUENCY_FACTOR
    fast = np.sin(2 * np.pi * np.cumsum(frequency) + rng.uniform(0, 2 * np.pi))
    slow = np.sin(2 * np.pi * t / rng.uniform(150, 250) + rng.uniform(0, 2 * np.pi))
    drift = np.cumsum(rng.normal(0.0, 1.0, length)) / np.sqrt(length)
    mixing = rng.normal(0.0, 1.0, (n_sensors, 3)) * np.array([1.0, 0.6, 1.0])
    sensors = np.stack([fast, slow, drift], axis=1) @ mixing.T + rng.normal(0.0, 0.1, (length, n_sensors))
    sensor_std = sensors.std(axis=0)

    starts = np.cumsum(rng.integers(40, 91, size=length // 40 + 1)) - 20
    tail = len(RESPONSE)
    starts = starts[starts + LAG + 3 + tail + MARGIN < length]
    a_times, b_times = starts.copy(), starts + LAG
    candidates = [i for i in rng.permutation(len(starts))
                  if _free(taken, starts[i], starts[i] + LAG + 3 + tail)]
    if len(candidates) < order + timing:
        raise ValueError(f"length={length} is too short for {order} order and {timing} timing anomalies")
    for i in candidates[:order]:
        a_times[i], b_times[i] = starts[i] + LAG, starts[i]
        claim(int(starts[i]), int(starts[i]) + LAG + tail, "order")
    for i in candidates[order:order + timing]:
        b_times[i] = starts[i] + LAG + int(rng.choice([-3, -2, 2, 3]))
        claim(int(starts[i]), int(max(b_times[i], starts[i] + LAG)) + tail, "timing")

    commands = np.zeros((length, 3))
    commands[a_times, 0] = 1.0
    commands[b_times, 1] = 1.0
    commands[rng.random(length) < 0.01, 2] = 1.0
    for j in range(min(3, n_sensors)):
        bumps = np.convolve(commands[:, j], np.concatenate(([0.0], RESPONSE)))[:length]
        sensors[:, j] += bumps * sensor_std[j]

    if long_kind == "level_shift":
        channels = rng.choice(n_sensors, size=min(2, n_sensors), replace=False)
        sensors[long_range[0]:long_range[1] + 1, channels] += SHIFT_SIZE * sensor_std[channels]
    placed = 0
    for step in rng.permutation(length):
        if placed == spikes:
            break
        if _free(taken, int(step), int(step)):
            channel = int(rng.integers(n_sensors))
            sensors[step, channel] += rng.choice([-1.0, 1.0]) * SPIKE_SIZE * sensor_std[channel]
            claim(int(step), int(step), "spike")
            placed += 1
    if placed < spikes:
        raise ValueError(f"length={length} is too short for {spikes} spikes")
    return Series.from_events(name, np.concatenate([sensors, commands], axis=1), events, event_kinds=kinds)


def make_synthetic(*, n_series: int = 4, length: int = 4096, seed: int = 0, n_sensors: int = 4,
                   spikes: int = 4, order: int = 3, timing: int = 3, long_range: bool = True) -> Dataset:
    """The built-in synthetic dataset (module docstring), ``n_series`` series of ``[length, n_sensors + 3]``.

    The default (4 × 4096 steps) gives about 1,000 windows of 64 steps at stride 16.
    """
    n_series = _validate.positive_int("n_series", n_series)
    length = _validate.positive_int("length", length)
    n_sensors = _validate.positive_int("n_sensors", n_sensors)
    for name, value in (("seed", seed), ("spikes", spikes), ("order", order), ("timing", timing)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    if length < 512:
        raise ValueError(f"length must be at least 512 steps, got {length}")
    series = [
        _one_series(f"synthetic-{i}", np.random.default_rng(np.random.SeedSequence([seed, i])), length=length,
                    n_sensors=n_sensors, spikes=spikes, order=order, timing=timing,
                    long_kind=("level_shift", "frequency")[i % 2] if long_range else None)
        for i in range(n_series)
    ]
    description = (f"synthetic telemetry (seed {seed}): {n_series} series × {length} steps, "
                   f"{n_sensors} sensors + commands A, B, C; per series {spikes} spike, {order} order, "
                   f"{timing} timing anomalies" + (" and 1 long-range one" if long_range else ""))
    return Dataset("synthetic", series, n_sensors + 3, description)
