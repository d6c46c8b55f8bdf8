"""``posenc check CONFIG.json [--against DUMP.npz]``: a rope config's float32 error budget, or a framework's dump held against the float64 truth."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from posenc import conformance, validate
from posenc.errors import UsageError

HELP = "hold a Hugging Face rope config (or a framework's dumped tables) against the float64 truth"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help=HELP,
        description=(
            "Print, per decade of position, the max |error| of transformers-style float32 rotary tables and "
            "rotated queries (and posenc's) against the float64 truth of CONFIG, where adjacent positions "
            "merge in each dtype, and the scaling parameters as resolved. With --against, compare a dump "
            "of tables or rotated queries (npz layout: docs/conventions.md) and report the first position "
            "and size of each disagreement; the exit status is then 1 if there is one."
        ),
    )
    p.add_argument(
        "config", type=Path, help="a Hugging Face config.json (its text_config is used if it has one)"
    )
    p.add_argument("--layer-type", help="for configs with one rope per layer type (Gemma 3): which one")
    p.add_argument("--max-position", type=int, default=10**7, help="last decade measured (default 10^7)")
    p.add_argument("--against", type=Path, metavar="FILE.npz", help="compare this dump with the truth")
    p.add_argument("--tolerance", type=float, default=1e-5, help="--against: largest |error| accepted (1e-5)")
    p.set_defaults(func=run)


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise UsageError(f"CONFIG {path}: not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise UsageError(
            f"CONFIG {path}: must hold a JSON object (a Hugging Face config), got {type(config).__name__}"
        )
    text = config.get("text_config")
    return (
        text
        if isinstance(text, dict) and "rope_parameters" not in config and "rope_scaling" not in config
        else config
    )


def run(args: argparse.Namespace) -> int:
    validate.positive_int("--max-position", args.max_position)
    tolerance = validate.positive_float("--tolerance", args.tolerance)
    truth = conformance.Truth.from_config(_read_config(args.config), layer_type=args.layer_type)
    print(f"posenc check {args.config}")
    for key, value in truth.resolved().items():
        shown = value if not isinstance(value, list) else f"[{', '.join(f'{v:.6g}' for v in value)}]"
        print(f"  {key}: {shown}")
    if args.against is not None:
        return _against(truth, args.against, tolerance)
    print(
        "\nmax |error| against float64 angles (transformers: float32 inv_freq and angles; posenc: float64 angles)"
    )
    header = f"  {'positions':<22}{'hf table f32':>14}{'hf table bf16':>15}{'hf q_rot f32':>14}{'posenc table':>14}{'posenc q_rot':>14}"
    print(header)
    for row in conformance.decade_errors(truth, max_position=args.max_position):
        span = f"[{row['start']:.0e}, {row['end']:.0e})"
        print(
            f"  {span:<22}{row['hf_table']:>14.2e}{row['hf_bf16_table']:>15.2e}{row['hf_rotated']:>14.2e}"
            f"{row['posenc_table']:>14.2e}{row['posenc_rotated']:>14.2e}"
        )
    merges = conformance.merge_positions(truth)
    print("\nadjacent positions get identical angles (positions and angles formed in the dtype) from:")
    print("  " + ", ".join(f"{name} {t:,}" for name, t in merges.items()))
    print("  posenc forms angles in float64 from integer positions (exact below 2^53)")
    return 0


def _against(truth: conformance.Truth, path: Path, tolerance: float) -> int:
    arrays = conformance.load_dump(path)
    found = conformance.compare_dump(truth, arrays, tolerance=tolerance)
    checked = [k for k in ("cos", "sin", "q_rot") if k in arrays and (k != "q_rot" or "q" in arrays)]
    n = arrays["positions"].size
    if not found:
        print(
            f"\n{path}: {', '.join(checked)} agree with the truth at all {n} positions (|error| <= {tolerance:g})"
        )
        return 0
    print(f"\n{path}: disagreements (|error| > {tolerance:g})")
    for d in found:
        print(
            f"  {d.array}: first at position {d.first_position:.17g}, max |error| {d.max_error:.3g}, "
            f"{d.positions} of {n} positions"
        )
        for first, last, size in d.runs[:10]:
            print(f"    positions {first:.17g} … {last:.17g}: max |error| {size:.3g}")
        if len(d.runs) > 10:
            print(f"    … {len(d.runs) - 10} more runs")
    return 1
