"""Rotary frequency schedules for context extension: an open registry of name → computation.

Every variant turns the plain RoPE frequencies ``θ_i = ρ^(−2i/r)``, ``i < r/2`` (Su et al. 2021)
into new float64 frequencies and, for some, an *attention factor* ``a`` that multiplies the
cos/sin tables (so each rotated query and key is scaled by ``a``, every score by ``a²``).
Angles stay ``t·θ_i``, formed in float64 by :class:`posenc.nn.RotaryEmbedding`.

=============  =====================================================================  =============================
name           frequencies (``f`` = factor, ``L`` = original context length)            source
=============  =====================================================================  =============================
``linear``     ``θ_i / f``                                                             Chen et al. 2023 (position
                                                                                        interpolation)
``ntk``        ``θ_i`` of the base ``ρ·f^(r/(r−2))`` (fixed)                            bloc97 2023 (NTK-aware)
``dynamic``    ``θ_i`` of the base ``ρ·(f·n/L − (f − 1))^(r/(r−2))``, ``n`` = the       emozilla 2023 (dynamic NTK,
               longest length seen, ``n ≥ L`` (below ``L``: plain ``θ_i``)              Hugging Face ``dynamic``)
``yarn``       ``θ_i·(1 − γ_i)/f + θ_i·γ_i`` with the ramp ``γ_i`` between the          Peng et al. 2023 (YaRN)
               dimensions of ``β_fast`` and ``β_slow`` rotations over ``L``;
               ``a = 0.1·ln f + 1`` (or the ``mscale`` ratio)
``longrope``   ``θ_i / λ_i`` with ``λ`` = short factors while ``n ≤ L``, long ones       Ding et al. 2024 (LongRoPE)
               beyond; ``a = √(1 + ln f / ln L)``
``llama3``     wavelengths ``2π/θ_i`` above ``L/low_freq_factor``: ``θ_i/f``; below     Meta 2024 (Llama 3.1)
               ``L/high_freq_factor``: ``θ_i``; between: a smooth blend (none
               when the two factors are equal, Llama 4)
``ntk_alpha``  ``θ_i`` of the base ``ρ·α^(r/(r−2))`` (fixed NTK-α; a ``dynamic``         Tencent 2025 (Hunyuan;
               config with ``alpha`` in transformers' Hunyuan models)                   ``DynamicNTKAlphaRotary``)
``ntk_mixed``  ``θ_i / f^(((i+1)/(r/2))^b)`` (``b = 1``: fixed; a config's ``ntk``,       Su 2023 (kexue.fm 9706;
               as vLLM reads it)                                                        vLLM ``ntk`` + ``mixed_b``)
=============  =====================================================================  =============================

``deepseek_yarn`` (vLLM's name; DeepSeek-AI 2024, DeepSeek-V2) is ``yarn``'s frequencies with the ramp times
``extrapolation_factor`` and ``a`` the ``mscale`` ratio times ``attn_factor``, without transformers' rule
that both ``mscale`` and ``mscale_all_dim`` must be non-zero.

The parameter names are those of Hugging Face's ``rope_parameters`` (``factor``,
``original_max_position_embeddings``, ``beta_fast`` …). :func:`resolve_parameters` validates a
parameter dict for any registered type in one place; :func:`register` adds a new type.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc import spectrum, validate

Compute = Callable[[int, float, Mapping[str, Any], float], tuple[NDArray[np.float64], float]]
"""``(rotary_dim r, base ρ, parameters, length n) → (θ [r/2] float64, attention factor a)``."""

LENGTH_RULES: tuple[str, ...] = ("static", "current", "longest")
"""How the context length ``n`` handed to a computation is chosen on every call: ignored
(``static``), the longest position + 1 of the call (``current``, LongRoPE), or the longest
such length seen so far, reset when a call fits in ``L`` again (``longest``, dynamic NTK —
Hugging Face's ``dynamic_rope_update``)."""


@dataclass(frozen=True)
class RopeType:
    """One registered frequency computation and the parameters it takes.

    Attributes:
        compute: see :data:`Compute`; receives the parameters after :func:`resolve_parameters`.
        required: parameter names that must be given.
        defaults: optional parameter names and their defaults (``None`` = derived or unused).
        length_rule: one of :data:`LENGTH_RULES`.
        check: optional extra check ``(parameters, rotary_dim) → None`` that raises ``ValueError``.
    """

    compute: Compute
    required: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    length_rule: str = "static"
    check: Callable[[dict[str, Any], int], None] | None = None


ROPE_TYPES: dict[str, RopeType] = {}
"""The registry: name → :class:`RopeType`. Extend it with :func:`register`."""

_NUMBER_LISTS = ("short_factor", "long_factor")
_FLAGS = ("truncate",)
_NON_NEGATIVE = ("mscale", "mscale_all_dim")
"""Read as truthy by transformers (``if mscale and mscale_all_dim``): 0 means "not given"."""


def register(name: str, rope_type: RopeType) -> None:
    """Add (or replace) the rope type ``name``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if not isinstance(rope_type, RopeType):
        raise TypeError(f"rope_type must be a RopeType, got {type(rope_type).__name__}")
    if rope_type.length_rule not in LENGTH_RULES:
        raise ValueError(f"length_rule must be one of {LENGTH_RULES}, got {rope_type.length_rule!r}")
    ROPE_TYPES[name] = rope_type


def _number(name: str, value: object, *, rope_type: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"rope type {rope_type!r}: {name} must be a finite number, got {value!r}")
    if name in _NON_NEGATIVE:
        if float(value) < 0:
            raise ValueError(f"rope type {rope_type!r}: {name} must be >= 0 (0: not used), got {value!r}")
    elif float(value) <= 0:
        raise ValueError(f"rope type {rope_type!r}: {name} must be > 0, got {value!r}")
    return float(value)


def settings_parameters(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The resolved parameters (:func:`resolve_parameters`) of rope type ``name`` read from a config's
    settings (:func:`hf_settings`: its ``scaling_options``, with ``scaling_factor`` as ``factor``);
    ``{}`` for ``"default"``."""
    if name == "default":
        return {}
    options = dict(settings["scaling_options"] or {})
    if settings["scaling_factor"] is not None:
        options["factor"] = settings["scaling_factor"]
    return resolve_parameters(name, options, rotary_dim=settings["rotary_dim"])


def module_parameters(
    scaling: str | None,
    scaling_factor: float | None,
    scaling_options: Mapping[str, Any] | None,
    *,
    rotary_dim: int,
) -> dict[str, Any]:
    """The resolved parameters (:func:`resolve_parameters`) of a rotary module's ``scaling=``,
    ``scaling_factor=`` (the ``factor``, ``≥ 1``) and ``scaling_options=`` (the others, by their Hugging
    Face names); ``{}`` without ``scaling``, where a factor or options would do nothing and are refused."""
    if scaling is None:
        if scaling_factor is not None or scaling_options:
            given = "scaling_factor" if scaling_factor is not None else "scaling_options"
            raise ValueError(
                f"{given} was given without scaling, so it would do nothing; pass scaling= one of "
                f"{', '.join(map(repr, ROPE_TYPES))}"
            )
        return {}
    validate.choice("scaling", scaling, tuple(ROPE_TYPES))
    options = dict(scaling_options or {})
    if "factor" in options:
        raise ValueError("give the factor as scaling_factor=, not inside scaling_options")
    if scaling_factor is not None:
        options["factor"] = validate.positive_float("scaling_factor", scaling_factor)
        if options["factor"] < 1.0:
            raise ValueError(f"scaling_factor must be >= 1 (it extends the context), got {scaling_factor!r}")
    return resolve_parameters(scaling, options, rotary_dim=rotary_dim)


def resolve_parameters(name: str, parameters: Mapping[str, Any], *, rotary_dim: int) -> dict[str, Any]:
    """Validate ``parameters`` of the rope type ``name``; return them with defaults filled in.

    Every value must be a positive finite number, except the lists ``short_factor`` /
    ``long_factor`` (``r/2`` positive numbers each) and the bool ``truncate``. ``factor`` must be
    ``≥ 1``. A type whose ``factor`` is optional (``yarn``, ``longrope``) derives it, when absent,
    as ``max_position_embeddings / original_max_position_embeddings`` if both are given (as
    Hugging Face does), else leaves it ``None``. Unknown names raise listing the allowed ones.
    """
    if name not in ROPE_TYPES:
        raise ValueError(f"rope type must be one of {', '.join(map(repr, ROPE_TYPES))}; got {name!r}")
    spec = ROPE_TYPES[name]
    if not isinstance(parameters, Mapping):
        raise TypeError(f"rope parameters must be a mapping, got {type(parameters).__name__}")
    allowed = set(spec.required) | set(spec.defaults)
    unknown = sorted(set(parameters) - allowed)
    if unknown:
        raise ValueError(
            f"rope type {name!r} takes {', '.join(sorted(allowed)) or 'no parameters'}; got unknown {', '.join(unknown)}"
        )
    missing = [key for key in spec.required if parameters.get(key) is None]
    if missing:
        raise ValueError(f"rope type {name!r} needs {', '.join(missing)}")
    out: dict[str, Any] = {**spec.defaults, **{k: v for k, v in parameters.items() if v is not None}}
    for key, value in list(out.items()):
        if value is None:
            continue
        if key in _NUMBER_LISTS:
            values = np.asarray(value, dtype=np.float64) if not isinstance(value, str) else None
            if (
                values is None
                or values.shape != (rotary_dim // 2,)
                or not np.all(np.isfinite(values) & (values > 0))
            ):
                raise ValueError(
                    f"rope type {name!r}: {key} must hold rotary_dim/2 = {rotary_dim // 2} positive numbers, "
                    f"got {value!r}"
                )
            out[key] = values
        elif key in _FLAGS:
            if not isinstance(value, bool):
                raise TypeError(f"rope type {name!r}: {key} must be a bool, got {value!r}")
        else:
            out[key] = _number(key, value, rope_type=name)
    if out.get("factor") is None and "factor" in spec.defaults:
        longest, original = out.get("max_position_embeddings"), out.get("original_max_position_embeddings")
        if longest is not None and original is not None:
            out["factor"] = longest / original
    if out.get("factor") is not None and out["factor"] < 1.0:
        raise ValueError(
            f"rope type {name!r}: factor must be >= 1 (it extends the context), got {out['factor']!r}"
        )
    if spec.check is not None:
        spec.check(out, rotary_dim)
    return out


def _plain(r: int, base: float) -> NDArray[np.float64]:
    return spectrum.geometric(r, base)


def _ntk_base(r: int, base: float, stretch: float) -> float:
    """bloc97's NTK-aware base: ``ρ·s^(r/(r−2))`` keeps ``θ_0 = 1`` and divides ``θ_(r/2−1)`` by about ``s``."""
    return float(base * stretch ** (r / (r - 2)))


def _needs_more_than_one_pair(name: str) -> Callable[[dict[str, Any], int], None]:
    def check(parameters: dict[str, Any], rotary_dim: int) -> None:
        if rotary_dim <= 2:
            raise ValueError(
                f"rope type {name!r} needs rotary_dim > 2 (a base·s^(r/(r−2)) rescaling), got {rotary_dim}"
            )

    return check


def _linear(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    return _plain(r, base) / p["factor"], 1.0


def _ntk(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    return _plain(r, _ntk_base(r, base, p["factor"])), 1.0


def dynamic_stretch(factor: float, length: Any, original: float) -> Any:
    """Hugging Face's dynamic NTK stretch ``s = f·L/L₀ − (f − 1)`` for a call reaching ``L ≥ L₀`` positions
    (``L`` a float, or a float64 tensor for a length followed on the device)."""
    return factor * length / original - (factor - 1.0)


def ntk_frequencies(r: int, base: float, stretch: Any) -> Any:
    """``θ_i`` under bloc97's NTK-aware base (:func:`_ntk_base`), formed as :func:`posenc.spectrum.geometric`
    forms them, ``exp(−(2i/r)·ln(ρ·s^(r/(r−2))))``; ``stretch`` a float (a NumPy array back), or a float64
    tensor (a tensor on its device, by the same operations)."""
    if isinstance(stretch, numbers.Real):
        return _plain(r, _ntk_base(r, base, float(stretch)))
    x = stretch.new_tensor(2.0 * np.arange(spectrum.n_pairs(r), dtype=np.float64) / r)
    return (-(x * (base * stretch ** (r / (r - 2))).log())).exp()


def _dynamic(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    f, original = p["factor"], p["max_position_embeddings"]
    return ntk_frequencies(r, base, dynamic_stretch(f, max(n, original), original)), 1.0


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature (Peng et al. 2023): ``√(1/t) = 0.1·ln s + 1``, times ``mscale`` (DeepSeek-V2)."""
    return 1.0 if factor <= 1.0 else 0.1 * mscale * math.log(factor) + 1.0


def _yarn_frequencies(
    r: int, base: float, p: Mapping[str, Any], *, truncate: bool, extrapolation: float = 1.0
) -> NDArray[np.float64]:
    """YaRN's blend ``θ_i·(1 − γ_i)/f + θ_i·γ_i`` (Peng et al. 2023, eqs. 17–18), ``γ_i`` the ramp between the
    dimensions of ``β_fast`` and ``β_slow`` rotations over ``L``, times ``extrapolation`` (vLLM's
    ``extrapolation_factor``, 1 elsewhere)."""
    f, original = p["factor"], p["original_max_position_embeddings"]

    def dimension(rotations: float) -> float:
        """The (fractional) dimension index whose wavelength fits ``rotations`` times into ``L`` (Peng et al. 2023)."""
        return r * math.log(original / (rotations * 2.0 * math.pi)) / (2.0 * math.log(base))

    low, high = dimension(p["beta_fast"]), dimension(p["beta_slow"])
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, r - 1)
    if low == high:
        high += 0.001  # the ramp needs a non-empty interval
    ramp = np.clip((np.arange(r // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
    keep = (1.0 - ramp) * extrapolation  # 1: extrapolate (keep θ_i), 0: interpolate (θ_i / f)
    theta = _plain(r, base)
    blended: NDArray[np.float64] = theta / f * (1.0 - keep) + theta * keep
    return blended


def _yarn(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    f = p["factor"]
    attention = p["attention_factor"]
    if attention is None:
        if p["mscale"] and p["mscale_all_dim"]:
            attention = _yarn_mscale(f, p["mscale"]) / _yarn_mscale(f, p["mscale_all_dim"])
        else:
            attention = _yarn_mscale(f)
    return _yarn_frequencies(r, base, p, truncate=p["truncate"]), float(attention)


def _deepseek_yarn(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    """vLLM's ``deepseek_yarn`` (``DeepseekScalingRotaryEmbedding``): YaRN's frequencies with truncated bounds and
    the ramp times ``extrapolation_factor``; ``a = mscale(f, mscale)/mscale(f, mscale_all_dim)·attn_factor``,
    ``mscale(f, m) = 0.1·m·ln f + 1`` (so ``mscale_all_dim = 0`` gives 1, with no truthiness rule)."""
    f = p["factor"]
    attention = _yarn_mscale(f, p["mscale"]) / _yarn_mscale(f, p["mscale_all_dim"]) * p["attn_factor"]
    return _yarn_frequencies(r, base, p, truncate=True, extrapolation=p["extrapolation_factor"]), float(
        attention
    )


def _longrope(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    original = p["original_max_position_embeddings"]
    factors = p["long_factor"] if n > original else p["short_factor"]
    attention = p["attention_factor"]
    if p["short_mscale"] is not None:  # Phi-3.5-MoE: a fixed factor per regime, in place of the computed one
        attention = p["long_mscale"] if n > original else p["short_mscale"]
    elif attention is None:
        f = p["factor"]
        attention = 1.0 if f is None or f <= 1.0 else math.sqrt(1.0 + math.log(f) / math.log(original))
    return _plain(r, base) / factors, float(attention)


def _check_longrope(parameters: dict[str, Any], rotary_dim: int) -> None:
    given = [k for k in ("short_mscale", "long_mscale") if parameters.get(k) is not None]
    if len(given) == 1:
        raise ValueError(
            f"rope type 'longrope': short_mscale and long_mscale go together (transformers' Phi-3.5-MoE reads "
            f"both), got only {given[0]}"
        )


def _llama3(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    f, low, high, original = (
        p["factor"],
        p["low_freq_factor"],
        p["high_freq_factor"],
        p["original_max_position_embeddings"],
    )
    theta = _plain(r, base)
    wavelength = 2.0 * math.pi / theta
    if high > low:
        smooth = (original / wavelength - low) / (high - low)
    else:  # an empty band (Llama 4 Scout: both factors 1); at a wavelength of exactly L transformers
        smooth = np.zeros_like(theta)  # divides 0 by 0 (NaN): posenc takes θ_i / f there
    blended = (1.0 - smooth) * theta / f + smooth * theta
    out = np.where(wavelength > original / low, theta / f, blended)
    return np.where(wavelength < original / high, theta, out), 1.0


def _check_llama3(parameters: dict[str, Any], rotary_dim: int) -> None:
    low, high = parameters["low_freq_factor"], parameters["high_freq_factor"]
    if high < low:
        raise ValueError(
            f"rope type 'llama3': high_freq_factor must be >= low_freq_factor (the wavelengths between "
            f"L/high_freq_factor and L/low_freq_factor are blended), got {high} < {low}"
        )


register("linear", RopeType(_linear, required=("factor",)))
register("ntk", RopeType(_ntk, required=("factor",), check=_needs_more_than_one_pair("ntk")))


def _ntk_alpha(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    return _plain(r, _ntk_base(r, base, p["alpha"])), 1.0


register("ntk_alpha", RopeType(_ntk_alpha, required=("alpha",), check=_needs_more_than_one_pair("ntk_alpha")))


def _ntk_mixed(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    """Su's fixed / mixed NTK (Su 2023, "Transformer upgrade road 12", kexue.fm/archives/9706):
    ``θ_i = ρ^(−2i/r) / λ_i``, ``λ_i = f^(((i + 1)/(r/2))^b)`` (``b = 1``: fixed NTK, ``λ_i = f^(2(i+1)/r)``),
    so the last pair is divided by ``f`` exactly; vLLM's ``NTKScalingRotaryEmbedding``."""
    steps = np.arange(1, r // 2 + 1, dtype=np.float64) / (r // 2)
    return _plain(r, base) / np.exp(math.log(p["factor"]) * steps ** p["mixed_b"]), 1.0


register("ntk_mixed", RopeType(_ntk_mixed, required=("factor",), defaults={"mixed_b": 1.0}))
register(
    "dynamic",
    RopeType(
        _dynamic,
        required=("factor", "max_position_embeddings"),
        length_rule="longest",
        check=_needs_more_than_one_pair("dynamic"),
    ),
)
register(
    "yarn",
    RopeType(
        _yarn,
        required=("original_max_position_embeddings",),
        defaults={
            "factor": None,
            "max_position_embeddings": None,
            "attention_factor": None,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": None,
            "mscale_all_dim": None,
            "truncate": True,
        },
        check=lambda p, r: _require_factor("yarn", p),
    ),
)
register(
    "deepseek_yarn",
    RopeType(
        _deepseek_yarn,
        required=("factor", "original_max_position_embeddings"),
        defaults={
            "max_position_embeddings": None,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 0.0,
            "attn_factor": 1.0,
            "extrapolation_factor": 1.0,
        },
    ),
)
register(
    "longrope",
    RopeType(
        _longrope,
        required=("short_factor", "long_factor", "original_max_position_embeddings"),
        defaults={
            "factor": None,
            "max_position_embeddings": None,
            "attention_factor": None,
            "short_mscale": None,
            "long_mscale": None,
        },
        length_rule="current",
        check=_check_longrope,
    ),
)
register(
    "llama3",
    RopeType(
        _llama3,
        required=("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
        check=_check_llama3,
    ),
)


def _proportional(r: int, base: float, p: Mapping[str, Any], n: float) -> tuple[NDArray[np.float64], float]:
    """Gemma 4's proportional rope (transformers' ``_compute_proportional_rope_parameters``): the first
    ``⌊p·r/2⌋`` pairs turn at ``ρ^(−2i/r)/f`` over the whole head (``r = d_h``), the others not at all."""
    theta = _plain(r, base)
    theta[int(p["partial_rotary_factor"] * r // 2) :] = 0.0
    return theta / p["factor"], 1.0


register("proportional", RopeType(_proportional, defaults={"factor": 1.0, "partial_rotary_factor": 1.0}))


def _require_factor(name: str, parameters: dict[str, Any]) -> None:
    if parameters.get("factor") is None:
        raise ValueError(
            f"rope type {name!r} needs factor, or max_position_embeddings and original_max_position_embeddings "
            "to derive it from"
        )


_HF_GLOBAL_KEYS = (
    "rope_type",
    "type",
    "rope_theta",
    "partial_rotary_factor",
    "mrope_section",
    "mrope_interleaved",
    "interleaved",
)
"""Rope-parameter keys that are not options of the rope type (M-RoPE's are read by :func:`hf_mrope`;
``interleaved`` is Qwen3-Omni's spelling of ``mrope_interleaved``)."""

HF_ROPE_KEYS: dict[str, str] = {
    "factor": "the scaling factor (linear, dynamic, yarn, longrope, llama3, proportional)",
    "original_max_position_embeddings": "the pre-training context L (yarn, longrope, llama3)",
    "max_position_embeddings": "transformers reads the config's own max_position_embeddings instead",
    "attention_factor": "the factor on cos/sin (yarn, longrope)",
    "beta_fast": "yarn's fast-rotation bound (default 32)",
    "beta_slow": "yarn's slow-rotation bound (default 1)",
    "mscale": "yarn's attention-factor numerator scale",
    "mscale_all_dim": "yarn's attention-factor denominator scale; DeepSeek-style models also multiply "
    "the softmax scale by mscale(factor, mscale_all_dim)^2",
    "truncate": "yarn: round the ramp bounds to whole dimensions (default true)",
    "short_factor": "longrope's per-pair factors up to L",
    "long_factor": "longrope's per-pair factors beyond L",
    "short_mscale": "Phi-3.5-MoE (phimoe): the cos/sin factor up to L",
    "long_mscale": "Phi-3.5-MoE (phimoe): the cos/sin factor beyond L",
    "low_freq_factor": "llama3: wavelengths above L/low_freq_factor are divided by factor",
    "high_freq_factor": "llama3: wavelengths below L/high_freq_factor are kept",
    "alpha": "Hunyuan: a 'dynamic' rope with alpha is a fixed NTK-alpha base rho*alpha^(r/(r-2))",
    "mixed_b": "vLLM's ntk: mixed NTK exponent b (Su 2023)",
    "attn_factor": "vLLM's deepseek_yarn: a factor on its attention factor",
    "extrapolation_factor": "vLLM's deepseek_yarn: a factor on the ramp's extrapolated share",
    "llama_4_scaling_beta": "Ministral 3 / Mistral 4 (yarn): the attention scales the rotated queries by "
    "1 + beta*ln(1 + floor(t/L)), outside the rotary",
    "fope_init_factor": "vLLM's FoPE (InternS1-Pro): the coefficients' initialisation noise; transformers "
    "ignores it (posenc.nn.FourierRotary computes FoPE)",
    "fope_sep_head": "vLLM's FoPE: one coefficient pair per KV head; transformers ignores it",
    "num_inv_freq": "vLLM's FoPE: keep the first num_inv_freq frequencies; transformers ignores it",
}
"""Every ``rope_parameters`` key besides :data:`_HF_GLOBAL_KEYS` that ``transformers.modeling_rope_utils``
(5.x) defines or one of its model files reads, and what reads it. A key a rope type does not read is
ignored by transformers (with a warning) and so by :func:`hf_read` (which lists it); any other key is
refused, naming it."""

ATTENTION_KEYS: tuple[str, ...] = ("llama_4_scaling_beta",)
"""Keys read by a model's attention rather than its rotary (see :data:`HF_ROPE_KEYS`)."""

SOFTMAX_MSCALE_MODEL_TYPES: tuple[str, ...] = (
    "axk1",
    "axk2",
    "bailing_hybrid",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "glm4_moe_lite",
    "glm_moe_dsa",
    "hy_v4",
    "hy_v4_vl",
    "longcat_flash",
    "minicpm3",
    "mistral4",
    "mistral_large4",
    "youtu",
)
"""Model types whose attention multiplies the softmax scale by ``mscale(f, mscale_all_dim)²``
(``yarn_apply_mscale`` of transformers' DeepSeek-V2 file: ``0.1·mscale_all_dim·ln f + 1``, squared)
when the rope type is not ``default`` and ``mscale_all_dim`` is non-zero."""


def _getter(config: Any) -> Callable[[str], Any]:
    if isinstance(config, Mapping):
        return config.get
    return lambda key: getattr(config, key, None)


def _hf_parameters(config: Any, layer_type: str | None) -> dict[str, Any]:
    """The rope parameters of ``config`` (of ``layer_type`` where it has one set per layer type)."""
    parameters = _getter(config)("rope_parameters") or _getter(config)("rope_scaling") or {}
    if not isinstance(parameters, Mapping):
        raise TypeError(f"config rope_parameters must be a dict, got {type(parameters).__name__}")
    nested = sorted(k for k, v in parameters.items() if isinstance(v, Mapping))
    if nested or layer_type is not None:
        if layer_type not in nested:
            raise ValueError(
                f"layer_type must name one of the per-layer rope parameters {nested} of this config, got {layer_type!r}"
            )
        parameters = parameters[layer_type]
    return dict(parameters)


def _positive_count(value: object) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
        and float(value) > 0
    )


DEFAULT_ROPE_FULL_HEAD_MODEL_TYPES: tuple[str, ...] = tuple(
    [
        "afmoe",
        "apertus",
        "apertus1p5",
        "arcee",
        "aria",
        "axk1",
        "axk2",
        "bailing_hybrid",
        "beam",
        "bitnet",
        "blt",
        "chameleon",
        "cohere",
        "cohere2",
        "cohere2_moe",
        "cohere_compass",
        "cosmos3_edge",
        "csm",
        "cwm",
        "dbrx",
        "deepseek_ocr2",
        "deepseek_v2",
        "deepseek_v3",
        "deepseek_v32",
        "dia",
        "diffllama",
        "doge",
        "dory",
        "dots1",
        "embedding_gemma2",
        "emu3",
        "eomt_dinov3",
        "ernie4_5",
        "ernie4_5_moe",
        "ernie4_5_vl_moe",
        "esm",
        "esmc",
        "eurobert",
        "evolla",
        "exaone4",
        "exaone_moe",
        "falcon",
        "falcon_h1",
        "flex_olmo",
        "flint",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3n",
        "gemma4",
        "gemma4_unified",
        "glm_moe_dsa",
        "gpt_oss",
        "gradium_phonon_tts",
        "granite",
        "granite4_vision",
        "granite_docling",
        "granite_swa",
        "granitemoe",
        "granitemoe_swa",
        "granitemoehybrid",
        "granitemoeshared",
        "gte",
        "helium",
        "higgs_audio_v2",
        "hrm_text",
        "hunyuan_v1_dense",
        "hunyuan_v1_moe",
        "hunyuan_vl",
        "hy_v3",
        "hy_v4",
        "hy_v4_vl",
        "hyperclovax",
        "idefics",
        "jais2",
        "jetmoe",
        "jina_embeddings_v3",
        "kolibri1",
        "kyutai_speech_to_text",
        "lara_mini",
        "lasr",
        "lfm2",
        "lfm2_moe",
        "lfm3",
        "llama",
        "llama4",
        "longcat_flash",
        "mimi",
        "minicpm3",
        "minimax",
        "ministral",
        "ministral3",
        "mistral",
        "mistral4",
        "mistral_large4",
        "mixtral",
        "mllama",
        "modernbert",
        "modernbert_decoder",
        "molmo2",
        "moshi",
        "muse_glimmer",
        "muse_glimmer_assistant",
        "muse_spark",
        "nanochat",
        "neucodec",
        "nomic_bert",
        "olmo",
        "olmo2",
        "olmo3",
        "olmo_hybrid",
        "olmoe",
        "openai_privacy_filter",
        "paddleocr_vl",
        "pe_audio",
        "pe_audio_video",
        "pe_video",
        "phimoe",
        "pocket_tts",
        "pocket_tts_audio_tokenizer",
        "pp_doclayout_v2",
        "qwen2",
        "qwen2_5_omni",
        "qwen2_5_vl",
        "qwen2_moe",
        "qwen2_vl",
        "qwen3",
        "qwen3_moe",
        "qwen3_omni_moe",
        "qwen3_vl",
        "qwen3_vl_moe",
        "seed_oss",
        "smollm3",
        "starcoder2",
        "t5gemma",
        "t5gemma2",
        "timesfm2_5",
        "ultrabert",
        "unlimited_ocr",
        "vaultgemma",
        "voxtral_realtime",
        "xcodec2",
        "youtu",
        "zamba2",
    ]
)
"""Model types whose default rope (``compute_default_rope_parameters`` of their transformers 5.24 model file)
turns the whole head, ignoring ``partial_rotary_factor`` (``dim = head_dim``, Llama's rule); the other files'
default rope, and every scaled rope type of ``modeling_rope_utils``, read it."""

ALWAYS_INTERLEAVED_MROPE_MODEL_TYPES: tuple[str, ...] = ("qwen3_omni_moe_text",)
"""Models whose text rotary assigns M-RoPE pairs interleaved whatever the config says (transformers'
``Qwen3OmniMoeThinkerTextRotaryEmbedding.recomposition_frequencies``)."""


def hf_mrope(config: Any, *, layer_type: str | None = None) -> tuple[list[int] | None, bool]:
    """``(mrope_section, mrope_interleaved)`` of a Hugging Face config (``(None, False)`` without M-RoPE).

    ``mrope_interleaved`` (Qwen3-VL), else Qwen3-Omni's ``interleaved``; always interleaved for
    :data:`ALWAYS_INTERLEAVED_MROPE_MODEL_TYPES`."""
    parameters = _hf_parameters(config, layer_type)
    sections = parameters.get("mrope_section")
    interleaved = parameters.get("mrope_interleaved", parameters.get("interleaved", False))
    if _getter(config)("model_type") in ALWAYS_INTERLEAVED_MROPE_MODEL_TYPES:
        interleaved = True
    return (None if sections is None else list(sections)), bool(interleaved)


def hf_rope_layers(config: Any) -> list[bool] | None:
    """Which layers of a Hugging Face config rotate their queries and keys (``None``: every layer).

    Llama 4 leaves the rotary out of some layers ("NoPE" layers). Read as transformers reads it
    (``Llama4TextAttention.use_rope = config.no_rope_layers[layer_idx]``): ``no_rope_layers[i] = 1``
    marks a layer *with* rope; an empty or absent list means every ``no_rope_layer_interval``-th
    layer (default 4) has none. The rope of the rotating layers is :func:`hf_settings`' (one for all of
    them); the NoPE layers' attention temperature (``attn_temperature_tuning``, ``floor_scale``,
    ``attn_scale``: a query scale by token index) and the rope layers' ``attention_chunk_size`` (a
    mask) act outside the rotary.
    """
    get = _getter(config)
    flags, interval = get("no_rope_layers"), get("no_rope_layer_interval")
    if flags is None and interval is None and get("model_type") != "llama4_text":
        return None
    layers = get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or layers <= 0:
        raise ValueError(f"config num_hidden_layers must be a positive int, got {layers!r}")
    if not flags:
        interval = 4 if interval is None else interval
        if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
            raise ValueError(f"config no_rope_layer_interval must be a positive int, got {interval!r}")
        return [(i + 1) % interval != 0 for i in range(layers)]
    if (
        isinstance(flags, (str, bytes))
        or not isinstance(flags, Sequence)
        or len(flags) != layers
        or any(f not in (0, 1) or isinstance(f, float) for f in flags)
    ):
        raise ValueError(
            f"config no_rope_layers must be a list of num_hidden_layers={layers} flags 0/1 (1: the layer uses "
            f"rope), got {flags!r}"
        )
    return [bool(f) for f in flags]


def _real(name: str, value: object) -> float:
    """A config number as float, or a ``ValueError`` naming the key (no strings, lists or bools)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"config {name} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class HFReading:
    """How transformers reads the rope of one layer type of a config, key by key.

    Attributes:
        settings: :class:`posenc.nn.RotaryEmbedding` arguments (see :func:`hf_settings`).
        rope_type: the rope type as computed (``default``, a registered name; Hunyuan's ``dynamic``
            with ``alpha`` reads as ``ntk_alpha``).
        ignored: ``key → why`` for keys transformers accepts but does not read for this rope type.
        attention: ``key → value`` for keys read by the model's attention, not its rotary
            (:data:`ATTENTION_KEYS`).
        notes: model-specific readings transformers makes (one line each).
    """

    settings: dict[str, Any]
    rope_type: str
    ignored: dict[str, str]
    attention: dict[str, Any]
    notes: tuple[str, ...]


def llama4_query_scale(positions: NDArray[Any], reading: HFReading) -> NDArray[np.float64]:
    """The factor Ministral 3 / Mistral 4 put on the rotated queries at ``positions``:
    ``1 + β·ln(1 + ⌊t/L⌋)`` (β = ``llama_4_scaling_beta``, L = ``original_max_position_embeddings``;
    transformers' ``get_llama_4_attn_scale``, after Meta's Llama 4 attention temperature tuning), 1 without β."""
    t = np.asarray(positions, dtype=np.float64)
    beta = reading.attention.get("llama_4_scaling_beta")
    if beta is None:
        return np.ones_like(t)
    original = (reading.settings["scaling_options"] or {}).get("original_max_position_embeddings")
    if original is None:
        raise ValueError("llama_4_scaling_beta needs original_max_position_embeddings (its L)")
    scale: NDArray[np.float64] = 1.0 + float(beta) * np.log1p(np.floor(t / float(original)))
    return scale


def hf_settings(config: Any, *, layer_type: str | None = None, multi_axis: bool = False) -> dict[str, Any]:
    """:class:`posenc.nn.RotaryEmbedding` arguments for a Hugging Face config (object or dict).

    Reads the keys as ``transformers.modeling_rope_utils`` does (5.x): ``rope_parameters`` or the
    legacy ``rope_scaling`` (its ``rope_type``, or legacy ``type``; ``default`` when absent);
    ``rope_theta`` and ``partial_rotary_factor`` from there, else from the config, else 10000 and
    1; ``head_dim``, else ``hidden_size // num_attention_heads``; for ``llama3``/``yarn``/``longrope``
    ``original_max_position_embeddings`` from the config itself when it has one (Phi-3), else from
    the parameters, else ``max_position_embeddings``. Returns ``head_dim``, ``base``,
    ``rotary_dim``, ``scaling``, ``scaling_factor``, ``scaling_options`` and ``max_position_embeddings``.
    Models with one rope per layer type (``rope_parameters = {"full_attention": {…},
    "sliding_attention": {…}}``, Gemma 3) need ``layer_type`` to pick one. M-RoPE configs (rope type
    ``mrope`` or an ``mrope_section``, Qwen2-VL) are refused unless ``multi_axis`` (their frequencies
    are the default ones; :func:`hf_mrope` reads the sections). :func:`hf_read` says, per key, how
    each was read.
    """
    reading = hf_read(config, layer_type=layer_type, multi_axis=multi_axis)
    if reading.ignored:
        warnings.warn(
            f"rope type {reading.rope_type!r} does not read rope_parameters {', '.join(sorted(reading.ignored))}: "
            "ignored, as transformers ignores them",
            stacklevel=2,
        )
    return reading.settings


def hf_read(config: Any, *, layer_type: str | None = None, multi_axis: bool = False) -> HFReading:
    """:func:`hf_settings` with the account of every key (see :class:`HFReading`)."""
    get = _getter(config)
    parameters = _hf_parameters(config, layer_type)
    name = parameters.get("rope_type", parameters.get("type", "default"))
    if not isinstance(name, str):
        raise ValueError(f"config rope_type must be a string, got {name!r}")
    if (name == "mrope" or "mrope_section" in parameters) and not multi_axis:
        raise ValueError(
            f"config rope_type must be one of 'default', {', '.join(map(repr, ROPE_TYPES))} for a 1-D rotary; "
            f"this config is M-RoPE (rope_type {name!r}, mrope_section {parameters.get('mrope_section')}), "
            "whose positions have 3 axes: use posenc.nn.multiaxis.MultiAxisRotary.from_hf"
        )
    if name == "mrope":  # Qwen2-VL's legacy name: default frequencies, sections read by hf_mrope
        name = "default"
    notes: list[str] = []
    if name == "dynamic" and parameters.get("alpha"):
        name = "ntk_alpha"
        notes.append(
            "rope_type 'dynamic' with alpha: a fixed NTK-alpha base, not recomputed with the length "
            "(transformers' Hunyuan rotary reads it so)"
        )
    if name == "ntk":  # no transformers type; vLLM's get_rope reads it (with mixed_b) as Su's NTK
        name = "ntk_mixed"
        notes.append("rope_type 'ntk' read as vLLM reads it (Su's fixed NTK, or mixed NTK with mixed_b)")
    if name != "default" and name not in ROPE_TYPES:
        raise ValueError(
            f"config rope_type must be 'default' or one of {', '.join(map(repr, ROPE_TYPES))}, got {name!r}"
        )
    unknown = sorted(k for k in parameters if k not in _HF_GLOBAL_KEYS and k not in HF_ROPE_KEYS)
    if unknown:
        raise ValueError(
            f"config rope_parameters key {unknown[0]!r} is not one transformers reads (rope type {name!r}); known "
            f"keys: {', '.join(sorted((*_HF_GLOBAL_KEYS, *HF_ROPE_KEYS)))}"
        )
    theta = parameters.get("rope_theta", get("rope_theta"))
    theta = 10000.0 if theta is None else _real("rope_theta", theta)
    if theta <= 0.0:
        raise ValueError(f"config rope_theta must be > 0 (the rotary base), got {theta!r}")
    fraction = parameters.get("partial_rotary_factor", get("partial_rotary_factor"))
    fraction = 1.0 if fraction is None else _real("partial_rotary_factor", fraction)
    if not 0.0 < fraction <= 1.0:
        raise ValueError(
            f"config partial_rotary_factor must be in (0, 1] (the fraction of head_dim that rotates), got {fraction!r}"
        )
    head_dim = get("head_dim")
    if head_dim is None:
        hidden, heads = get("hidden_size"), get("num_attention_heads")
        if not _positive_count(hidden) or not _positive_count(heads):
            raise ValueError(
                f"config needs head_dim, or hidden_size and num_attention_heads (positive integers), got "
                f"hidden_size={hidden!r}, num_attention_heads={heads!r}"
            )
        head_dim = int(hidden) // int(heads)
    if not _positive_count(head_dim) or not float(head_dim).is_integer():
        raise ValueError(f"config head_dim must be a positive integer, got {head_dim!r}")
    head_dim = int(head_dim)
    longest = get("max_position_embeddings")
    allowed = set(ROPE_TYPES[name].required) | set(ROPE_TYPES[name].defaults) if name != "default" else set()
    options, ignored, attention = {}, {}, {}
    for key, value in parameters.items():
        if key in _HF_GLOBAL_KEYS:
            continue
        if key in ATTENTION_KEYS:
            attention[key] = _real(key, value)
        elif key in allowed and not (key == "max_position_embeddings" and longest is not None):
            options[key] = value
        else:
            ignored[key] = HF_ROPE_KEYS[key]
    factor = options.pop("factor", None)
    if name in ("llama3", "yarn", "longrope"):
        original = get("original_max_position_embeddings")
        if original is None:
            original = options.get("original_max_position_embeddings")
        if original is not None and not _positive_count(original):
            raise ValueError(
                f"config original_max_position_embeddings must be a positive number of positions (or absent, "
                f"meaning max_position_embeddings), got {original!r}"
            )
        options["original_max_position_embeddings"] = longest if original is None else original
    if name in ("dynamic", "yarn", "longrope"):
        options["max_position_embeddings"] = (
            longest if longest is not None else options.get("max_position_embeddings")
        )
    if name == "longrope" and get("model_type") == "phimoe" and options.get("short_factor") is not None:
        options["long_factor"] = options["short_factor"]
        notes.append(
            "phimoe: short_factor at every length (transformers' PhimoeRotaryEmbedding recomputes the "
            "frequencies without the length); short_mscale/long_mscale switch beyond L"
        )
    if name == "proportional":  # the fraction picks the turning pairs; the table spans the whole head
        options["partial_rotary_factor"], fraction = fraction, 1.0
    if name == "ntk_alpha":  # transformers' Hunyuan rotary turns the whole head
        fraction = 1.0
    if name == "default" and fraction != 1.0 and get("model_type") in DEFAULT_ROPE_FULL_HEAD_MODEL_TYPES:
        ignored["partial_rotary_factor"] = (
            f"{get('model_type')}'s default rope turns the whole head (its compute_default_rope_parameters "
            "does not read partial_rotary_factor)"
        )
        fraction = 1.0
    rotary_dim = int(head_dim * fraction)
    if rotary_dim % 2 and name == "default" and rotary_dim < head_dim:
        # transformers' default rope: inv_freq = base^(−arange(0, r, 2)/r), ⌈r/2⌉ frequencies whose cat(freqs,
        # freqs) tables rotate the first r + 1 columns (GLM-4-MoE: int(42 × 0.5) = 21 → 11 pairs over 22 columns);
        # the same frequencies are base'^(−2i/(r + 1)) with base' = base^((r + 1)/r)
        notes.append(
            f"head_dim × partial_rotary_factor = {head_dim} × {fraction!r} → {rotary_dim} is odd: transformers forms "
            f"{(rotary_dim + 1) // 2} frequencies rope_theta^(−2i/{rotary_dim}) over the first {rotary_dim + 1} "
            f"columns, read as base rope_theta^({rotary_dim + 1}/{rotary_dim}) = {theta ** ((rotary_dim + 1) / rotary_dim):.6g} "
            f"over rotary_dim {rotary_dim + 1}"
        )
        theta = theta ** ((rotary_dim + 1) / rotary_dim)
        rotary_dim += 1
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(
            f"config head_dim × partial_rotary_factor must give an even rotary dimension >= 2 (or, for the default "
            f"rope, an odd one below head_dim, as transformers rounds it up), got {head_dim} × {fraction!r} → {rotary_dim}"
        )
    if get("model_type") in SOFTMAX_MSCALE_MODEL_TYPES and name != "default":
        all_dim = options.get("mscale_all_dim") or 0.0
        if all_dim and factor is not None:
            attention["softmax_scale_factor"] = _yarn_mscale(float(factor), float(all_dim)) ** 2
    settings = {
        "head_dim": head_dim,
        "base": theta,
        "rotary_dim": rotary_dim,
        "scaling": None if name == "default" else name,
        "scaling_factor": factor,
        "scaling_options": options or None,
        "max_position_embeddings": longest,
    }
    return HFReading(settings, name, ignored, attention, tuple(notes))
