"""``posenc check CONFIG.json [--against DUMP.npz] [--json]``: a rope config's rope per layer group and its
float32 error budget, or a framework's dump held against the float64 truth."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from posenc import conformance, rope_spec, validate
from posenc.errors import UsageError

HELP = "hold a Hugging Face rope config (or a framework's dumped tables) against the float64 truth"

MAX_POSITION = 2**53
"""Positions beyond 2^53 cannot be told apart in float64, the truth's own precision."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help=HELP,
        description=(
            "Print the rope of every layer group of CONFIG (NoPE layers, rope type, base, rotary dims, pair "
            "layout, attention factor and any query or score scale, per sub-module), then per decade of position "
            "the max |error| of transformers-style float32 rotary tables and rotated queries (and posenc's) "
            "against the float64 truth, and where adjacent positions merge in each dtype. With --against, compare "
            "a dump of tables, rotated queries/keys or multimodal position ids (npz layout: docs/conventions.md) "
            "and report the first position (layer, axis, column) and size of each disagreement; the exit status "
            "is then 1 if there is one. --json prints one JSON document instead."
        ),
    )
    p.add_argument(
        "config", type=Path, help="a Hugging Face config.json (its text_config is used if it has one)"
    )
    p.add_argument("--layer-type", help="for configs with one rope per layer type (Gemma 3): only this one")
    p.add_argument(
        "--max-position",
        type=_position_count,
        default=10**7,
        help=f"last decade measured (default 10^7, at most 2^53 = {MAX_POSITION})",
    )
    p.add_argument("--against", type=Path, metavar="FILE.npz", help="compare this dump with the truth")
    p.add_argument("--tolerance", type=float, default=1e-5, help="--against: largest |error| accepted (1e-5)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON document (for CI)")
    p.set_defaults(func=run)


def _position_count(text: str) -> int:
    """``--max-position``: a whole number of positions, written ``10000000`` or ``1e7``, 1 … 2^53."""
    try:
        value = float(text) if any(c in text for c in ".eE") else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a whole number of positions (e.g. 1e7), got {text!r}"
        ) from None
    if isinstance(value, float) and not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a whole number of positions, got {text!r}")
    if not 1 <= value <= MAX_POSITION:
        raise argparse.ArgumentTypeError(
            f"must be in 1 … 2^53 = {MAX_POSITION} (float64 cannot tell later positions apart), got {text!r}"
        )
    return int(value)


def _read_config(path: Path) -> dict[str, Any]:
    if path.is_dir():
        hint = path / "config.json"
        raise UsageError(
            f"CONFIG {path} is a directory; pass the config file in it"
            + (f": {hint}" if hint.is_file() else f" (no {hint} there)")
        )
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise UsageError(f"CONFIG {path}: cannot be read ({error.strerror or error})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(
            f"CONFIG {path}: not UTF-8 text (byte 0x{raw[error.start]:02x} at offset {error.start}); a config.json "
            "is UTF-8 JSON"
        ) from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"CONFIG {path}: not valid JSON ({error})") from None
    except RecursionError:
        raise UsageError(f"CONFIG {path}: nested too deeply to be a config") from None
    if not isinstance(config, dict):
        raise UsageError(
            f"CONFIG {path}: must hold a JSON object (a Hugging Face config), got {type(config).__name__}"
        )
    return config


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """A multimodal config's ``text_config`` where the top level holds no rope, else the config."""
    text_config = config.get("text_config")
    return (
        text_config
        if isinstance(text_config, dict) and "rope_parameters" not in config and "rope_scaling" not in config
        else config
    )


def _config_error(path: Path, error: Exception) -> UsageError:
    return UsageError(f"CONFIG {path}: {error}")


def _read(path: Path, reader: Any, *args: Any, **kwargs: Any) -> Any:
    """``reader(*args, **kwargs)``, a config it cannot read turned into a one-line error naming the file."""
    try:
        return reader(*args, **kwargs)
    except UsageError:
        raise
    except (ValueError, TypeError, RecursionError) as error:
        raise _config_error(path, error) from None


