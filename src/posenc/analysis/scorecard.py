"""The criteria of a good encoding, measured for any registered encoding at ``(S, d)``.

Criteria of Kazemnejad (2019) and the Transformer notes, plus the claims of Denk (2019), Su (2021) and Idé et al. (2024),
as numbers rather than ticks. Every value that does not apply is ``None`` and
``notes[key]`` says why. The keys of :data:`CRITERIA` are stable (the ``--json`` output of
``posenc analyze``; docs/analysis.md):

==============================  =============================================================
key                             meaning
==============================  =============================================================
``unique``                      every position 0…S−1 has its own vector (min distance > 1e-9·max‖row‖)
``min_distance``                smallest Euclidean distance between two positions' vectors
``shift_residual``              relative residual of the shift by ``k = 1``: the exact ``T^(1)``
                                when the encoding has one (Denk, 2019), else least squares
``toeplitz_error``              :func:`~posenc.analysis.toeplitz_deviation` of the Gram matrix
                                (biases: of each head's bias, the largest)
``value_min``/``value_max``     range of the values the encoding adds (biases: of the bias)
``value_mean``                  their mean (zero-centred?)
``long_range_decay``            tables: ``max |k(x)| / |k(0)|`` over ``x ∈ [S/2, S)`` for the
                                kernel ``k`` of the Gram matrix; biases: the largest attention
                                factor ``exp(mean b(x) − b(0))`` over heads, same ``x``
``low_pass_fraction``           fraction of frequencies below ``2π/d`` (Idé et al., 2024, §3.1)
``reconstruction_width``        width at half maximum of Algorithm 1's reconstruction of
                                ``δ`` at ``s = d//2`` with the encoding's weights (1 = faithful)
``decoding_accuracy``           nearest-neighbour position decoding with noise (see parameters)
``decoding_accuracy_inverse_dft``  the same by inverse DFT (DFT encoding, ``S ≤ d``)
``largest_period``              ``2π / min w`` over non-zero frequencies
``first_repeat``                smallest ``t ≥ 1`` with ``E[t] = E[0]`` (``1e-6`` relative)
                                within the search horizon (``4·max(S, d)`` positions)
``extrapolates``                rows for ``0…2S−1`` exist, stay distinct and within the range of ``0…S−1``
``extrapolation_min_distance``  smallest distance between two of those ``2S`` rows
==============================  =============================================================
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc import registry, tables, validate
from posenc.analysis import _checks, faithfulness, kernel, shift
from posenc.analysis.faithfulness import min_pairwise_distance
from posenc.analysis.views import EncodingView, encoding_view

CRITERIA: tuple[str, ...] = (
    "unique",
    "min_distance",
    "shift_residual",
    "toeplitz_error",
    "value_min",
    "value_max",
    "value_mean",
    "long_range_decay",
    "low_pass_fraction",
    "reconstruction_width",
    "decoding_accuracy",
    "decoding_accuracy_inverse_dft",
    "largest_period",
    "first_repeat",
    "extrapolates",
    "extrapolation_min_distance",
)
"""Stable keys of :attr:`Scorecard.values`, in display order."""

MEANINGS: dict[str, str] = {
    "unique": "every position 0…S−1 has its own vector (smallest distance > 1e-9 · largest row norm)",
    "min_distance": "smallest Euclidean distance between the vectors of two positions",
    "shift_residual": "‖E[t] Tᵀ − E[t+1]‖ / ‖E[t+1]‖ for the exact shift operator T (or the best linear map)",
    "toeplitz_error": "how far ⟨E[m], E[n]⟩ (or the bias) is from depending on m − n only, relative to its maximum",
    "value_min": "smallest value the encoding adds",
    "value_max": "largest value the encoding adds",
    "value_mean": "mean of the values the encoding adds (zero-centred?)",
    "long_range_decay": "largest |kernel(x)| / kernel(0) over far distances x ∈ [S/2, S) (biases: attention factor)",
    "low_pass_fraction": "share of the frequencies below the first non-zero DFT bin 2π/d",
    "reconstruction_width": "width at half maximum of Algorithm 1's reconstruction of a one-hot (1 = faithful)",
    "decoding_accuracy": "share of positions recovered as the nearest clean row after Gaussian noise",
    "decoding_accuracy_inverse_dft": "the same, decoded by the inverse DFT (DFT encoding only)",
    "largest_period": "2π / the smallest non-zero frequency",
    "first_repeat": "first t ≥ 1 whose vector equals position 0's",
    "extrapolates": "rows for positions 0…2S−1 exist, stay distinct and within the range of 0…S−1",
    "extrapolation_min_distance": "smallest distance between two of those 2S rows",
}
"""One line per criterion of :data:`CRITERIA`: what it measures (shown where the criterion is shown)."""

Value = bool | int | float | None


@dataclass(frozen=True)
class Scorecard:
    """One encoding's measured criteria at ``(S, d)``.

    Attributes:
        encoding: registry name; ``family``: where it acts.
        values: ``{key: value}`` for every key of :data:`CRITERIA`.
        notes: ``{key: why it is None / how it was measured}``; ``notes["view"]`` says what was measured.
        parameters: everything the numbers depend on.
    """

    encoding: str
    family: str
    values: dict[str, Value]
    notes: dict[str, str]
    parameters: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``{"encoding", "family", "parameters", "values", "notes"}`` (non-finite → None)."""
        clean = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.values.items()
        }
        return {
            "encoding": self.encoding,
            "family": self.family,
            "parameters": dict(self.parameters),
            "values": clean,
            "notes": dict(self.notes),
        }


