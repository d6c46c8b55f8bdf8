"""Frequency schedules and column layouts: the one mechanism behind every sinusoidal encoding.

Almost every sinusoidal encoding in the literature is a set of angular frequencies ``w_i`` placed in a
column layout (DESIGN "The one idea"). This module owns both:

* **schedules** return the float64 angular frequencies ``w_i`` of a ``dim``-dimensional
  encoding, one per (sin, cos) pair, ``n_pairs(dim) = ⌈dim/2⌉`` of them;
* **layouts** place ``sin(t·w_i)`` and ``cos(t·w_i)`` into columns.

Schedules (docs/theory.md §3):

========================  ==========================================================  ==========================
name                      formula                                                     source
========================  ==========================================================  ==========================
``geometric``             ``w_i = ρ^(−2i/d)``                                          Vaswani et al. 2017, §3.5
``su``                    ``w_i = θ(2i/d)`` for any ``θ: [0,1] → ℝ``                   Su 2021 (θ_t)
``exponential``           ``θ(x) = ρ^(−x)`` (``su`` with the paper's θ; any ρ)          Su 2021
``power_law``             ``θ(x) = x^α``                                               Su 2021
``linear``                ``θ(x) = x``                                                 Su 2021
``tensor2tensor``         ``w_k = t_min·exp(−k·ln(t_max/t_min)/(d/2 − 1))``            tensor2tensor / fairseq
``dft``                   ``ω_k = 2πk/d``                                              Idé et al. 2024, eq. 11
========================  ==========================================================  ==========================

ALiBi's head slopes (Press et al. 2022) are also a geometric schedule and live here too.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import validate
from posenc.errors import UsageTypeError

DEFAULT_BASE = 10000.0
"""``ρ`` of the paper's geometric schedule (Vaswani et al. 2017, §3.5)."""

LAYOUTS: tuple[str, ...] = ("interleaved", "interleaved_cos_first", "split")
"""Column layouts of a sinusoidal table, all the same numbers in a different column order.

For ``dim = 6`` (pairs ``i = 0, 1, 2``)::

    interleaved            sin0 cos0 sin1 cos1 sin2 cos2    (Vaswani; the default)
    interleaved_cos_first  cos0 sin0 cos1 sin1 cos2 sin2    (Su 2021)
    split                  sin0 sin1 sin2 cos0 cos1 cos2    (tensor2tensor / fairseq)

For odd ``dim`` the cosine of the last pair is dropped, wherever it would stand.
"""


def n_pairs(dim: int) -> int:
    """Number of (sin, cos) pairs of a ``dim``-dimensional table: ``⌈dim/2⌉``."""
    return (validate.size("dim", dim) + 1) // 2


def geometric(dim: int, base: float = 10000.0) -> NDArray[np.float64]:
    """The paper's schedule ``w_i = base^(−2i/d)``, ``i = 0 … ⌈d/2⌉−1`` (Vaswani et al. 2017, §3.5).

    Computed as ``exp(−(2i/d)·ln base)`` in float64.
    """
    dim = validate.size("dim", dim)
    base = validate.positive_float("base", base)
    i = np.arange(n_pairs(dim), dtype=np.float64)
    return np.exp(-(2.0 * i / dim) * math.log(base))


def su(dim: int, theta: Callable[[NDArray[np.float64]], ArrayLike]) -> NDArray[np.float64]:
    """Su's general schedule ``w_i = θ(2i/d)`` for a function ``θ`` on ``[0, 1)`` (Su 2021).

    ``theta`` receives the float64 array ``x_i = 2i/d`` and must return finite values of the
    same shape.
    """
    dim = validate.size("dim", dim)
    if not callable(theta):
        raise TypeError(f"theta must be a callable θ(x) on [0, 1], got {theta!r}")
    x = 2.0 * np.arange(n_pairs(dim), dtype=np.float64) / dim
    w = validate.finite_array("theta(x)", theta(x), ndim=1)
    if w.shape != x.shape:
        raise ValueError(f"theta(x) must return shape {x.shape}, got {w.shape}")
    return w


def exponential(dim: int, base: float = 10000.0) -> NDArray[np.float64]:
    """Su's ``θ(x) = base^(−x)``; ``base = 10000`` is the paper's, Su also shows ``1000`` (Su 2021).

    Identical to :func:`geometric`; kept as a named schedule so Su's comparison reads as he wrote it.
    """
    return geometric(dim, base)