def run(args: argparse.Namespace) -> int:
    tolerance = validate.positive_float("--tolerance", args.tolerance)
    full = _read_config(args.config)
    config = _text_config(full)
    raw_rope = config.get("rope_parameters") or config.get("rope_scaling")
    if raw_rope is not None and not isinstance(raw_rope, dict):
        raise UsageError(
            f"CONFIG {args.config}: rope_parameters (or rope_scaling) must be an object such as "
            f'{{"rope_type": "linear", "factor": 2.0}}, got {raw_rope!r}'
        )
    try:
        groups = rope_spec.hf_rope_spec(config)
    except UsageError:
        raise
    except (ValueError, TypeError, RecursionError) as error:
        submodels = _submodels(config)
        if submodels is None:
            raise _config_error(args.config, error) from None
        return _run_submodels(args, config, submodels)
    if args.layer_type is not None:
        chosen = [g for g in groups if g.layer_type == args.layer_type]
        if not chosen:
            raise UsageError(
                f"--layer-type must be one of {sorted({str(g.layer_type) for g in groups})}, got {args.layer_type!r}"
            )
        groups = chosen
    report: dict[str, Any] = {"config": str(args.config), "layer_groups": [_group_json(g) for g in groups]}
    if not args.json:
        print(f"posenc check {args.config}")
        for group in groups:
            _print_group(group)
    if args.against is not None:
        return _against(args, full, groups, tolerance, report)
    report["ropes"] = _budgets(args, config, groups)
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _submodels(config: dict[str, Any]) -> list[rope_spec.SubmodelRope] | None:
    """The sub-configs of a composite config (Qwen2.5-Omni, T5Gemma, BLT …), or ``None`` for a config that
    is not one (no sub-config holds a rope posenc reads)."""
    try:
        found = rope_spec.hf_rope_submodels(config)
    except (ValueError, TypeError, RecursionError):
        return None
    return found if all(s.path for s in found) else None


def _run_submodels(
    args: argparse.Namespace, config: dict[str, Any], found: list[rope_spec.SubmodelRope]
) -> int:
    """``posenc check`` of each sub-config that holds a rope, in turn (``--against`` and ``--layer-type`` need
    one model: pass that sub-config's JSON)."""
    paths = ", ".join(s.path for s in found)
    for flag, value in (("--against", args.against), ("--layer-type", args.layer_type)):
        if value is not None:
            raise UsageError(
                f"{flag}: CONFIG {args.config} keeps its ropes in sub-configs ({paths}); write the one to check "
                "to its own JSON file and pass that"
            )
    report: dict[str, Any] = {"config": str(args.config), "submodels": []}
    if not args.json:
        print(f"posenc check {args.config} (sub-configs: {paths})")
    for sub in found:
        if sub.unread is not None:
            report["submodels"].append({"path": sub.path, "unread": sub.unread})
            if not args.json:
                print(f"\nsub-config {sub.path}: not read ({sub.unread})")
            continue
        node: Any = config
        for name in sub.path.split("."):
            node = node[name]
        if not args.json:
            print(f"\nsub-config {sub.path}:")
            for group in sub.groups:
                _print_group(group)
        entry = {"path": sub.path, "layer_groups": [_group_json(g) for g in sub.groups]}
        entry["ropes"] = _budgets(args, _text_config(node), list(sub.groups))
        report["submodels"].append(entry)
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _budgets(
    args: argparse.Namespace, config: dict[str, Any], groups: list[rope_spec.LayerGroup]
) -> list[Any]:
    """The float32 error budget of each distinct rope of ``groups`` (one per layer type where the config keys
    its rope parameters by layer type), printed unless ``--json``."""
    raw_rope = config.get("rope_parameters") or config.get("rope_scaling")
    nested = isinstance(raw_rope, dict) and any(isinstance(v, dict) for v in raw_rope.values())
    ropes = []
    seen: set[str | None] = set()
    for group in groups:
        if any(m.axis_frequencies is not None for m in group.modules):  # a 2-D vision rope: no 1-D budget
            continue
        if (
            not any(m.rope for m in group.modules)
            or (group.layer_type in seen and nested)
            or (not nested and seen)
        ):
            continue
        seen.add(group.layer_type)
        truth = _read(
            args.config,
            conformance.Truth.from_config,
            config,
            layer_type=group.layer_type if nested else None,
        )
        rows = conformance.decade_errors(truth, max_position=args.max_position)
        merges = conformance.merge_positions(truth)
        ropes.append(
            {
                "layer_type": group.layer_type if nested else None,
                "resolved": _jsonable(truth.resolved()),
                "decades": rows,
                "merges": merges,
            }
        )
        if not args.json:
            _print_budget(group.layer_type if nested else None, truth, rows, merges)
    return ropes


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


