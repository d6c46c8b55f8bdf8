"""The rope of every attention layer and sub-module of a Hugging Face config, as transformers applies it.

A model's rotary is more than one frequency table: layers may skip it (NoPE layers: Llama 4, SmolLM3,
Cohere 2's full-attention layers), use one rope per layer type (Gemma 3's sliding and full layers), pair
their columns differently (half-split ``rotate_half`` pairs ``(i, i + r/2)``; adjacent pairs
``(2i, 2i + 1)`` in Cohere, GPT-J and DeepSeek's MLA with ``rope_interleave``), and a sub-module may differ
from its parent (DeepSeek-V3.2's indexer rotates half-split pairs while its MLA rotates adjacent ones).
Some models also scale queries or scores by position or by the rope's scaling, outside the rotary
(Llama 4's NoPE temperature, Ministral 3's ``llama_4_scaling_beta``, DeepSeek's ``mscale_all_dim``).

:func:`hf_rope_spec` reads all of it into :class:`LayerGroup` s of :class:`ModuleRope` s. Each rule is a
reading of a transformers 5.x model file (named in the tables below) and is tested against that file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from posenc import spectrum
from posenc.nn import fope, rope_types

ADJACENT_PAIR_MODEL_TYPES: tuple[str, ...] = (
    "blt",
    "codegen",
    "cohere",
    "cohere2",
    "cohere2_moe",
    "ernie4_5",
    "ernie4_5_moe",
    "glm",
    "glm4",
    "gptj",
    "helium",
)
"""Text models whose ``rotate_half`` (or ``rotate_every_two``) pairs adjacent columns (``x[..., 0::2]``,
``x[..., 1::2]``)."""

ROPE_INTERLEAVE_MODEL_TYPES: tuple[str, ...] = ("axk1", "deepseek_v3", "glm4_moe_lite", "mistral4", "youtu")
"""Models whose attention rotates adjacent pairs when the config's ``rope_interleave`` is true."""

SUBMODULE_LAYOUTS: dict[str, dict[str, str]] = {
    "axk2": {"attention": "adjacent", "indexer": "half_split"},
    "deepseek_v32": {"attention": "adjacent", "indexer": "half_split"},
    "deepseek_v4": {"attention": "adjacent", "indexer": "adjacent"},
    "dots3_note": {"attention": "adjacent", "indexer": "adjacent"},
    "glm_moe_dsa": {"attention": "adjacent", "indexer": "adjacent"},
    "hy_v4": {"attention": "half_split", "indexer": "half_split"},
    "hy_v4_vl": {"attention": "adjacent", "indexer": "adjacent"},
    "minimax_m3_vl": {"attention": "half_split", "indexer": "half_split"},
    "mistral_large4": {"attention": "adjacent", "indexer": "adjacent"},
    "qwen4_exp": {"attention": "half_split", "indexer": "half_split"},
}
"""Models with a sparse-attention indexer: the pair layout of the attention and of the indexer (they
differ in DeepSeek-V3.2 and AXK2, where the indexer rotates half-split pairs and the MLA adjacent ones)."""

FOPE_KEYS: tuple[str, ...] = ("fope_init_factor", "fope_sep_head", "num_inv_freq")
"""The rope parameters that make vLLM serve FoPE (any of them not ``None``; ``use_fope`` of
``vllm/model_executor/models/interns1_pro.py``), which no transformers 5.24 model reads."""

PER_LAYER_TYPE_ROPE_MODEL_TYPES: tuple[str, ...] = tuple(
    f"{name}{suffix}"
    for name in ("diffusion_gemma", "dots3_note", "embedding_gemma2", "gemma4", "gemma4_unified")
    for suffix in ("", "_text")
)
"""Models whose rotary reads each layer type's own config (``rope_config = config.per_layer_config[layer_type]``,
its ``head_dim`` and rope parameters); NeoMME and Step-3.7 keep a ``per_layer_config`` their rotary does not read."""

