"""Positional probes: windows whose label depends only on the order or lag of two pulses.

A probe window is ``[window, 2]``: i.i.d. Gaussian background (σ = ``noise``) in both
features, a pulse ``A`` (+1 in feature 0) at one step and a pulse ``B`` (+1 in feature 1) at
another (the pulse is added to that step's background).

* ``"order"`` (distance ``1 ≤ k ≤ window - 1``): ``A`` at ``a``, ``B`` at ``a + k``; label 1 when
  ``A`` comes first. The negative of a pair is the positive with the rows ``a`` and ``a + k``
  swapped (``B`` first).
* ``"lag"`` (``1 ≤ k ≤ window - 2``): ``A`` at ``a``, ``B`` at ``a + k`` (label 1) or ``a + k + 1``
  (label 0). The negative of a pair is the positive with rows ``a + k`` and ``a + k + 1`` swapped.

Windows come in such pairs, built from one background draw, so the two classes hold the
**same multiset of rows** pair by pair: any order-free statistic (of values, or of whole
rows) is identical between a positive and its negative; only the order of the time steps
differs. ``a`` is uniform over every position where the pair fits. (For ``"lag"`` the
pulse ``B`` of a negative can sit one step later than any positive's, at the window's last
step — the one positional cue that a lag task cannot avoid.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from posenc import validate
from posenc_bench.data.containers import SPLIT_NAMES, Splits, WindowSet

PROBE_TASKS = ("order", "lag")
N_FEATURES = 2
#: The shortest probe window: the lag task's pair spans k + 1 >= 2 steps and must leave a start.
MIN_WINDOW = 3


def max_distance(task: str, window: int) -> int:
    """The largest ``k`` a window of ``window`` steps holds for ``task`` (module docstring)."""
    validate.choice("task", task, PROBE_TASKS)
    return window - 1 if task == "order" else window - 2


def _check_k(task: str, k: int, window: int) -> int:
    k = validate.positive_int("k", k)
    largest = max_distance(task, window)
    if k > largest:
        need = "k + 1 <= window - 1" if task == "lag" else "k <= window - 1"
        raise ValueError(
            f"k={k} does not fit a window of {window} steps for task {task!r} ({need}, so "
            f"k <= {largest}); use a longer window or a smaller k"
        )
    return k


def make_probe(
    task: str, k: int, *, window: int = 64, n: int = 512, seed: int = 0, noise: float = 0.1
) -> WindowSet:
    """``n`` probe windows ``X[n, window, 2]`` at distance ``k``: ``n / 2`` positive/negative pairs.

    ``series[i]`` is the pair index of window ``i`` (its partner shares it); ``start`` is 0,
    ``event`` is -1. Windows are in random order (by ``seed``).
    """
    validate.choice("task", task, PROBE_TASKS)
    window = validate.positive_int("window", window)
    if window < MIN_WINDOW:
        raise ValueError(f"window must be at least {MIN_WINDOW} for probes, got {window}")
    k = _check_k(task, k, window)
    n = validate.positive_int("n", n)
    if n % 2:
        raise ValueError(f"n must be even (windows come in positive/negative pairs), got {n}")
    noise = validate.positive_float("noise", noise)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    pairs = n // 2
    span = k if task == "order" else k + 1
    a = rng.integers(0, window - span, size=pairs)  # pair fits: a + span <= window - 1
    positive = rng.normal(0.0, noise, (pairs, window, N_FEATURES))
    rows = np.arange(pairs)
    positive[rows, a, 0] += 1.0
    positive[rows, a + k, 1] += 1.0
    first, second = (a, a + k) if task == "order" else (a + k, a + k + 1)
    negative = positive.copy()
    negative[rows, first], negative[rows, second] = positive[rows, second], positive[rows, first]
    X = np.concatenate([positive, negative]).astype(np.float32)
    y = np.concatenate([np.ones(pairs), np.zeros(pairs)]).astype(np.int64)
    pair = np.concatenate([rows, rows]).astype(np.int64)
    order = rng.permutation(n)
    zeros = np.zeros(n, dtype=np.int64)
    return WindowSet(X[order], y[order], pair[order], zeros, zeros - 1)


@dataclass
class ProbeSuite:
    """The probe suite for one task: a :class:`Splits` per distance ``k`` (``load_dataset("probes")``).

    Train, validation and test windows of one ``k`` come from independent draws (seeds derived
    from ``(seed, k, split)``), so no window, pair or background is shared between splits.
    """

    task: str = "order"
    window: int = 64
    distances: list[int] = field(default_factory=list)  # empty → every k from 1 to max_distance
    n_train: int = 512
    n_eval: int = 256
    seed: int = 0
    noise: float = 0.1

    def __post_init__(self) -> None:
        validate.choice("task", self.task, PROBE_TASKS)
        self.window = validate.positive_int("window", self.window)
        self.distances = (
            [_check_k(self.task, k, self.window) for k in self.distances]
            if self.distances
            else list(range(1, max_distance(self.task, self.window) + 1))
        )

    @property
    def name(self) -> str:
        return f"probes-{self.task}"

    @property
    def n_features(self) -> int:
        return N_FEATURES

    def splits(self, k: int) -> Splits:
        """Train (``n_train``), val and test (``n_eval`` each) probe windows at distance ``k``."""
        k = _check_k(self.task, k, self.window)
        sets = {}
        for index, name in enumerate(SPLIT_NAMES):
            seed = int(np.random.SeedSequence([self.seed, k, index]).generate_state(1)[0])
            sets[name] = make_probe(
                self.task,
                k,
                window=self.window,
                seed=seed,
                noise=self.noise,
                n=self.n_train if name == "train" else self.n_eval,
            )
        summary = {
            name: {"windows": len(s), "positives": int(s.y.sum()), "events": 0} for name, s in sets.items()
        }
        protocol = {
            "dataset": self.name,
            "task": self.task,
            "k": k,
            "window": self.window,
            "seed": self.seed,
            "noise": self.noise,
            "n_train": self.n_train,
            "n_eval": self.n_eval,
        }
        return Splits(sets["train"], sets["val"], sets["test"], summary, protocol=protocol)
