"""Hold a framework's rotary tables against the float64 truth of a Hugging Face rope config.

The truth for a config is posenc's reading of it (:func:`posenc.nn.rope_types.hf_settings`, the
registry of rope types): frequencies ``θ_i`` in float64 for a call of ``n`` positions, an attention
factor ``a``, and at position ``t`` the tables ``a·cos(tθ_i)``, ``a·sin(tθ_i)`` and the rotated
query ``R(t)q`` (Su et al. 2021, eq. 34). Against it:

* :func:`decade_errors` measures, per decade of position, transformers' way of computing them
  (``inv_freq`` and ``position · inv_freq`` in float32, then ``cos``/``sin`` in float32; the table
  optionally cast to bfloat16) and posenc's (float64 angles, one rounding);
* :func:`merge_positions` finds where adjacent positions get identical angles when the positions
  and angles are formed in a given dtype (float16, bfloat16, float32, float64);
* :func:`compare_dump` reads a framework's dump (the npz layout of ``docs/conventions.md``) and
  reports, per array, the first position where it leaves the truth and the size of each disagreement.
"""

from __future__ import annotations

import dataclasses
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from posenc import rope_spec, spectrum
from posenc.errors import UsageError
from posenc.nn import rope_types
from posenc.nn.multiaxis import mrope_axes

DUMP_LAYOUTS: tuple[str, ...] = ("half_split", "adjacent", "pairs")
"""Column layouts of dumped tables: ``cat(f, f)`` (Hugging Face), ``repeat_interleave(f, 2)``
(Cohere, GPT-J), or one column per pair (``r/2``: gpt-oss, llama.cpp's per-pair caches)."""