SLIDING_ONLY_ROPE_MODEL_TYPES: tuple[str, ...] = ("cohere2", "cohere2_moe")
"""Models whose rotary applies only on sliding-window layers (the full-attention layers are NoPE)."""


@dataclasses.dataclass(frozen=True)
class ModuleRope:
    """The rope of one attention module (``attention``, or a sub-module such as ``indexer``).

    ``rope`` False: the module is NoPE and the other rope fields are ``None``. ``layer_type`` names the
    per-layer-type rope parameters it reads (Gemma 3's ``sliding_attention``; ``None`` where the config has
    one rope for every layer). ``layout`` is
    ``half_split`` or ``adjacent``; ``parameters`` are the rope type's resolved parameters;
    ``query_scale`` describes a position-dependent factor on the queries outside the rotary;
    ``softmax_scale_factor`` a constant factor on the scores (DeepSeek's mscale²); ``fope`` what vLLM serves
    for a FoPE config (:func:`fope_settings`), which transformers ignores; ``axis_frequencies`` the
    ``[axes, r/2]`` frequency matrix of a 2-D vision rope (:data:`AXIAL_2D_MODEL_TYPES`), whose pairs turn
    with patch coordinates (:class:`posenc.nn.MultiAxisRotary` computes it).
    """

    module: str
    rope: bool
    layer_type: str | None = None
    rope_type: str | None = None
    head_dim: int | None = None
    rotary_dim: int | None = None
    base: float | None = None
    layout: str | None = None
    attention_factor: float | None = None
    parameters: dict[str, Any] = dataclasses.field(default_factory=dict)
    mrope_section: list[int] | None = None
    mrope_interleaved: bool = False
    axis_frequencies: list[list[float]] | None = None
    ignored_keys: tuple[str, ...] = ()
    query_scale: str | None = None
    softmax_scale_factor: float | None = None
    fope: dict[str, Any] | None = None
    notes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class LayerGroup:
    """Consecutive or not, the layers (indices) that share one layer type and one set of module ropes
    (``modules`` empty: the config gives this layer type no rope parameters, e.g. convolution layers)."""

    layers: tuple[int, ...]
    layer_type: str | None
    modules: tuple[ModuleRope, ...]

    def describe_layers(self) -> str:
        """``"0-3, 5"`` style ranges of :attr:`layers` (``"all"`` when the config has no layer count)."""
        if not self.layers:
            return "all"
        runs: list[list[int]] = []
        for i in self.layers:
            if runs and i == runs[-1][-1] + 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        return ", ".join(f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _getter(config: Any) -> Callable[[str], Any]:
    if isinstance(config, Mapping):
        return config.get
    return lambda key: getattr(config, key, None)


def _module(config: Any, module: str, layer_type: str | None, layout: str) -> ModuleRope:
    reading = rope_types.hf_read(config, layer_type=layer_type, multi_axis=True)
    settings = reading.settings
    name = reading.rope_type
    rotary_dim = settings["rotary_dim"]
    parameters = rope_types.settings_parameters(name, settings)
    attention = 1.0
    if name != "default":
        original = parameters.get("original_max_position_embeddings") or parameters.get(
            "max_position_embeddings"
        )
        _, attention = rope_types.ROPE_TYPES[name].compute(
            rotary_dim, float(settings["base"]), parameters, float(original or 1)
        )
    sections, interleaved = rope_types.hf_mrope(config, layer_type=layer_type)
    query_scale = None
    if "llama_4_scaling_beta" in reading.attention:
        query_scale = (
            f"queries × (1 + {reading.attention['llama_4_scaling_beta']:g}·ln(1 + ⌊t/"
            f"{parameters.get('original_max_position_embeddings')}⌋)) after the rotary"
        )
    return ModuleRope(
        module=module,
        rope=True,
        layer_type=layer_type,
        rope_type=name,
        head_dim=settings["head_dim"],
        rotary_dim=rotary_dim,
        base=float(settings["base"]),
        layout=layout,
        attention_factor=float(attention),
        parameters={
            k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in parameters.items() if v is not None
        },
        mrope_section=sections,
        mrope_interleaved=interleaved,
        ignored_keys=tuple(sorted(reading.ignored)),
        query_scale=query_scale,
        softmax_scale_factor=reading.attention.get("softmax_scale_factor"),
        fope=_fope_spec(config, layer_type),
        notes=(*reading.notes, *_dual_chunk_notes(config)),
    )


def fope_settings(config: Any, *, layer_type: str | None = None) -> dict[str, Any] | None:
    """The :class:`posenc.nn.FourierRotary` arguments vLLM builds for a config with FoPE keys
    (:data:`FOPE_KEYS`), ``None`` without them. Read as ``vllm/model_executor/models/interns1_pro.py`` and
    ``get_rope`` read it: ``head_dim`` (else ``hidden_size // num_attention_heads``) with every dimension's
    frequency formed (vLLM passes no ``partial_rotary_factor``), ``rope_theta``, ``max_position_embeddings``
    (8192 when absent), ``num_key_value_heads`` (before tensor-parallel splitting), ``fope_sep_head``
    (``None`` = one shared table), ``num_inv_freq``, ``fope_init_factor``."""
    get = _getter(config)
    parameters = get("rope_parameters") or get("rope_scaling") or {}
    if layer_type is not None and isinstance(parameters.get(layer_type), Mapping):
        parameters = parameters[layer_type]
    if not any(parameters.get(key) is not None for key in FOPE_KEYS):
        return None
    head_dim = get("head_dim") or int(get("hidden_size")) // int(get("num_attention_heads"))
    settings = {
        "head_dim": int(head_dim),
        "base": float(parameters.get("rope_theta", get("rope_theta")) or 10000.0),
        "max_position_embeddings": get("max_position_embeddings") or 8192,
        "kv_heads": get("num_key_value_heads") or get("num_attention_heads"),
        "separate_heads": bool(parameters.get("fope_sep_head")),
        "num_inv_freq": parameters.get("num_inv_freq"),
        "init_factor": parameters.get("fope_init_factor") or 0.0,
    }
    return settings


def _fope_spec(config: Any, layer_type: str | None) -> dict[str, Any] | None:
    """:func:`fope_settings` with ``kept_frequencies`` (``F``) and ``table_heads`` (``H_c``) of the
    ``[H_c, F, F]`` coefficients."""
    settings = fope_settings(config, layer_type=layer_type)
    if settings is None:
        return None
    kept = fope.kept_frequencies(
        settings["head_dim"], settings["base"], settings["max_position_embeddings"], settings["num_inv_freq"]
    )
    heads = settings["kv_heads"] if settings["separate_heads"] else 1
    return {**settings, "kept_frequencies": int(kept.size), "table_heads": heads}


def _dual_chunk_notes(config: Any) -> tuple[str, ...]:
    """What vLLM does with a ``dual_chunk_attention_config`` (Qwen2.5-1M; An et al. 2024, "Training-Free
    Long-Context Scaling of Large Language Models", dual chunk attention), which transformers ignores."""
    dual = _getter(config)("dual_chunk_attention_config")
    if not isinstance(dual, Mapping):
        return ()
    size, local = dual.get("chunk_size"), dual.get("local_size")
    if not (isinstance(size, int) and isinstance(local, int) and 0 <= local < size):
        return (
            f"dual_chunk_attention_config chunk_size={size!r}, local_size={local!r}: not integers with "
            "0 <= local_size < chunk_size; vLLM's dual chunk attention would not run",
        )
    length = size - local
    return (
        f"dual_chunk_attention_config (chunk_size {size}, local_size {local}): transformers ignores it; vLLM "
        "then ignores the rope type and its scaling (only rope_theta and partial_rotary_factor) and rotates keys "
        f"at t mod {length} and queries at t mod {length} (intra-chunk), min(t mod {length} + {length}, {size}) "
        f"(successive chunk), min({2 * length - 1}, {size}) for every token (inter-chunk), and t mod {length} + "
        f"{length}, t mod {length} + {size} (their 'critical' variants; posenc.nn.dual_chunk_positions gives them "
        "for RotaryEmbedding's q_positions/k_positions)",
    )


def _nope(config: Any, module: str) -> ModuleRope:
    get = _getter(config)
    scale = None
    if get("model_type") in ("llama4", "llama4_text") and get("attn_temperature_tuning"):
        scale = (
            f"queries × (ln(⌊(n + 1)/{get('floor_scale')}⌋ + 1)·{get('attn_scale')} + 1), n the token's index "
            "in the cache, not its position id (Llama 4 attention temperature tuning)"
        )
    elif get("model_type") == "beam":
        scale = "attention × exp(0.1·ln(1 + (t + 1)/2048)), t the position id (Beam's NoPE layers)"
    return ModuleRope(module=module, rope=False, query_scale=scale)


def hf_rope_spec(config: Any) -> list[LayerGroup]:
    """The :class:`LayerGroup` s of a Hugging Face config (a ``PretrainedConfig`` or a dict; a multimodal
    config's ``text_config`` is read when the top level holds no rope), in order of their first layer.

    Reads: ``num_hidden_layers``; ``layer_types`` and per-layer-type ``rope_parameters`` (Gemma 3/4);
    a per-layer-type config where the model's rotary reads one (:data:`PER_LAYER_TYPE_ROPE_MODEL_TYPES`: Gemma 4's
    ``per_layer_config``, its own ``head_dim``);
    ``no_rope_layers`` / ``no_rope_layer_interval`` (Llama 4, SmolLM3: 1 means the layer *uses* rope, as
    ``self.use_rope = config.no_rope_layers[layer_idx]``); sliding-only rope (:data:`SLIDING_ONLY_ROPE_MODEL_TYPES`);
    the pair layout (:data:`ADJACENT_PAIR_MODEL_TYPES`, ``rope_interleave`` of
    :data:`ROPE_INTERLEAVE_MODEL_TYPES`, and the attention and indexer of :data:`SUBMODULE_LAYOUTS`);
    a ``dual_chunk_attention_config`` is described in the module's ``notes`` (vLLM's remapped positions), and
    vLLM's FoPE keys in the module's ``fope`` (:func:`fope_settings`).
    """
    config = _text_config(config)
    held = [name for name, c in _children(config) if _holds_rope(c) or _holds_rope(_text_config(c))]
    try:
        return _spec(config)
    except (ValueError, TypeError) as error:
        if not held:
            raise
        raise type(error)(
            f"{error} (config {_getter(config)('model_type')!r} keeps ropes in sub-configs {', '.join(held)}: "
            "read them with posenc.rope_spec.hf_rope_submodels(config), or hf_rope_spec on one of them)"
        ) from None


def _two_axis_matrix(row: NDArray[np.float64], column: NDArray[np.float64]) -> NDArray[np.float64]:
    """The ``[2, len(row) + len(column)]`` frequency matrix whose first pairs turn with the row ``h`` (axis 0) at
    ``row`` and the rest with the column ``w`` (axis 1) at ``column``."""
    matrix = np.zeros((2, row.size + column.size))
    matrix[0, : row.size] = row
    matrix[1, row.size :] = column
    return matrix


def pixtral_axis_frequencies(head_dim: int, base: float) -> NDArray[np.float64]:
    """Pixtral's 2-D rope as an ``[2, head_dim/2]`` frequency matrix of :class:`posenc.nn.MultiAxisRotary`
    (axis 0 the patch row ``h``, axis 1 the column ``w``; half-split pairs): with ``θ_i = base^(−2i/d)``,
    pair ``j < d/4`` turns by ``h·θ_(2j)`` and pair ``d/4 + j`` by ``w·θ_(2j+1)`` (transformers 5.24
    ``PixtralVisionRotaryEmbedding``: ``cat(θ[0::2], θ[1::2])``, then the row angles of the first half and the
    column angles of the second, doubled for ``rotate_half``)."""
    theta = spectrum.geometric(head_dim, base)
    quarter = theta.size // 2
    return _two_axis_matrix(theta[0::2][:quarter], theta[1::2][: theta.size - quarter])


def qwen2_vl_axis_frequencies(head_dim: int, base: float) -> NDArray[np.float64]:
    """The Qwen2-VL / Qwen2.5-VL vision rope as an ``[2, head_dim/2]`` frequency matrix of
    :class:`posenc.nn.MultiAxisRotary` (axis 0 the patch row ``h``, axis 1 the column ``w``; half-split pairs):
    with ``φ_j = base^(−2j/(d/2)) = base^(−4j/d)``, ``j < d/4``, pair ``j`` turns by ``h·φ_j`` and pair
    ``d/4 + j`` by ``w·φ_j``: the same frequencies on both axes (transformers 5.24
    ``Qwen2VLVisionRotaryEmbedding.compute_axial_rope_parameters``, ``spatial_dim = dim // 2``, and its
    ``recomposition_frequencies``: ``cat(h·φ, w·φ)``, doubled for ``rotate_half``; the same in
    ``modeling_qwen2_5_vl.py``)."""
    phi = spectrum.geometric(head_dim // 2, base)
    return _two_axis_matrix(phi, phi)


def qwen2_vl_vision_positions(grid_thw: ArrayLike, spatial_merge_size: int) -> NDArray[np.int64]:
    """The ``[n, 2]`` (row ``h``, column ``w``) ids of the patches of images or videos of ``grid_thw``
    (``[images, 3]`` rows ``(t, h, w)``), in the order the Qwen2-VL vision tower holds them: block-major over the
    ``m × m`` spatial-merge blocks (``m`` = ``spatial_merge_size``; row-major blocks, row-major within a block),
    the frame's ids repeated ``t`` times (transformers 5.24 ``vision_utils.get_vision_position_ids``). Qwen2.5-VL
    then permutes the tokens, and these ids with them, into attention windows (``get_vision_window_index``): a
    reordering of the tokens that changes no token's ids."""
    grid = np.asarray(grid_thw)
    if grid.ndim != 2 or grid.shape[1] != 3 or not np.issubdtype(grid.dtype, np.integer) or (grid < 1).any():
        raise ValueError(f"grid_thw must be positive integers of shape [images, 3], got {grid.tolist()!r}")
    m = int(spatial_merge_size)
    if m < 1 or m != spatial_merge_size or any(h % m or w % m for _, h, w in grid.tolist()):
        raise ValueError(
            f"spatial_merge_size must be a positive integer dividing every grid h and w, got "
            f"{spatial_merge_size!r} for grid {grid.tolist()!r}"
        )
    out = []
    for t, h, w in grid.tolist():
        rows, columns = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        frame = [a.reshape(h // m, m, w // m, m).transpose(0, 2, 1, 3).reshape(-1) for a in (rows, columns)]
        out.append(np.tile(np.stack(frame, axis=-1), (t, 1)))
    return np.concatenate(out).astype(np.int64)


AXIAL_2D_MODEL_TYPES: dict[str, tuple[Callable[[int, float], NDArray[np.float64]], str, str]] = {
    "pixtral": (
        pixtral_axis_frequencies,
        "hidden_size",
        "Pixtral's 2-D rope: positions are the patch's (row h, column w); pairs j < head_dim/4 turn by "
        "h·θ_2j, the others by w·θ_(2j+1)",
    ),
    "qwen2_vl_vision": (
        qwen2_vl_axis_frequencies,
        "embed_dim",
        "Qwen2-VL's vision rope: positions are the patch's (row h, column w) "
        "(posenc.rope_spec.qwen2_vl_vision_positions); pairs j < head_dim/4 turn by h·φ_j, the others by "
        "w·φ_(j − head_dim/4), φ_j = rope_theta^(−4j/head_dim)",
    ),
    "qwen2_5_vl_vision": (
        qwen2_vl_axis_frequencies,
        "hidden_size",
        "Qwen2.5-VL's vision rope: as Qwen2-VL's (posenc.rope_spec.qwen2_vl_vision_positions), the tokens and "
        "their ids then permuted into attention windows",
    ),
    "mlcd_vision_model": (
        qwen2_vl_axis_frequencies,
        "hidden_size",
        "MLCD's vision rope: as Qwen2-VL's, the patches' (row h, column w) ids row-major "
        "(posenc.rope_spec.qwen2_vl_vision_positions([[1, h, w]], 1)); the class token, first, turns pair j "
        "(j < head_dim/2) by a learned angle class_pos_emb[j] (a checkpoint parameter, not a position)",
    ),
}
"""Vision towers whose ``axial`` rope is a 2-D frequency matrix: model type → (its matrix from
``(head_dim, rope_theta)``, the width key ``head_dim`` defaults to ``width // num_attention_heads`` from, a note)."""


def _axial(config: Any) -> list[LayerGroup]:
    """The one 2-D rope of a vision encoder of :data:`AXIAL_2D_MODEL_TYPES`, for every layer."""
    get = _getter(config)
    frequencies, width, note = AXIAL_2D_MODEL_TYPES[get("model_type")]
    parameters = get("rope_parameters") or {}
    base = float(parameters.get("rope_theta", get("rope_theta")) or 10000.0)
    head_dim = get("head_dim") or int(get(width)) // int(get("num_attention_heads"))
    if head_dim % 4:
        raise ValueError(
            f"config head_dim must be a multiple of 4 for {get('model_type')}'s 2-D rope, got {head_dim}"
        )
    module = ModuleRope(
        module="attention",
        rope=True,
        rope_type="axial",
        head_dim=int(head_dim),
        rotary_dim=int(head_dim),
        base=base,
        layout="half_split",
        attention_factor=1.0,
        axis_frequencies=frequencies(int(head_dim), base).tolist(),
        notes=(
            f"{note} (axis_frequencies; posenc.nn.MultiAxisRotary(head_dim, axis_frequencies) rotates so)",
        ),
    )
    layers = get("num_hidden_layers")
    return [LayerGroup(tuple(range(layers)) if isinstance(layers, int) else (), None, (module,))]


def _spec(config: Any) -> list[LayerGroup]:
    get = _getter(config)
    model_type = get("model_type")
    if model_type in AXIAL_2D_MODEL_TYPES and (get("rope_parameters") or {}).get("rope_type") == "axial":
        return _axial(config)
    layers = get("num_hidden_layers")
    count = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0 else 0
    layer_types = get("layer_types")
    if not (isinstance(layer_types, (list, tuple)) and len(layer_types) == count and count):
        layer_types = None
    parameters = get("rope_parameters") or get("rope_scaling") or {}
    nested = isinstance(parameters, Mapping) and any(isinstance(v, Mapping) for v in parameters.values())
    uses_rope = rope_types.hf_rope_layers(config)
    layout = "adjacent" if model_type in ADJACENT_PAIR_MODEL_TYPES else "half_split"
    if model_type in ROPE_INTERLEAVE_MODEL_TYPES and get("rope_interleave"):
        layout = "adjacent"
    groups: dict[tuple[str | None, bool], list[int]] = {}
    slots: list[int | None] = list(range(count)) if count else [None]
    for i in slots:
        layer_type = None if layer_types is None or i is None else layer_types[i]
        rope = True if uses_rope is None or i is None else uses_rope[i]
        if model_type in SLIDING_ONLY_ROPE_MODEL_TYPES and layer_type is not None:
            rope = layer_type == "sliding_attention"
        groups.setdefault((layer_type, rope), []).extend([] if i is None else [i])
    if nested and layer_types is None:  # one rope per layer type, but no list saying which layer has which
        groups = {(str(t), True): [] for t, v in parameters.items() if isinstance(v, Mapping)}
    out = []
    for (layer_type, rope), indices in groups.items():
        which = layer_type if nested else None
        if nested and layer_type not in parameters:  # no rope for this layer type (e.g. a convolution layer)
            modules: tuple[ModuleRope, ...] = ()
        elif not rope or (nested and parameters[layer_type] is None):  # transformers: None, a NoPE layer type
            modules = (_nope(config, "attention"),)
        elif model_type in PER_LAYER_TYPE_ROPE_MODEL_TYPES and which is not None:  # Gemma 4: per layer type
            modules = (_module(config.per_layer_config[which], "attention", which, layout),)
        elif model_type in SUBMODULE_LAYOUTS:
            modules = tuple(
                _module(config, name, which, sub_layout)
                for name, sub_layout in SUBMODULE_LAYOUTS[model_type].items()
            )
        else:
            modules = (_module(config, "attention", which, layout),)
        out.append(LayerGroup(tuple(indices), layer_type, modules))
    return out


def _text_config(config: Any) -> Any:
    get = _getter(config)
    text = get("text_config")
    if text is not None and get("rope_parameters") is None and get("rope_scaling") is None:
        return text
    return config


@dataclasses.dataclass(frozen=True)
class SubmodelRope:
    """The rope of one sub-config of a composite config (``path``: dotted attribute names, ``""`` the config
    itself): its :class:`LayerGroup` s, or ``unread``, why :func:`hf_rope_spec` cannot read it."""

    path: str
    groups: tuple[LayerGroup, ...] = ()
    unread: str | None = None


def _children(config: Any) -> list[tuple[str, Any]]:
    """Sub-configs: attributes or keys named ``*_config``, ``encoder`` or ``decoder`` holding a config."""
    items = config.items() if isinstance(config, Mapping) else vars(config).items()
    return [
        (str(name), value)
        for name, value in items
        if (str(name).endswith("_config") or name in ("encoder", "decoder"))
        and (isinstance(value, Mapping) or hasattr(value, "to_dict"))
        and name != "dual_chunk_attention_config"
    ]


def _holds_rope(config: Any) -> bool:
    get = _getter(config)
    return get("rope_parameters") is not None or get("rope_scaling") is not None


def hf_rope_submodels(config: Any) -> list[SubmodelRope]:
    """The rope of every sub-model of a Hugging Face config, read with :func:`hf_rope_spec`: the config itself
    where that reads it (directly or in its ``text_config``), and every sub-config that holds a rope, depth
    first (Qwen2.5-Omni's ``thinker_config``, ``talker_config``, ``token2wav_config.dit_config``; T5Gemma's
    ``encoder`` and ``decoder``; BLT's four transformers, whose top-level rope parameters are defaults for
    them). A sub-config whose rope cannot be read (a vision rope such as Qwen2.5-Omni's ``axial``) is listed
    with ``unread``, the reason; a ``text_config`` read through its parent is not listed again. Raises
    :func:`hf_rope_spec`'s error when no part of the config holds a readable rope."""
    found: list[SubmodelRope] = []

    def walk(node: Any, path: str) -> None:
        read_text = False
        if not path or _holds_rope(node) or _getter(node)("text_config") is not None:
            try:
                found.append(SubmodelRope(path, tuple(_spec(_text_config(node)))))
                read_text = _text_config(node) is not node
            except (ValueError, TypeError) as error:
                if _holds_rope(node) and not any(_holds_rope(c) for _, c in _children(node)):
                    found.append(SubmodelRope(path, unread=str(error)))
        for name, child in _children(node):
            if not (read_text and name == "text_config"):
                walk(child, f"{path}.{name}" if path else name)

    walk(config, "")
    if not any(s.unread is None for s in found):
        hf_rope_spec(config)  # raises its own error
        raise ValueError("config holds no rope parameters that posenc.rope_spec.hf_rope_spec can read")
    return found