def power_law(dim: int, alpha: float = 2.0) -> NDArray[np.float64]:
    """Su's power-law schedule ``θ(x) = x^α`` (Su 2021, "power functions θ_t = t^α").

    As Su writes it: the frequencies *increase* from ``w_0 = 0`` (a constant pair), unlike the
    paper's decreasing ``10000^(−x)``; only the set of frequencies matters for the inner
    product ``Σ_i cos(x θ_i)`` (Su 2021; docs/theory.md §5).
    """
    alpha = validate.positive_float("alpha", alpha)
    return su(dim, lambda x: x**alpha)


def linear(dim: int) -> NDArray[np.float64]:
    """Su's linear schedule ``θ(x) = x`` (the ``θ_t = t`` curve of Su 2021)."""
    return su(dim, lambda x: x)


def tensor2tensor(
    dim: int, *, min_timescale: float = 1.0, max_timescale: float = 10000.0
) -> NDArray[np.float64]:
    """tensor2tensor / fairseq grid, as tensor2tensor's code computes it (``get_timing_signal_1d``)::

        w_k = min_timescale · exp(−k · ln(max_timescale/min_timescale) / max(n − 1, 1)),   k < n

    over ``n = ⌈d/2⌉`` pairs (posenc's odd-``d`` convention; :func:`posenc.tables.tensor2tensor` gives
    the libraries' own odd-``d`` table). The divisor ``n − 1`` rather than the paper's ``d/2`` makes
    the last frequency exactly ``1/max_timescale`` when ``min_timescale = 1`` (fairseq's fixed
    choice), so every other one differs from :func:`geometric` for the same ``d``; the libraries use
    the ``split`` layout. tensor2tensor's *docstring* describes timescales from ``min_timescale`` to
    ``max_timescale`` (frequencies ``1/min … 1/max``), but its code multiplies by ``min_timescale``;
    this function follows the code. The docstring's grid is
    ``tensor2tensor(d, max_timescale=max/min) / min``.
    """
    dim = validate.size("dim", dim)
    lo = validate.positive_float("min_timescale", min_timescale)
    hi = validate.positive_float("max_timescale", max_timescale)
    pairs = n_pairs(dim)
    k = np.arange(pairs, dtype=np.float64)
    return lo * np.exp(-k * (math.log(hi / lo) / max(pairs - 1, 1)))