def _group_json(group: rope_spec.LayerGroup) -> dict[str, Any]:
    return {
        "layers": list(group.layers),
        "layer_type": group.layer_type,
        "modules": [_jsonable({k: v for k, v in vars(m).items()}) for m in group.modules],
    }


def _print_group(group: rope_spec.LayerGroup) -> None:
    kind = f" ({group.layer_type})" if group.layer_type else ""
    print(f"layers {group.describe_layers()}{kind}:")
    if not group.modules:
        print(
            "  no rope parameters for this layer type (no attention, or a rope transformers keeps elsewhere)"
        )
    for m in group.modules:
        if not m.rope:
            print(f"  {m.module}: no rope (NoPE)" + (f"; {m.query_scale}" if m.query_scale else ""))
            continue
        print(
            f"  {m.module}: rope_type {m.rope_type}, base {m.base:g}, rotary_dim {m.rotary_dim} of head_dim "
            f"{m.head_dim}, {m.layout} pairs, attention factor {m.attention_factor:.6g}"
        )
        for key, value in m.parameters.items():
            shown = value if not isinstance(value, list) else f"[{', '.join(f'{v:.6g}' for v in value)}]"
            print(f"    {key}: {shown}")
        if m.axis_frequencies is not None:
            print(f"    {len(m.axis_frequencies)} position axes (no 1-D float32 budget for it below)")
        if m.mrope_section:
            print(
                f"    mrope_section: {m.mrope_section} ({'interleaved' if m.mrope_interleaved else 'contiguous'} axes t, h, w)"
            )
        if m.query_scale:
            print(f"    {m.query_scale}")
        if m.softmax_scale_factor is not None:
            print(
                f"    scores × {m.softmax_scale_factor:.6g} (mscale(factor, mscale_all_dim)², in the attention)"
            )
        if m.ignored_keys:
            print(
                f"    ignored (as transformers ignores them for this rope type): {', '.join(m.ignored_keys)}"
            )
        if m.fope:
            f, half = m.fope["kept_frequencies"], m.fope["head_dim"] // 2
            print(
                f"    FoPE (vLLM's; transformers ignores its keys): {f} of {half} frequencies kept "
                + (f"(the first num_inv_freq={m.fope['num_inv_freq']})" if m.fope["num_inv_freq"] is not None
                   else f"(θ_j > 2π/{m.fope['max_position_embeddings']})")
                + f", tables from the checkpoint's cos_coef/sin_coef [{m.fope['table_heads']}, {f}, {f}], "
                f"cos 1/sin 0 on the other {half - f} pairs; posenc.nn.FourierRotary(**posenc.rope_spec.fope_settings(config)) computes it"
            )  # fmt: skip
        for note in m.notes:
            print(f"    note: {note}")


def _print_budget(
    layer_type: str | None, truth: conformance.Truth, rows: list[dict[str, float]], merges: dict[str, int]
) -> None:
    which = f" ({layer_type})" if layer_type else ""
    print(f"\nresolved{which}:")
    for key, value in truth.resolved().items():
        shown = value if not isinstance(value, list) else f"[{', '.join(f'{v:.6g}' for v in value)}]"
        print(f"  {key}: {shown}")
    print(
        "\nmax |error| against float64 angles (transformers: float32 inv_freq and angles; posenc: float64 angles)"
    )
    print(
        f"  {'positions':<22}{'hf table f32':>14}{'hf table bf16':>15}{'hf q_rot f32':>14}{'posenc table':>14}{'posenc q_rot':>14}"
    )
    for row in rows:
        span = f"[{row['start']:.0e}, {row['end']:.0e})"
        print(
            f"  {span:<22}{row['hf_table']:>14.2e}{row['hf_bf16_table']:>15.2e}{row['hf_rotated']:>14.2e}"
            f"{row['posenc_table']:>14.2e}{row['posenc_rotated']:>14.2e}"
        )
    print("\nadjacent positions get identical angles (positions and angles formed in the dtype) from:")
    print("  " + ", ".join(f"{name} {t:,}" for name, t in merges.items()))
    print("  posenc forms angles in float64 from integer positions (exact below 2^53)")