@dataclasses.dataclass(frozen=True)
class Truth:
    """The float64 rotary a config describes (see module docstring)."""

    name: str
    head_dim: int
    rotary_dim: int
    base: float
    parameters: dict[str, Any]
    original_length: float
    layout: str = "half_split"
    rope: bool = True
    axes: tuple[int, ...] | None = None  # M-RoPE: the axis of each pair

    @classmethod
    def for_layer(cls, config: Any, *, layer: int, module: str = "attention") -> Truth:
        """The truth of ``module`` (``attention``, ``indexer`` …) of layer ``layer``, from
        :func:`posenc.rope_spec.hf_rope_spec` (its pair layout; NoPE layers: no rotation)."""
        groups = rope_spec.hf_rope_spec(config)
        group = next((g for g in groups if layer in g.layers), None)
        if group is None:
            layers = sorted(i for g in groups for i in g.layers)
            raise UsageError(
                f"npz 'layer' must be a layer of this config (0 … {max(layers, default=0)}), got {layer}"
            )
        found = next((m for m in group.modules if m.module == module), None)
        if found is None:
            raise UsageError(
                f"npz 'module' must be one of {[m.module for m in group.modules]} for layer {layer}, got {module!r}"
            )
        nested = any(isinstance(v, Mapping) for v in (_rope_parameters(config) or {}).values())
        base = cls.from_config(config, layer_type=group.layer_type if nested else None)
        if not found.rope:
            return dataclasses.replace(base, rope=False)
        return dataclasses.replace(base, layout=found.layout or "half_split")

    @classmethod
    def from_config(cls, config: Any, *, layer_type: str | None = None) -> Truth:
        # M-RoPE configs: each axis turns with these same frequencies (the sections only assign pairs to axes)
        settings = rope_types.hf_settings(config, layer_type=layer_type, multi_axis=True)
        sections, interleaved = rope_types.hf_mrope(config, layer_type=layer_type)
        name = settings["scaling"] or "default"
        rotary_dim = settings["rotary_dim"]
        parameters = rope_types.settings_parameters(name, settings)
        original = parameters.get("original_max_position_embeddings") or parameters.get(
            "max_position_embeddings"
        )
        axes = None
        if sections is not None:
            axes = tuple(int(a) for a in mrope_axes(sections, rotary_dim // 2, interleaved=interleaved))
        return cls(
            name,
            settings["head_dim"],
            rotary_dim,
            float(settings["base"]),
            parameters,
            float(original or 0),
            axes=axes,
        )

    def frequencies(self, length: float) -> tuple[NDArray[np.float64], float]:
        """``(θ [r/2], attention factor)`` for a call of ``length`` positions."""
        if self.name == "default":
            return spectrum.geometric(self.rotary_dim, self.base), 1.0
        theta, factor = rope_types.ROPE_TYPES[self.name].compute(
            self.rotary_dim,
            self.base,
            self.parameters,
            max(length, self.original_length)
            if rope_types.ROPE_TYPES[self.name].length_rule == "longest"
            else length,
        )
        return np.asarray(theta, dtype=np.float64), float(factor)

    def resolved(self) -> dict[str, Any]:
        """The scaling as resolved: parameters, the attention factor, and where the frequencies switch."""
        _, factor = self.frequencies(max(self.original_length, 1.0))
        out: dict[str, Any] = {
            "rope_type": self.name,
            "head_dim": self.head_dim,
            "rotary_dim": self.rotary_dim,
            "base": self.base,
        }
        for key, value in self.parameters.items():
            if value is not None:
                out[key] = value.tolist() if isinstance(value, np.ndarray) else value
        out["attention factor (resolved)"] = factor
        rule = rope_types.ROPE_TYPES[self.name].length_rule if self.name != "default" else "static"
        if rule == "current":
            _, long_factor = self.frequencies(self.original_length + 1)
            out["switch"] = (
                f"short factors while a call's longest position is < {int(self.original_length)}, long factors "
                f"from position {int(self.original_length)} (sequences longer than {int(self.original_length)}); "
                f"attention factor there {long_factor:.6g}"
            )
        elif rule == "longest":
            out["switch"] = (
                f"base grows once a call reaches position {int(self.original_length)} (longest length seen)"
            )
        return out


def _rope_parameters(config: Any) -> Any:
    get = config.get if isinstance(config, Mapping) else (lambda k: getattr(config, k, None))
    return get("rope_parameters") or get("rope_scaling")


AXIS_NAMES: tuple[str, ...] = ("t", "h", "w", "axis 3", "axis 4")


def _truth_tables(truth: Truth, t: NDArray[np.float64], length: float) -> tuple[NDArray[np.float64], ...]:
    """``(a·cos, a·sin, θ, a)`` per pair at positions ``t`` ``[n]`` (M-RoPE: ``[A, n]``, pair ``i`` at its
    axis' position)."""
    theta, factor = truth.frequencies(length)
    if truth.axes is not None and t.ndim == 2:
        phase = t[list(truth.axes), :].T * theta
    else:
        phase = np.multiply.outer(t, theta)
    return factor * np.cos(phase), factor * np.sin(phase), theta, np.asarray(factor)


def _rotate(
    q: NDArray[np.floating], cos: NDArray[np.floating], sin: NDArray[np.floating]
) -> NDArray[np.floating]:
    """``R q`` per row with half-split pairs from per-pair ``cos``, ``sin`` ``[n, r/2]`` (any float dtype)."""
    half = cos.shape[-1]
    q = np.broadcast_to(q, (*cos.shape[:-1], q.shape[-1]))
    a, b = q[..., :half], q[..., half : 2 * half]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, q[..., 2 * half :]], axis=-1)


