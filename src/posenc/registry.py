"""The registry of encodings: a name → where the encoding acts, its module, and what it can do.

An encoding acts on the *input* tokens (added or concatenated), *rotates* queries and keys,
adds a query-independent *bias* to the attention scores, adds a *query_bias* (a score term
that depends on the query, Shaw et al. 2018), or is *contextual* (positions computed from the
queries and keys, Golovneva et al. 2024). Everything that takes an encoding by name —
:func:`posenc.nn.build_encoding`, :class:`posenc.nn.TransformerEncoder`, the CLI, the analysis
scorecard, the benchmark — looks it up here, so an encoding registered once works everywhere::

    from posenc import registry
    registry.register("mine", MyEncoding, summary="…", source="Me et al. 2026")

``MyEncoding`` subclasses one of the contracts of :mod:`posenc.nn.contracts`; its class
attribute ``family`` becomes the entry's family. This module imports neither torch nor
matplotlib: posenc's own modules are registered by ``"package.module:Class"`` path and
imported only when built.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, get_args

import numpy as np
from numpy.typing import NDArray

Family = Literal["none", "input", "rotary", "bias", "query_bias", "contextual"]
FAMILIES: tuple[str, ...] = get_args(Family)

Rows = Callable[[int], NDArray[np.float64]]

MODEL_SIZES: tuple[str, ...] = ("d_model", "n_heads", "head_dim", "max_len")
"""Constructor parameters the model fills in from its sizes; every other parameter is an option."""

_DEFAULT_VIEW = "posenc.nn.build:analysis_view"
"""The view of a module without a NumPy view of its own: build it (torch) and ask its contract."""


@dataclass(frozen=True)
class EncodingView:
    """An encoding as :mod:`posenc.analysis` measures it: NumPy only.

    Attributes:
        name: registry name.
        family: the entry's family.
        dim: ``d``.
        table: ``n ↦ [n, d]`` rows for positions ``0 … n−1`` (``None`` for biases); may raise
            ``ValueError`` for lengths the encoding cannot produce.
        frequencies: angular frequencies of the (sin, cos) pairs, when it has them.
        operator: ``k ↦ [d, d]`` exact shift operator, when one exists.
        bias: ``n ↦ [h, n, n]`` additive attention-score bias (bias families).
        weights: weights on the DFT bins of the reconstruction of a one-hot position
            (Idé, Labaien & Chen, eqs. 15 and 22), when defined.
        layout: the column layout (:data:`posenc.spectrum.LAYOUTS`) in which ``table``'s columns are
            (sin, cos) pairs at ``frequencies``; ``None`` when they are not such pairs (biases,
            learned tables, rotated probe rows, the DFT's block of constant, cos, sin and Nyquist columns).
        dft_rows: ``table``'s rows are DFT coefficients of one-hot positions in the column order of
            :func:`posenc.tables.dft` (Idé, Labaien & Chen, eq. 21), so the inverse DFT decodes them.
        notes: what was measured on (e.g. "at initialisation").
    """

    name: str
    family: str
    dim: int
    table: Rows | None = None
    frequencies: NDArray[np.float64] | None = None
    operator: Callable[[int], NDArray[np.float64]] | None = None
    bias: Rows | None = None
    weights: NDArray[np.float64] | None = None
    layout: str | None = None
    dft_rows: bool = False
    notes: dict[str, str] = field(default_factory=dict)


class ViewFunction(Protocol):
    """Builds the :class:`EncodingView` of a registered encoding at width ``dim``."""

    def __call__(
        self, info: EncodingInfo, *, dim: int, length: int, base: float, n_heads: int, seed: int
    ) -> EncodingView: ...


@dataclass(frozen=True)
class EncodingInfo:
    """What the library knows about one registered encoding.

    Attributes:
        name: registry key, e.g. ``"sinusoidal"``.
        family: where it acts (:data:`FAMILIES`).
        summary: one line for listings.
        source: the paper that defines it (author, year, equation).
        module: the PyTorch module class, or its ``"package.module:Class"`` path (``None`` for ``"none"``).
        learned: whether it has trainable parameters.
        scales: whether the benchmark's scale policies (unit / matched / learned norm) apply: the
            module takes ``unit_norm``, ``scale`` and ``learn_scale``.
        faithful_length: ``d_model ↦`` the number of positions it encodes injectively (``None``:
            unbounded); the benchmark refuses longer windows.
        view: its analysis view (a :class:`ViewFunction` or its ``"package.module:function"`` path);
            ``None`` builds the module and asks its contract (``analysis_view``).
        fixed_frequencies: the frequencies, shift operator and weights of ``view`` depend on the
            width alone — no parameter or option of the module changes them — so the analysis of a
            trained module takes them from ``view`` (the DFT encoding's ``ω_k = 2πk/d``).
    """

    name: str
    family: Family
    summary: str
    source: str
    module: str | type | None
    learned: bool = False
    scales: bool = False
    faithful_length: Callable[[int], int] | None = None
    view: str | ViewFunction | None = None
    fixed_frequencies: bool = False

    def module_class(self) -> type:
        """The PyTorch module class (imports it when registered by path); checks its ``family``."""
        if self.module is None:
            raise ValueError(f"encoding {self.name!r} has no module: it adds nothing to the model")
        cls = _resolve(self.module)
        declared = getattr(cls, "family", None)
        if declared != self.family:
            raise TypeError(
                f"encoding {self.name!r} is registered as family {self.family!r} but {cls.__qualname__}.family "
                f"is {declared!r}"
            )
        return cls

    def option_names(self) -> tuple[str, ...]:
        """The constructor options a user may set (parameters other than :data:`MODEL_SIZES`; imports the class)."""
        if self.module is None:
            return ()
        params = inspect.signature(self.module_class()).parameters
        return tuple(p for p in params if p not in MODEL_SIZES)

    def analysis_view(self, *, dim: int, length: int, base: float, n_heads: int, seed: int) -> EncodingView:
        """The :class:`EncodingView` of this encoding at width ``dim`` (``length``: the training length)."""
        function = _resolve(_DEFAULT_VIEW if self.view is None else self.view)
        return function(self, dim=dim, length=length, base=base, n_heads=n_heads, seed=seed)


def _resolve(target: str | Any) -> Any:
    """An object given as itself or as ``"package.module:attribute"``."""
    if not isinstance(target, str):
        return target
    path, _, attr = target.partition(":")
    return getattr(importlib.import_module(path), attr)


ENCODINGS: dict[str, EncodingInfo] = {}
"""Registered encodings by name, in registration order (read-only: use :func:`register`)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")


def register(
    name: str,
    cls: type | str | None,
    *,
    summary: str,
    source: str,
    family: Family | None = None,
    learned: bool = False,
    scales: bool = False,
    faithful_length: Callable[[int], int] | None = None,
    view: str | ViewFunction | None = None,
    fixed_frequencies: bool = False,
    replace: bool = False,
) -> EncodingInfo:
    """Register encoding ``name`` so the encoder, the benchmark and the analysis take it by name.

    Args:
        name: lower-case identifier (``[a-z][a-z0-9_]*``: it appears in run paths and CLI lists).
        cls: a subclass of a contract of :mod:`posenc.nn.contracts`, its ``"package.module:Class"``
            path, or ``None`` (no encoding). Its constructor may ask for ``d_model``, ``n_heads``,
            ``head_dim`` and ``max_len``, which the model fills in.
        summary, source: one line, and the paper (author, year, equation).
        family: required with a path or ``None`` (checked against the class when it is imported);
            with a class it is read from ``cls.family`` and may be omitted.
        learned, scales, faithful_length, view, fixed_frequencies: as :class:`EncodingInfo`.
        replace: allow re-registering an existing name.

    Returns the new :class:`EncodingInfo`. Raises ``ValueError`` for a bad or taken name or a
    family that disagrees with the class, ``TypeError`` for a class without ``family``.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name must match [a-z][a-z0-9_]* (it appears in paths and CLI lists), got {name!r}")
    if name in ENCODINGS and not replace:
        raise ValueError(f"encoding {name!r} is already registered; pass replace=True to replace it")
    if isinstance(cls, type):
        own = getattr(cls, "family", None)
        if own not in FAMILIES:
            raise TypeError(
                f"{cls.__qualname__} has no family; subclass a contract of posenc.nn.contracts "
                f"(InputContract, RotaryContract, ScoreBiasContract, QueryBiasContract, ContextualContract)"
            )
        if family is not None and family != own:
            raise ValueError(f"family={family!r} disagrees with {cls.__qualname__}.family = {own!r}")
        family = own
    elif isinstance(cls, str) or cls is None:
        if family not in FAMILIES:
            raise ValueError(
                f"family must be one of {', '.join(FAMILIES)} when cls is a path or None, got {family!r}"
            )
    else:
        raise TypeError(f"cls must be a class, a 'package.module:Class' path or None, got {cls!r}")
    if scales and family != "input":
        raise ValueError(f"scales=True applies to input encodings only; {name!r} is a {family} encoding")
    if fixed_frequencies and view is None:
        raise ValueError(
            f"fixed_frequencies=True needs a view: the analysis of {name!r} takes its frequencies from it"
        )
    info = EncodingInfo(
        name, family, summary, source, cls, learned, scales, faithful_length, view, fixed_frequencies
    )
    ENCODINGS[name] = info
    return info


def unregister(name: str) -> None:
    """Remove ``name`` (e.g. a test's temporary encoding); unknown names raise ``ValueError``."""
    get(name)
    del ENCODINGS[name]


def names() -> list[str]:
    """Registered encoding names, in registration order."""
    return list(ENCODINGS)


def get(name: str) -> EncodingInfo:
    """Look up ``name``; an unknown name raises ``ValueError`` listing the registered ones."""
    if not isinstance(name, str) or name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; registered encodings: {', '.join(ENCODINGS)}")
    return ENCODINGS[name]


# posenc's own encodings ---------------------------------------------------------------------------

_VIEWS = "posenc.analysis.views"

register(
    "none",
    None,
    family="none",
    summary="no positional information (permutation-equivariant)",
    source="—",
    view=f"{_VIEWS}:none_view",
)
register(
    "sinusoidal",
    "posenc.nn.input:SinusoidalEncoding",
    family="input",
    scales=True,
    summary="sin/cos at geometric frequencies, added to the tokens",
    source="Vaswani et al. 2017, §3.5",
    view=f"{_VIEWS}:sinusoidal_view",
)
register(
    "dft",
    "posenc.nn.input:DFTEncoding",
    family="input",
    scales=True,
    summary="faithful DFT encoding (one-hot's DFT), unit norm, positions < d",
    source="Idé, Labaien & Chen 2024, eq. 21",
    faithful_length=lambda d_model: d_model,
    view=f"{_VIEWS}:dft_view",
    fixed_frequencies=True,
)
register(
    "learned",
    "posenc.nn.input:LearnedEncoding",
    family="input",
    scales=True,
    learned=True,
    summary="one trainable vector per position",
    source="Gehring et al. 2017, §3.1",
)
register(
    "learnable_frequency",
    "posenc.nn.input:LearnableFrequencyEncoding",
    family="input",
    scales=True,
    learned=True,
    summary="sinusoidal with trainable frequencies, initialised from a schedule",
    source="Lin et al. 2021; Su 2021 (sinusoidal origins)",
    view=f"{_VIEWS}:learnable_frequency_view",
)
register(
    "rope",
    "posenc.nn.rotary:RotaryEmbedding",
    family="rotary",
    summary="rotary: queries and keys rotated by t·θ_i",
    source="Su et al. 2021 (RoFormer), eq. 34",
    view=f"{_VIEWS}:rope_view",
)
register(
    "alibi",
    "posenc.nn.bias:ALiBiBias",
    family="bias",
    summary="linear distance penalty −m_h·|i−j| with geometric head slopes",
    source="Press et al. 2022, §3",
)
register(
    "t5",
    "posenc.nn.bias:T5RelativeBias",
    family="bias",
    learned=True,
    summary="learned scalar per head and log-bucketed relative distance",
    source="Raffel et al. 2020, §2.1",
)
register(
    "shaw",
    "posenc.nn.bias:ShawRelativeBias",
    family="query_bias",
    learned=True,
    summary="learned embeddings of clipped relative distance on keys (and values)",
    source="Shaw et al. 2018, eqs. 3–5",
)
register(
    "kerple",
    "posenc.nn.relative:KerpleBias",
    family="bias",
    learned=True,
    summary="learned logarithmic kernel −r1·log(1 + r2·|i−j|) per head (form='power': −r1·|i−j|^r2)",
    source="Chi et al. 2022 (KERPLE), eqs. 5–6",
)
register(
    "kerple_power",
    "posenc.nn.relative:KerplePowerBias",
    family="bias",
    learned=True,
    summary="learned power kernel −r1·|i−j|^r2 per head",
    source="Chi et al. 2022 (KERPLE), eq. 5",
)
register(
    "sandwich",
    "posenc.nn.relative:SandwichBias",
    family="bias",
    summary="sinusoidal relative kernel Σ cos((i−j)ω_k) − d/2 as a bias, head factors 8h/H",
    source="Chi et al. 2023 (Sandwich), §5",
)
register(
    "fire",
    "posenc.nn.relative:FIREBias",
    family="bias",
    learned=True,
    summary="MLP of the interpolated distance log(c|i−j|+1)/log(c·max(i, L)+1)",
    source="Li et al. 2023 (FIRE), eq. 3",
)
register(
    "p_rope",
    "posenc.nn.prope:PartialRotary",
    family="rotary",
    summary="rotary keeping only the fraction p of its highest frequencies",
    source="Barbero et al. 2024, §6",
)
register(
    "cope",
    "posenc.nn.contextual:CoPE",
    family="contextual",
    learned=True,
    summary="contextual positions: gates σ(q·k) counted back from the query, interpolated embeddings",
    source="Golovneva et al. 2024 (CoPE), eqs. 3–5",
)