def _against(
    args: argparse.Namespace,
    config: dict[str, Any],
    groups: list[rope_spec.LayerGroup],
    tolerance: float,
    report: dict[str, Any],
) -> int:
    path = args.against
    arrays = conformance.load_dump(path)
    if "position_ids" in arrays and "token_types" in arrays:
        found_ids = _read(args.config, conformance.compare_position_ids, config, arrays)
        report["against"] = {
            "dump": str(path),
            "kind": "position_ids",
            "disagreement": None if found_ids is None else vars(found_ids),
        }
        if args.json:
            print(json.dumps(report, indent=2))
        elif found_ids is None:
            print(f"\n{path}: position ids agree with the model family's own at every token")
        else:
            d = found_ids
            print(
                f"\n{path}: position ids differ first at row {d.row}, token {d.token}: axis {d.axis} is {d.got}, "
                f"expected {d.expected} ({d.tokens} tokens differ)"
            )
        return 0 if found_ids is None else 1
    layers = np.asarray(arrays["layer"]).reshape(-1) if "layer" in arrays else None
    if layers is None or layers.size == 1:
        slices = [arrays]
    else:  # one dump of several layers: [L, n, …] arrays, 'layer' [L]
        slices = [
            {
                **arrays,
                "layer": layers[j],
                **{k: arrays[k][j] for k in _PER_LAYER if k in arrays and arrays[k].ndim == 3},
            }
            for j in range(layers.size)
        ]
    results = []
    for part in slices:
        truth = _read(
            args.config, conformance.truth_for_dump, _text_config(config), part, layer_type=args.layer_type
        )
        results.append((part, truth, conformance.compare_dump(truth, part, tolerance=tolerance)))
    report["against"] = {
        "dump": str(path),
        "kind": "tables",
        "layer": None
        if layers is None
        else (int(layers[0]) if layers.size == 1 else [int(v) for v in layers]),
        "disagreements": [
            {**vars(d), **({} if layers is None else {"layer": int(np.asarray(part["layer"]))})}
            for part, _, found in results
            for d in found
        ],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for part, truth, found in results:
            _print_found(path, part, truth, found, tolerance)
    return 1 if any(found for *_, found in results) else 0


_PER_LAYER = ("cos", "sin", "q", "q_rot", "k", "k_rot")


def _print_found(
    path: Path,
    arrays: dict[str, Any],
    truth: conformance.Truth,
    found: list[conformance.Disagreement],
    tolerance: float,
) -> None:
    where = ""
    if "layer" in arrays:
        module = str(arrays["module"]) if "module" in arrays else "attention"
        where = f" (layer {int(np.asarray(arrays['layer']))}, {module}{'' if truth.rope else ', NoPE'})"
    checked = [
        k for k in ("cos", "sin", "q_rot", "k_rot") if k in arrays and (k in ("cos", "sin") or k[0] in arrays)
    ]
    n = np.asarray(arrays["positions"]).shape[-1]
    if not found:
        print(
            f"\n{path}{where}: {', '.join(checked)} agree with the truth at all {n} positions (|error| <= {tolerance:g})"
        )
        return
    print(f"\n{path}{where}: disagreements (|error| > {tolerance:g})")
    for d in found:
        axis = f" (axis {d.axis})" if d.axis else ""
        print(
            f"  {d.array}: first at position {d.first_position:.17g}, column {d.first_column}{axis}, max |error| "
            f"{d.max_error:.3g}, {d.positions} of {n} positions"
        )
        for name, (first_at, size_at) in d.per_axis.items():
            print(f"    axis {name}: first at position {first_at:.17g}, max |error| {size_at:.3g}")
        for first, last, size in d.runs[:10]:
            print(f"    positions {first:.17g} … {last:.17g}: max |error| {size:.3g}")
        if len(d.runs) > 10:
            print(f"    … {len(d.runs) - 10} more runs")