def dft(dim: int) -> NDArray[np.float64]:
    """DFT frequencies ``ω_k = 2πk/d`` for ``k = 0 … ⌊d/2⌋`` (Idé, Labaien & Chen 2024, eqs. 11 and 21).

    ``k = 0`` is the constant term ``a_0``; for even ``d`` the last, ``k = d/2``, is the
    Nyquist frequency ``π`` of ``b_0 = cos(πt)/√d``.
    """
    dim = validate.size("dim", dim)
    return 2.0 * math.pi * np.arange(dim // 2 + 1, dtype=np.float64) / dim


def custom(frequencies: ArrayLike, dim: int | None = None) -> NDArray[np.float64]:
    """Validate a user-given frequency array: 1-D, finite; ``⌈dim/2⌉`` long when ``dim`` is given."""
    w = validate.finite_array("frequencies", frequencies, ndim=1)
    if w.size == 0:
        raise ValueError("frequencies must hold at least one frequency, got an empty array")
    if dim is not None and w.size != n_pairs(dim):
        raise ValueError(
            f"frequencies must hold ceil(dim/2) = {n_pairs(dim)} values for dim={dim}, got {w.size}"
        )
    return w


def sinusoidal_frequencies(
    dim: int, *, base: float = DEFAULT_BASE, frequencies: ArrayLike | None = None
) -> NDArray[np.float64]:
    """The ``⌈dim/2⌉`` frequencies of a sinusoidal table: ``frequencies`` if given, else :func:`geometric`.

    Giving both a non-default ``base`` and ``frequencies`` is ambiguous and raises ``ValueError``.
    """
    if frequencies is None:
        return geometric(dim, base)
    if base != DEFAULT_BASE:
        raise ValueError(f"give either base (got {base!r}) or frequencies, not both")
    return custom(frequencies, dim)


SCHEDULES: dict[str, Callable[..., NDArray[np.float64]]] = {
    "geometric": geometric,
    "exponential": exponential,
    "power_law": power_law,
    "linear": linear,
    "tensor2tensor": tensor2tensor,
}
"""Named schedules taking ``(dim, **options)``, for the CLI and for learnable frequencies."""


def schedule(name: str, dim: int, **options: float) -> NDArray[np.float64]:
    """Evaluate the named schedule of :data:`SCHEDULES` for ``dim``."""
    validate.choice("schedule", name, tuple(SCHEDULES))
    accepted = [p for p in inspect.signature(SCHEDULES[name]).parameters if p != "dim"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        takes = f"takes the options {', '.join(accepted)}" if accepted else "takes no options"
        raise UsageTypeError(f"schedule {name!r} {takes}; got {', '.join(unknown)}")
    return SCHEDULES[name](dim, **options)


def layout_columns(dim: int, layout: str = "interleaved") -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Column indices of the sines and of the cosines of a ``dim``-column table in ``layout``.

    Returns ``(sin_cols, cos_cols)`` with ``len(sin_cols) = ⌈d/2⌉`` and ``len(cos_cols) = ⌊d/2⌋``:
    pair ``i`` has its sine in column ``sin_cols[i]`` and (if ``i < ⌊d/2⌋``) its cosine in
    ``cos_cols[i]``. See :data:`LAYOUTS` for the drawings.
    """
    dim = validate.size("dim", dim)
    validate.choice("layout", layout, LAYOUTS)
    n_sin, n_cos = n_pairs(dim), dim // 2
    if layout == "split":
        return np.arange(n_sin), n_sin + np.arange(n_cos)
    pair_start = 2 * np.arange(n_sin)
    first, second = (pair_start, pair_start[:n_cos] + 1)
    if layout == "interleaved":
        return first, second
    # interleaved_cos_first: cosine first in every full pair; a lone last sine keeps column d−1.
    sin_cols = pair_start + 1
    if n_sin > n_cos:
        sin_cols[-1] = dim - 1
    return sin_cols, pair_start[:n_cos]


def layout_permutation(dim: int, source: str, target: str) -> NDArray[np.intp]:
    """Column permutation ``p`` with ``table_in_target = table_in_source[:, p]``."""
    src_sin, src_cos = layout_columns(dim, source)
    dst_sin, dst_cos = layout_columns(dim, target)
    perm = np.empty(dim, dtype=np.intp)
    perm[dst_sin] = src_sin
    perm[dst_cos] = src_cos
    return perm


def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> NDArray[np.float64]:
    """ALiBi head slopes (Press et al. 2022, §3 and their reference code).

    For ``n`` a power of two: ``m_h = 2^(−Bh/n)``, ``h = 1 … n``, with ``B = alibi_bias_max`` = 8 in
    the paper (8 heads: 1/2, 1/4, …, 1/256) and an option in MPT. Otherwise, with
    ``p = 2^⌊log2 n⌋``: the ``p`` slopes of ``p`` heads, then the first ``n − p`` of the
    odd-indexed slopes of ``2p`` heads (``m_1, m_3, …`` of that set) — the same set MPT obtains by
    reordering the slopes of ``2p`` heads.
    """
    n = validate.size("n_heads", n_heads)
    bias_max = validate.positive_float("alibi_bias_max", alibi_bias_max)

    def power_of_two(p: int) -> NDArray[np.float64]:
        return 2.0 ** (-bias_max * np.arange(1, p + 1, dtype=np.float64) / p)

    p = 1 << (n.bit_length() - 1)
    if p == n:
        return power_of_two(n)
    return np.concatenate([power_of_two(p), power_of_two(2 * p)[0::2][: n - p]])


def rotary_dim(head_dim: int, rotary_dim: int | float | None) -> int:
    """The even number of dimensions a rotary encoding rotates: ``rotary_dim`` given as a count, a
    fraction of ``head_dim`` (``int(head_dim·fraction)``, GPT-NeoX's ``rotary_pct``) or ``None`` (all)."""
    if rotary_dim is None:
        if head_dim % 2:
            raise ValueError(
                f"head_dim must be even to rotate every dimension in pairs, got {head_dim}; "
                "pass an even rotary_dim < head_dim for partial rotary"
            )
        return head_dim
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, numbers.Real):
        raise TypeError(
            f"rotary_dim must be an int count, a float fraction in (0, 1], or None; got {rotary_dim!r}"
        )
    if isinstance(rotary_dim, numbers.Integral):
        count = int(rotary_dim)
        if not 0 < count <= head_dim:
            raise ValueError(f"rotary_dim must be in 1…head_dim={head_dim}, got {count}")
    else:
        if not 0.0 < float(rotary_dim) <= 1.0:
            raise ValueError(f"rotary_dim as a fraction must be in (0, 1], got {rotary_dim!r}")
        count = int(head_dim * float(rotary_dim))  # GPT-NeoX: int(head_size * rotary_pct)
    if count % 2 or count == 0:
        raise ValueError(
            f"rotary_dim={rotary_dim!r} of head_dim={head_dim} leaves {count} dimensions to rotate; "
            "it must be a positive even count (dimensions rotate in pairs)"
        )
    return count
