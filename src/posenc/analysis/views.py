"""How the analysis sees each registered encoding: a table, frequencies, a shift operator or a bias.

Formula-defined encodings are built with NumPy (:mod:`posenc.tables`, :mod:`posenc.spectrum`);
learned and bias encodings are built by :func:`posenc.nn.build_encoding` (``d_model = d``),
importing torch only inside :func:`encoding_view` when one of them is asked for, with the
seeded initial parameters (the analysis of an untrained model). The interfaces used are the
team contracts: input modules' ``table(length)``, bias modules' ``bias(q_len, k_len)``.

=====================  ==================================================================
registry name          view
=====================  ==================================================================
``none``               an all-zero table: every position looks the same
``sinusoidal``         ``tables.sinusoidal``; frequencies ``ρ^(−2i/d)``; exact ``T^(k)``
``learnable_frequency``  the same at initialisation (the frequencies start at the schedule)
``dft``                ``tables.dft`` (positions ≥ d aliased, s + d ≡ s); eq. 22 weights
``learned``            ``table(S)`` of ``build_encoding("learned", …, max_len=S)`` at initialisation
``rope``               ``R_t q`` for ``q = (1, 0, 1, 0, …)``: ``(cos tθ_i, sin tθ_i)`` pairs, so
                       ``⟨R_m q, R_n q⟩ = Σ_i cos((m−n)θ_i)`` (SPEC §7); exact ``T^(k)``
``alibi``, ``t5``      ``bias(S, S)`` of the module, ``[h, S, S]``
``shaw``               its key term ``q·a^K_(clip(j−i))/√d_h`` for one random probe query ``q``
=====================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc import _validate, registry, spectrum, tables
from posenc.analysis.fourier import dft_distribution, frequency_distribution
from posenc.analysis.shift import dft_shift_operator, shift_operator

Table = Callable[[int], NDArray[np.float64]]


@dataclass(frozen=True)
class EncodingView:
    """An encoding as the analysis measures it.

    Attributes:
        name: registry name.
        family: ``"none"``, ``"input"``, ``"rotary"`` or ``"bias"``.
        dim: ``d``.
        table: ``n ↦ [n, d]`` rows for positions ``0 … n−1`` (``None`` for biases); may raise
            ``ValueError`` for lengths the encoding cannot produce.
        frequencies: angular frequencies of the (sin, cos) pairs, when it has them.
        operator: ``k ↦ [d, d]`` exact shift operator, when one exists.
        bias: ``n ↦ [h, n, n]`` additive attention-score bias (bias family).
        weights: Algorithm 1 weights on the DFT bins (eq. 15 or eq. 22), when defined.
        notes: what was measured on (e.g. "at initialisation").
    """

    name: str
    family: str
    dim: int
    table: Table | None = None
    frequencies: NDArray[np.float64] | None = None
    operator: Callable[[int], NDArray[np.float64]] | None = None
    bias: Table | None = None
    weights: NDArray[np.float64] | None = None
    notes: dict[str, str] = field(default_factory=dict)


def _torch_module(name: str, *, dim: int, n_heads: int, length: int, seed: int) -> Any:
    """``posenc.nn.build_encoding(name, …)`` under ``torch.manual_seed(seed)``, leaving the global RNG as it was."""
    import torch  # torch only when a learned or bias encoding is analysed

    from posenc.nn import build_encoding

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_encoding(name, d_model=dim, n_heads=n_heads, max_len=length)


def _shaw_key_bias(module: Any, seed: int) -> Table:
    """Shaw's key term ``q·a^K_(clip(j−i))/√d_h`` for one fixed random probe ``q ~ N(0, I)``, ``[1, n, n]``."""
    import torch

    probe = torch.randn(module.head_dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    def bias(n: int) -> NDArray[np.float64]:
        index = module.index(n, n)
        q = probe.to(module.keys.dtype).expand(1, 1, n, module.head_dim)
        return _numpy(module.key_scores(q, index)[0]) / np.sqrt(module.head_dim)

    return bias


def _numpy(tensor: Any) -> NDArray[np.float64]:
    return tensor.detach().to("cpu").double().numpy()


def _sinusoidal_view(name: str, dim: int, base: float, layout: str, note: str) -> EncodingView:
    freq = spectrum.geometric(dim, base)
    return EncodingView(
        name, registry.get(name).family, dim,
        table=lambda n: tables.sinusoidal(n, dim, base=base, layout=layout),
        frequencies=freq,
        operator=(lambda k: shift_operator(k, dim=dim, base=base, layout=layout)) if dim % 2 == 0 else None,
        weights=frequency_distribution(freq, dim=dim),
        notes={"view": note},
    )


def encoding_view(
    name: str, *, dim: int, length: int, base: float = tables.DEFAULT_BASE, n_heads: int = 8, seed: int = 0
) -> EncodingView:
    """The :class:`EncodingView` of registry encoding ``name`` at encoding width ``dim``.

    Args:
        name: a name of :func:`posenc.registry.names`; unknown names raise ``ValueError`` listing them.
        dim: ``d`` (for rope: the head dimension).
        length: ``S``, the training length (``max_len`` of the learned table).
        base: ``ρ`` of sinusoidal, learnable-frequency and rope frequencies.
        n_heads: heads of the bias encodings.
        seed: torch seed for the initial parameters of learned encodings.
    """
    info = registry.get(name)
    dim = _validate.positive_int("dim", dim)
    length = _validate.positive_int("length", length)
    if name == "none":
        return EncodingView(name, info.family, dim, table=lambda n: np.zeros((n, dim)),
                            notes={"view": "no encoding: an all-zero table, every position looks the same"})
    if name == "sinusoidal":
        return _sinusoidal_view(name, dim, base, "interleaved", f"tables.sinusoidal, base {base:g}")
    if name == "learnable_frequency":
        return _sinusoidal_view(name, dim, base, "interleaved",
                                "at initialisation: frequencies = the geometric schedule, i.e. sinusoidal")
    if name == "rope":
        return _sinusoidal_view(name, dim, base, "interleaved_cos_first",
                                "rows R_t q for q = (1, 0, 1, 0, …): pairs (cos tθ_i, sin tθ_i), θ_i = ρ^(-2i/d)")
    if name == "dft":
        return EncodingView(
            name, info.family, dim,
            table=lambda n: tables.dft(n, dim, alias=True),
            frequencies=spectrum.dft(dim),
            operator=lambda k: dft_shift_operator(k, dim=dim),
            weights=dft_distribution(dim),
            notes={"view": f"tables.dft; positions >= d = {dim} aliased (s + d has the encoding of s)"},
        )
    if info.family != "bias":
        n_heads = 1  # only bias encodings have heads; d need not be divisible by n_heads otherwise
    module = _torch_module(name, dim=dim, n_heads=n_heads, length=length, seed=seed)
    built = (f"build_encoding({name!r}, d_model={dim}, n_heads={n_heads}, max_len={length}) "
             f"at initialisation, seed {seed}")
    if hasattr(module, "table"):
        return EncodingView(name, info.family, dim, table=lambda n: _numpy(module.table(n)), notes={"view": built})
    if hasattr(module, "bias"):
        return EncodingView(name, info.family, dim, bias=lambda n: _numpy(module.bias(n, n)), notes={"view": built})
    if hasattr(module, "key_scores"):
        return EncodingView(name, info.family, dim, bias=_shaw_key_bias(module, seed), notes={
            "view": f"{built}; the key term q·a^K(clip(j-i))/sqrt(d_h) for one random probe query (seed {seed})"})
    return EncodingView(name, info.family, dim, notes={
        "view": f"{type(module).__name__} offers neither table(length) nor bias(q_len, k_len) to measure"})