def decade_errors(truth: Truth, *, max_position: int, seed: int = 0) -> list[dict[str, float]]:
    """Per decade ``[10^k, 10^(k+1))`` below ``max_position`` (``start``, ``end`` exclusive): max |error|
    against the float64 truth of

    ``hf_table``/``hf_rotated``: transformers' float32 tables and rotated queries (float32 ``inv_freq``,
    float32 angles); ``hf_bf16_table``: those tables cast to bfloat16 (a bf16 model's); ``posenc_table``/
    ``posenc_rotated``: float64 angles rounded once to float32. 64 positions per decade (its start
    and random ones), one random unit-scale query.
    """
    rng = np.random.default_rng(seed)
    rows = []
    q = rng.standard_normal(truth.head_dim)
    decade = 1
    while decade < max_position:
        end = min(10 * decade, max_position + 1)
        t = np.unique(
            np.concatenate([decade + np.arange(min(32, end - decade)), rng.integers(decade, end, 32)])
        )
        t = t.astype(np.float64)
        cos, sin, theta, _ = _truth_tables(truth, t, float(end))
        _, factor = truth.frequencies(float(end))
        exact_q = _rotate(q, cos, sin)
        angle32 = t.astype(np.float32)[:, None] * theta.astype(np.float32)  # transformers: float32 product
        hf_cos = np.cos(angle32) * np.float32(factor)
        hf_sin = np.sin(angle32) * np.float32(factor)
        ours_cos, ours_sin = cos.astype(np.float32), sin.astype(np.float32)
        q32 = q.astype(np.float32)
        rows.append(
            {
                "start": float(decade),
                "end": float(end),
                "hf_table": float(max(np.abs(hf_cos - cos).max(), np.abs(hf_sin - sin).max())),
                "hf_bf16_table": float(
                    max(np.abs(_bf16(hf_cos) - cos).max(), np.abs(_bf16(hf_sin) - sin).max())
                ),
                "hf_rotated": float(np.abs(_rotate(q32, hf_cos, hf_sin) - exact_q).max()),
                "posenc_table": float(max(np.abs(ours_cos - cos).max(), np.abs(ours_sin - sin).max())),
                "posenc_rotated": float(np.abs(_rotate(q32, ours_cos, ours_sin) - exact_q).max()),
            }
        )
        decade *= 10
    return rows


