"""The one registry of encodings: names → family, summary and the PyTorch module that builds it.

DESIGN "Where an encoding acts": an encoding acts on the *input* tokens (added or
concatenated), *rotates* queries and keys, or *biases* attention scores. Everything that
takes an encoding by name — :func:`posenc.nn.build_encoding`, the CLI, the analysis
scorecard, the benchmark — looks it up here, so a new encoding is added in one place.

This module imports neither torch nor matplotlib: modules are named by import path and
resolved only when built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

Family = Literal["none", "input", "rotary", "bias"]


@dataclass(frozen=True)
class EncodingInfo:
    """What the library knows about one registered encoding.

    Attributes:
        name: registry key, e.g. ``"sinusoidal"``.
        family: where it acts: ``"none"``, ``"input"``, ``"rotary"`` or ``"bias"``.
        summary: one line for listings.
        source: the seed / paper that defines it.
        module: ``"package.module:Class"`` of its PyTorch module (``None`` for ``"none"``).
        learned: whether it has trainable parameters.
    """

    name: str
    family: Family
    summary: str
    source: str
    module: str | None
    learned: bool

    def module_class(self) -> Any:
        """Import and return the PyTorch module class (imports torch)."""
        if self.module is None:
            raise ValueError(f"encoding {self.name!r} has no module: it adds nothing to the model")
        path, _, attr = self.module.partition(":")
        return getattr(importlib.import_module(path), attr)


_ENTRIES: tuple[EncodingInfo, ...] = (
    EncodingInfo("none", "none", "no positional information (permutation-equivariant)", "—", None, False),
    EncodingInfo(
        "sinusoidal", "input", "sin/cos at geometric frequencies, added to the tokens",
        "Vaswani et al. 2017 §3.5; SPEC §1", "posenc.nn.input:SinusoidalEncoding", False,
    ),
    EncodingInfo(
        "dft", "input", "faithful DFT encoding (one-hot's DFT), unit norm, positions < d",
        "Idé, Labaien & Chen, eq. 21; SPEC §4", "posenc.nn.input:DFTEncoding", False,
    ),
    EncodingInfo(
        "learned", "input", "one trainable vector per position",
        "Gehring et al. 2017; SPEC §7", "posenc.nn.input:LearnedEncoding", True,
    ),
    EncodingInfo(
        "learnable_frequency", "input", "sinusoidal with trainable frequencies, initialised from a schedule",
        "Lin et al. 2021; Su (seed su-*); SPEC §7", "posenc.nn.input:LearnableFrequencyEncoding", True,
    ),
    EncodingInfo(
        "rope", "rotary", "rotary: queries and keys rotated by t·θ_i",
        "Su et al. 2021 (RoFormer); SPEC §7", "posenc.nn.rotary:RotaryEmbedding", False,
    ),
    EncodingInfo(
        "alibi", "bias", "linear distance penalty −m_h·|i−j| with geometric head slopes",
        "Press et al. 2022; SPEC §7", "posenc.nn.bias:ALiBiBias", False,
    ),
    EncodingInfo(
        "t5", "bias", "learned scalar per head and log-bucketed relative distance",
        "Raffel et al. 2020; SPEC §7", "posenc.nn.bias:T5RelativeBias", True,
    ),
    EncodingInfo(
        "shaw", "bias", "learned embeddings of clipped relative distance on keys (and values)",
        "Shaw et al. 2018; SPEC §7", "posenc.nn.bias:ShawRelativeBias", True,
    ),
)

ENCODINGS: dict[str, EncodingInfo] = {e.name: e for e in _ENTRIES}


def names() -> list[str]:
    """Registered encoding names, in registry order."""
    return list(ENCODINGS)


def get(name: str) -> EncodingInfo:
    """Look up ``name``; an unknown name raises ``ValueError`` listing the registered ones."""
    if not isinstance(name, str) or name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; registered encodings: {', '.join(ENCODINGS)}")
    return ENCODINGS[name]