def _table_criteria(view: EncodingView, p: dict[str, Any]) -> dict[str, Callable[[], Value]]:
    S = p["length"]
    table = view.table
    assert table is not None  # only called for views with a table
    E = table(S)
    gram = kernel.gram(E)
    bound = 1e-9 * float(np.linalg.norm(E, axis=1).max())

    def shift_residual() -> float:
        if view.operator is not None:
            return shift.operator_residual(E, view.operator(p["shift_k"]), p["shift_k"])
        return shift.linear_shift_residual(E, p["shift_k"])

    def decay() -> float:
        x, k = kernel.kernel_by_distance(gram)
        if k[x == 0][0] == 0.0:
            raise ValueError("k(0) = 0: the table is all zeros, there is no kernel to decay")
        far = np.abs(k[(x >= S // 2) & (x < S)])
        if far.size == 0:
            raise ValueError(f"length S={S} has no distances in [S/2, S)")
        return float(far.max() / abs(k[x == 0][0]))

    @functools.cache
    def distance() -> float:
        return min_pairwise_distance(E)

    def first_repeat() -> int:
        try:
            rows = table(p["repeat_horizon"])
        except ValueError:
            rows = E  # it cannot produce more positions than S
        gap = np.linalg.norm(rows[1:] - rows[0], axis=1)
        hits = np.flatnonzero(gap <= 1e-6 * max(float(np.linalg.norm(rows[0])), 1e-300))
        if hits.size == 0:
            raise ValueError(f"no repeat within the {rows.shape[0]} positions searched")
        return int(hits[0]) + 1

    @functools.cache
    def longer() -> NDArray[np.float64] | None:
        try:
            return table(2 * S)
        except ValueError:
            return None

    def extrapolates() -> bool:
        rows = longer()
        if rows is None:
            return False
        inside = rows.min() >= E.min() - 1e-9 and rows.max() <= E.max() + 1e-9
        return bool(min_pairwise_distance(rows) > bound and inside)

    def extrapolation_distance() -> float:
        rows = longer()
        if rows is None:
            table(2 * S)  # raises the encoding's own reason
        assert rows is not None
        return min_pairwise_distance(rows)

    def inverse_dft() -> float:
        if not view.dft_rows:
            raise ValueError("applies to DFT-coefficient rows only (the DFT encoding's)")
        return faithfulness.inverse_dft_accuracy(E, noise=p["decode_noise"], seed=p["seed"])

    return {
        "unique": lambda: bool(distance() > bound),
        "min_distance": distance,
        "shift_residual": shift_residual,
        "toeplitz_error": lambda: kernel.toeplitz_deviation(gram),
        "value_min": lambda: float(E.min()) + 0.0,  # + 0.0: no "-0.0"
        "value_max": lambda: float(E.max()) + 0.0,
        "value_mean": lambda: float(E.mean()) + 0.0,
        "long_range_decay": decay,
        "decoding_accuracy": lambda: faithfulness.nearest_neighbour_accuracy(
            E, noise=p["decode_noise"], seed=p["seed"]
        ),
        "decoding_accuracy_inverse_dft": inverse_dft,
        "first_repeat": first_repeat,
        "extrapolates": extrapolates,
        "extrapolation_min_distance": extrapolation_distance,
    }


def _bias_criteria(view: EncodingView, p: dict[str, Any]) -> dict[str, Callable[[], Value]]:
    S = p["length"]
    bias = view.bias
    assert bias is not None  # only called for views with a bias
    B = bias(S)

    def decay() -> float:
        far = np.arange(S) >= S // 2
        factors = [np.exp(kernel.kernel_by_distance(h)[1][S - 1 :][far].mean() - h[0, 0]) for h in B]
        return float(max(factors))

    def extrapolates() -> bool:
        longer = bias(2 * S)
        return bool(longer.shape[-1] == 2 * S and np.isfinite(longer).all())

    return {
        "toeplitz_error": lambda: max(kernel.toeplitz_deviation(h) for h in B),
        "value_min": lambda: float(B.min()) + 0.0,
        "value_max": lambda: float(B.max()) + 0.0,
        "value_mean": lambda: float(B.mean()) + 0.0,
        "long_range_decay": decay,
        "extrapolates": extrapolates,
    }


def _frequency_criteria(view: EncodingView, p: dict[str, Any]) -> dict[str, Callable[[], Value]]:
    w, d = view.frequencies, p["dim"]
    assert w is not None  # only called for views with frequencies

    def width() -> float:
        if view.weights is None:
            raise ValueError("the view gives no weights on the DFT bins to reconstruct with")
        f = faithfulness.one_hot(d // 2, d)
        return faithfulness.peak(faithfulness.reconstruct(f, view.weights)).width

    return {
        "low_pass_fraction": lambda: float(np.mean(w < 2.0 * math.pi / d)),
        "reconstruction_width": width,
        "largest_period": lambda: float(2.0 * math.pi / w[w > 0].min()),
    }


_TABLE_KEYS = frozenset(
    {
        "unique",
        "min_distance",
        "shift_residual",
        "decoding_accuracy",
        "decoding_accuracy_inverse_dft",
        "first_repeat",
        "extrapolation_min_distance",
    }
)


def scorecard(
    encoding: str,
    *,
    length: int,
    dim: int,
    base: float = tables.DEFAULT_BASE,
    n_heads: int = 8,
    shift_k: int = 1,
    decode_noise: float = 0.5,
    seed: int = 0,
) -> Scorecard:
    """Measure every criterion of :data:`CRITERIA` for registry encoding ``encoding`` at ``(S, d)``.

    Args:
        encoding: a registry name (:func:`posenc.registry.names`); unknown → ``ValueError`` listing them.
        length: ``S``, the positions ``0 … S−1`` measured (and ``max_len`` of the learned table).
        dim: ``d``, the encoding width (rope: the head dimension).
        base: ``ρ`` of the sinusoidal-type frequencies.
        n_heads: heads of bias encodings.
        shift_k: offset of ``shift_residual``.
        decode_noise: noise of ``decoding_accuracy`` in units of the table's RMS value, ``≥ 0``.
        seed: seed of learned initial parameters and of the decoding noise.
    """
    decode_noise = _checks.nonnegative(decode_noise, name="decode_noise")
    length = validate.positive_int("length", length)
    n_heads = validate.positive_int("n_heads", n_heads)  # checked for every encoding, used by bias ones
    seed = validate.non_negative_int("seed", seed)
    view = encoding_view(encoding, dim=dim, length=length, base=base, n_heads=n_heads, seed=seed)
    return score_view(
        view,
        length=length,
        shift_k=shift_k,
        decode_noise=decode_noise,
        seed=seed,
        extra={"base": base, "n_heads": n_heads},
    )


def score_view(
    view: EncodingView,
    *,
    length: int,
    shift_k: int = 1,
    decode_noise: float = 0.5,
    seed: int = 0,
    extra: dict[str, Any] | None = None,
) -> Scorecard:
    """Measure every criterion of :data:`CRITERIA` for an :class:`EncodingView` built from NumPy arrays.

    This is how a *trained* encoding is scored: the caller (``posenc analyze --checkpoint``)
    reads the trained parameters and hands the table, frequencies or bias here as arrays.
    ``extra`` adds entries to the scorecard's parameters (e.g. ``base``, ``n_heads``).
    """
    length = validate.positive_int("length", length)
    decode_noise = _checks.nonnegative(decode_noise, name="decode_noise")
    params: dict[str, Any] = {
        "length": length,
        "dim": view.dim,
        **(extra or {}),
        "shift_k": validate.positive_int("shift_k", shift_k),
        "decode_noise": decode_noise,
        "seed": seed,
        "reconstruct_position": view.dim // 2,
        "bandwidth": 8.0 * math.pi / view.dim,
        "repeat_horizon": 4 * max(length, view.dim),
    }
    measures: dict[str, Callable[[], Value]] = {}
    for _kind, builder, available in (
        ("table", _table_criteria, view.table is not None),
        ("bias", _bias_criteria, view.bias is not None),
        ("frequency", _frequency_criteria, view.frequencies is not None),
    ):
        if available:
            measures.update(builder(view, params))
    values: dict[str, Value] = {}
    notes: dict[str, str] = dict(view.notes)
    for key in CRITERIA:
        if key not in measures:
            values[key] = None
            notes[key] = _reason(key, view)
            continue
        try:
            values[key] = measures[key]()
        except ValueError as exc:
            values[key], notes[key] = None, str(exc)
    if values["shift_residual"] is not None:
        notes["shift_residual"] = "exact operator T^(k)" if view.operator is not None else "least-squares map"
    return Scorecard(view.name, view.family, values, notes, params)


def _reason(key: str, view: EncodingView) -> str:
    """Why criterion ``key`` does not apply to ``view``."""
    if view.table is None and view.bias is None:
        return view.notes["view"]
    if key in _TABLE_KEYS:
        return "a relative (bias) encoding has no per-position vector; it depends on i - j by construction"
    return "defined for encodings made of sinusoids at known frequencies; this one has none"


def scorecards(names: list[str] | None = None, **options: Any) -> list[Scorecard]:
    """:func:`scorecard` of each name (default: every registered encoding), same options."""
    return [scorecard(name, **options) for name in (registry.names() if names is None else names)]