def _bf16(x: NDArray[np.float32]) -> NDArray[np.float64]:
    """``x`` rounded to bfloat16 (round to nearest even on the top 16 bits of float32)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32).astype(np.float64)


MERGE_DTYPES: tuple[str, ...] = ("float16", "bfloat16", "float32", "float64")


def merge_positions(truth: Truth) -> dict[str, int]:
    """Per dtype, the first position ``t`` whose angles ``fl(fl(t)·fl(θ_i))`` equal those of ``t + 1``
    for every pair: beyond it, adjacent tokens get the same rotation when positions and angles are
    formed in that dtype (transformers casts position ids to float32; a bf16 model that forms them
    in bf16 merges them far earlier). Searched over ``2^k − 1 … 2^k + 1`` (the merges start at a
    power of two, where the spacing of the dtype passes 1)."""
    theta, _ = truth.frequencies(max(truth.original_length, 1.0))
    out = {}
    for name in MERGE_DTYPES:
        bits = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}[name]
        for k in range(1, 64):
            t = 2.0**k
            if _rounded(t, bits) == _rounded(t + 1, bits) and np.array_equal(
                _rounded_angles(t, theta, bits), _rounded_angles(t + 1, theta, bits)
            ):
                out[name] = int(t)
                break
    return out


def _rounded(x: float, bits: int) -> float:
    """``x`` rounded to a binary float with ``bits`` significand bits (nearest, ties to even)."""
    if x == 0:
        return 0.0
    exponent = np.floor(np.log2(abs(x))) - (bits - 1)
    return float(np.round(x / 2.0**exponent) * 2.0**exponent)


def _rounded_angles(t: float, theta: NDArray[np.float64], bits: int) -> NDArray[np.float64]:
    return np.array([_rounded(_rounded(t, bits) * _rounded(w, bits), bits) for w in theta])


@dataclasses.dataclass(frozen=True)
class Disagreement:
    """One array of a dump that leaves the truth: where first (position, column and, for M-RoPE, the axis of
    that column's pair), how far, over how many positions."""

    array: str
    first_position: float
    max_error: float
    positions: int
    runs: list[tuple[float, float, float]]  # (first position, last position, max |error|) of each run
    first_column: int = 0
    axis: str | None = None
    per_axis: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    """M-RoPE: ``axis → (first bad position, max |error|)`` over that axis' columns."""


TABLE_ARRAYS: tuple[str, ...] = ("cos", "sin")
ROTATED_ARRAYS: tuple[tuple[str, str], ...] = (("q", "q_rot"), ("k", "k_rot"))
ID_INPUTS: tuple[str, ...] = (
    "token_types",
    "attention_mask",
    "image_grid_thw",
    "video_grid_thw",
    "second_per_grid_ts",
)


def load_dump(path: Path | str) -> dict[str, NDArray[Any]]:
    """The arrays of a dump, checked against the documented layout (``docs/conventions.md``)."""
    with open(path, "rb") as file:  # closed here even when numpy gives up on a broken file
        try:
            data = np.load(file, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                raise ValueError("it holds a single array, not named arrays")
            with data:
                arrays = {key: np.asarray(data[key]) for key in data.files}
        except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
            raise UsageError(f"--against {path}: not a readable .npz file ({error})") from None
    rotated = any(a in arrays and b in arrays for a, b in ROTATED_ARRAYS)
    ids = "position_ids" in arrays and "token_types" in arrays
    if not ids and ("positions" not in arrays or not ({"cos", "sin"} <= set(arrays) or rotated)):
        raise UsageError(
            f"--against {path}: the npz must hold 'positions' [n] (M-RoPE: [axes, n]) and 'cos' and 'sin' [n, r] "
            f"(tables) and/or 'q' and 'q_rot' (or 'k' and 'k_rot') [n, d] (rotated queries, keys), or "
            f"'position_ids' [axes, b, s] with 'token_types' [b, s] (multimodal position ids); it holds "
            f"{sorted(arrays) or 'nothing'}"
        )
    return arrays


def truth_for_dump(
    config: Any, arrays: Mapping[str, NDArray[Any]], *, layer_type: str | None = None
) -> Truth:
    """The truth a dump is held against: layer ``layer``'s ``module`` (default ``attention``) where the dump
    names one (its pair layout and NoPE from the spec), else the config's rope (of ``layer_type``)."""
    if "layer" not in arrays:
        return Truth.from_config(config, layer_type=layer_type)
    layer = np.asarray(arrays["layer"])
    if layer.size != 1 or layer.dtype.kind not in "iu":
        raise UsageError(f"npz 'layer' must be one integer (a layer index), got {_shown(layer)}")
    module = str(np.asarray(arrays["module"]).reshape(-1)[0]) if "module" in arrays else "attention"
    return Truth.for_layer(config, layer=int(layer.reshape(-1)[0]), module=module)


def compare_dump(truth: Truth, arrays: Mapping[str, NDArray[Any]], *, tolerance: float) -> list[Disagreement]:
    """Compare dumped tables and/or rotated queries and keys with the truth (arrays: :func:`load_dump`).

    ``layout`` (a string array, default ``half_split``; one of :data:`DUMP_LAYOUTS`) says how the
    dumped tables hold their pairs; rotated queries and keys are held against the truth's own pair
    layout (the spec's, when the dump names its ``layer``), or the dump's ``layout`` otherwise. ``length``
    (default ``max(positions) + 1``) is the call length the framework used (it matters for ``dynamic`` and
    ``longrope``). Rows off by more than ``tolerance`` are disagreements; each run of consecutive bad rows
    is reported, with the first bad column and, for M-RoPE, the axis of its pair.
    """
    arrays = _checked(arrays)
    positions = arrays["positions"]
    if positions.ndim == 2 and truth.axes is None:
        raise UsageError(
            f"npz 'positions' is [axes, n] = {list(positions.shape)} but this config's rope has one axis (no mrope_section)"
        )
    if truth.axes is not None and positions.ndim == 2 and positions.shape[0] != max(truth.axes) + 1:
        raise UsageError(
            f"npz 'positions' has {positions.shape[0]} axes; this config's mrope_section has {max(truth.axes) + 1}"
        )
    where = positions if positions.ndim == 1 else positions[0]
    n = where.size
    layout = str(arrays["layout"]) if "layout" in arrays else "half_split"
    if layout not in DUMP_LAYOUTS:
        raise UsageError(f"npz 'layout' must be one of {', '.join(DUMP_LAYOUTS)}, got {layout!r}")
    pairing = truth.layout if "layer" in arrays else layout
    length = float(arrays["length"]) if "length" in arrays else float(positions.max()) + 1.0
    cos, sin, _, _ = _truth_tables(truth, positions, length)
    if not truth.rope:  # a NoPE layer: no rotation at all
        cos, sin = np.ones_like(cos), np.zeros_like(sin)
    expected: dict[str, NDArray[np.float64]] = {}
    if "cos" in arrays and "sin" in arrays:
        expected["cos"], expected["sin"] = (_in_layout(v, layout) for v in (cos, sin))
    for source, target in ROTATED_ARRAYS:
        if source in arrays and target in arrays:
            x = arrays[source]
            if x.shape != (n, truth.head_dim):
                raise UsageError(
                    f"npz '{source}' must be [n={n}, head_dim={truth.head_dim}], got {list(x.shape)}"
                )
            rotated = _rotate(x, cos, sin) if pairing != "adjacent" else _adjacent_rotate(x, cos, sin)
            expected[target] = np.asarray(rotated, dtype=np.float64)
    found = []
    for key, want in expected.items():
        got = arrays[key]
        if got.shape != want.shape:
            raise UsageError(
                f"npz '{key}' must be {list(want.shape)} (positions × columns in layout {layout!r}), got {list(got.shape)}"
            )
        difference = np.abs(got - want)
        difference[~np.isfinite(got)] = np.inf
        error = difference.max(axis=1, initial=0.0)
        bad = np.flatnonzero(error > tolerance)
        if bad.size:
            runs = []
            for run in np.split(bad, np.flatnonzero(np.diff(bad) != 1) + 1):
                runs.append((float(where[run[0]]), float(where[run[-1]]), float(error[run].max())))
            column = int(np.flatnonzero(difference[bad[0]] > tolerance)[0])
            per_axis: dict[str, tuple[float, float]] = {}
            if truth.axes is not None:
                owners = [_axis_of(truth, c, key, layout, pairing) for c in range(difference.shape[1])]
                for name in dict.fromkeys(a for a in owners if a is not None):
                    cols = [c for c, a in enumerate(owners) if a == name]
                    rows = np.flatnonzero((difference[:, cols] > tolerance).any(axis=1))
                    if rows.size:
                        per_axis[name] = (float(where[rows[0]]), float(difference[:, cols].max()))
            found.append(
                Disagreement(
                    key,
                    float(where[bad[0]]),
                    float(error[bad].max()),
                    int(bad.size),
                    runs,
                    first_column=column,
                    axis=_axis_of(truth, column, key, layout, pairing),
                    per_axis=per_axis,
                )
            )
    return found


def _axis_of(truth: Truth, column: int, key: str, layout: str, pairing: str) -> str | None:
    """The M-RoPE axis whose pair holds ``column`` (``None`` for a 1-D rope or a pass-through column)."""
    if truth.axes is None:
        return None
    half = truth.rotary_dim // 2
    arranged = layout if key in TABLE_ARRAYS else pairing
    if arranged == "pairs":
        pair = column
    elif arranged == "adjacent":
        pair = column // 2
    else:
        pair = column % half if column < 2 * half else -1
    return AXIS_NAMES[truth.axes[pair]] if 0 <= pair < half else None


@dataclasses.dataclass(frozen=True)
class IdDisagreement:
    """The first token of a dumped multimodal position-id tensor whose ids leave the truth."""

    row: int
    token: int
    axis: str
    got: int
    expected: int
    tokens: int  # how many (row, token) pairs differ on some axis


def compare_position_ids(config: Any, arrays: Mapping[str, NDArray[Any]]) -> IdDisagreement | None:
    """Hold dumped ``position_ids [A, b, s]`` against the ids transformers' ``get_rope_index`` of the config's
    model family builds from the dump's ``token_types`` (and ``attention_mask``, ``image_grid_thw``,
    ``video_grid_thw``, ``second_per_grid_ts``): :func:`posenc.nn.position_ids.mrope_position_ids`."""
    import torch

    from posenc.nn import position_ids

    try:
        options = position_ids.position_ids_from_hf(config)
    except ValueError as error:
        raise UsageError(f"position ids: {error}") from None
    inputs: dict[str, Any] = {}
    for key in ID_INPUTS:
        if key in arrays:
            value = np.asarray(arrays[key])
            if value.dtype.kind not in "iuf":
                raise UsageError(f"npz '{key}' must hold numbers, got dtype {value.dtype}")
            inputs[key] = torch.from_numpy(np.ascontiguousarray(value))
    types = inputs.pop("token_types").long()
    try:
        want, _ = position_ids.mrope_position_ids(types, **inputs, **options)
    except ValueError as error:
        raise UsageError(f"position ids: {error}") from None
    got = np.asarray(arrays["position_ids"])
    expected = want.numpy()
    if got.shape != expected.shape:
        axes = got.shape[0] if got.ndim == 3 else "?"
        raise UsageError(
            f"npz 'position_ids' must be [axes={expected.shape[0]}, b, s] = {list(expected.shape)}, got "
            f"{list(got.shape)} ({axes} axes)"
        )
    differ = got != expected
    if not differ.any():
        return None
    per_token = differ.any(axis=0)
    row, token = (int(v) for v in np.argwhere(per_token)[0])
    axis = int(np.flatnonzero(differ[:, row, token])[0])
    return IdDisagreement(
        row,
        token,
        AXIS_NAMES[axis],
        int(got[axis, row, token]),
        int(expected[axis, row, token]),
        int(per_token.sum()),
    )


def _checked(arrays: Mapping[str, Any]) -> dict[str, Any]:
    """The documented arrays of a dump as float64 (``layout`` as a string), refusing what would make the
    comparison meaningless: non-real values, ``positions`` not ``[n ≥ 1]`` (or ``[axes, n]``) finite below
    ``2^53``, a query or key that is not finite (its truth would be NaN, equal to nothing), ``length`` not one
    finite number > 0."""
    out: dict[str, Any] = dict(arrays)
    for key in ("positions", "cos", "sin", "q", "q_rot", "k", "k_rot", "length"):
        if key not in arrays:
            continue
        value = np.asarray(arrays[key])
        if value.dtype.kind not in "iuf":
            raise UsageError(f"npz '{key}' must hold real numbers, got dtype {value.dtype}")
        out[key] = value.astype(np.float64)
    positions = out["positions"]
    if positions.ndim not in (1, 2) or positions.size == 0:
        raise UsageError(
            f"npz 'positions' must be [n] (M-RoPE: [axes, n]) with n >= 1, got shape {list(positions.shape)}"
        )
    if not (np.abs(positions) < 2.0**53).all():
        raise UsageError(
            "npz 'positions' must be finite and < 2^53 in magnitude (float64 cannot tell larger apart)"
        )
    for key in ("q", "k"):
        if key in out and not np.isfinite(out[key]).all():
            raise UsageError(f"npz '{key}' must be finite (it is the input the framework rotated)")
    if "length" in out:
        length = out["length"]
        if length.size != 1 or not np.isfinite(length).all() or float(length.reshape(-1)[0]) <= 0:
            raise UsageError(f"npz 'length' must be one finite number > 0, got {_shown(length)}")
        out["length"] = float(length.reshape(-1)[0])
    if "layout" in arrays:
        layout = np.asarray(arrays["layout"])
        if layout.dtype.kind != "U" or layout.size != 1:
            raise UsageError(
                f"npz 'layout' must be one string of {', '.join(DUMP_LAYOUTS)}, got {_shown(layout)}"
            )
        out["layout"] = str(layout.reshape(-1)[0])
    return out


def _shown(value: NDArray[Any]) -> str:
    """A one-line description of an array: its value if it has one element, else its shape and dtype."""
    return (
        repr(value.reshape(-1)[0].item())
        if value.size == 1
        else f"an array {list(value.shape)} of {value.dtype}"
    )


def _in_layout(values: NDArray[np.float64], layout: str) -> NDArray[np.float64]:
    if layout == "half_split":
        return np.concatenate([values, values], axis=1)
    if layout == "adjacent":
        return np.repeat(values, 2, axis=1)
    return values


def _adjacent_rotate(
    q: NDArray[np.float64], cos: NDArray[np.float64], sin: NDArray[np.float64]
) -> NDArray[np.float64]:
    r = 2 * cos.shape[-1]
    a, b = q[:, 0:r:2], q[:, 1:r:2]
    out = q.copy()
    out[:, 0:r:2], out[:, 1:r:2] = a * cos - b * sin, b * cos + a * sin
    return out
