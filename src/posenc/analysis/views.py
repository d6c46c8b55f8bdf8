"""How the analysis sees a registered encoding: a table, frequencies, a shift operator or a bias.

Every registry entry (:mod:`posenc.registry`) names its view. posenc's formula-defined
encodings have NumPy views here, built from :mod:`posenc.tables` and :mod:`posenc.spectrum`;
an entry without one (learned tables, biases, a user's module) is built by
:func:`posenc.nn.build.analysis_view` and seen through its contract — so this package imports
neither torch nor :mod:`posenc.nn`; torch is imported only when such an entry is analysed.

=========================  ==================================================================
registry name              view
=========================  ==================================================================
``none``                   an all-zero table: every position looks the same
``sinusoidal``             ``tables.sinusoidal``; frequencies ``ρ^(−2i/d)``; exact ``T^(k)``
``learnable_frequency``    the same at initialisation (the frequencies start at the schedule)
``dft``                    ``tables.dft`` (positions ≥ d aliased, s + d ≡ s); eq. 22 weights
``rope``                   ``R_t q`` for ``q = (1, 0, 1, 0, …)``: ``(cos tθ_i, sin tθ_i)`` pairs, so
                           ``⟨R_m q, R_n q⟩ = Σ_i cos((m−n)θ_i)`` (Su et al. 2021, eq. 34); exact ``T^(k)``
other entries              the module's contract at initialisation: an input module's
                           ``table(S)``, a bias's ``bias(S, S)``, Shaw's key term for a probe query
=========================  ==================================================================
"""

from __future__ import annotations

import numpy as np

from posenc import registry, spectrum, tables, validate
from posenc.analysis.fourier import dft_distribution, frequency_distribution
from posenc.analysis.shift import dft_shift_operator, shift_operator
from posenc.registry import EncodingInfo, EncodingView

__all__ = ["EncodingView", "encoding_view"]


def _sinusoidal(info: EncodingInfo, dim: int, base: float, layout: str, note: str) -> EncodingView:
    freq = spectrum.geometric(dim, base)
    return EncodingView(
        info.name,
        info.family,
        dim,
        table=lambda n: np.asarray(tables.sinusoidal(n, dim, base=base, layout=layout), dtype=np.float64),
        frequencies=freq,
        operator=(lambda k: shift_operator(k, dim=dim, base=base, layout=layout)) if dim % 2 == 0 else None,
        weights=frequency_distribution(freq, dim=dim),
        layout=layout,
        notes={"view": note},
    )


def none_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """An all-zero table: without an encoding every position looks the same."""
    return EncodingView(
        info.name,
        info.family,
        dim,
        table=lambda n: np.zeros((n, dim)),
        notes={"view": "no encoding: an all-zero table, every position looks the same"},
    )


def sinusoidal_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """:func:`posenc.tables.sinusoidal` (Vaswani et al. 2017, §3.5) with its exact shift operator."""
    return _sinusoidal(info, dim, base, "interleaved", f"tables.sinusoidal, base {base:g}")


def learnable_frequency_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """At initialisation the frequencies are the geometric schedule: the sinusoidal view."""
    return _sinusoidal(
        info,
        dim,
        base,
        "interleaved",
        "at initialisation: frequencies = the geometric schedule, i.e. sinusoidal",
    )


def rope_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """Rows ``R_t q`` of a rotary encoding over all ``dim`` dimensions (refuses what RotaryEmbedding refuses)."""
    spectrum.rotary_dim(dim, None)
    return _sinusoidal(
        info,
        dim,
        base,
        "interleaved_cos_first",
        "rows R_t q for q = (1, 0, 1, 0, …): pairs (cos tθ_i, sin tθ_i), θ_i = ρ^(-2i/d)",
    )


def dft_view(
    info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
) -> EncodingView:
    """:func:`posenc.tables.dft` (Idé, Labaien & Chen, eq. 21), aliased beyond ``d``, with eq. 22 weights."""
    return EncodingView(
        info.name,
        info.family,
        dim,
        table=lambda n: np.asarray(tables.dft(n, dim, alias=True), dtype=np.float64),
        frequencies=spectrum.dft(dim),
        operator=lambda k: dft_shift_operator(k, dim=dim),
        weights=dft_distribution(dim),
        dft_rows=True,
        notes={"view": f"the DFT table; positions ≥ d = {dim} aliased (s + d has the encoding of s)"},
    )


def encoding_view(
    name: str, *, dim: int, length: int, base: float = tables.DEFAULT_BASE, n_heads: int = 8, seed: int = 0
) -> EncodingView:
    """The :class:`EncodingView` of registry encoding ``name`` at encoding width ``dim``.

    Args:
        name: a name of :func:`posenc.registry.names`; unknown names raise ``ValueError`` listing them.
        dim: ``d`` (for rotary encodings: the head dimension).
        length: ``S``, the training length (``max_len`` of a learned table).
        base: ``ρ`` of sinusoidal, learnable-frequency and rope frequencies.
        n_heads: heads of the bias encodings.
        seed: torch seed for the initial parameters of learned encodings.
    """
    info = registry.get(name)
    dim = validate.positive_int("dim", dim)
    length = validate.positive_int("length", length)
    return info.analysis_view(dim=dim, length=length, base=base, n_heads=n_heads, seed=seed)
