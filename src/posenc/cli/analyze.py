"""``posenc analyze ENCODING --dim D --length S [--json]``: the scorecard of one registered encoding.

Prints one line per criterion (value and how it was measured / why it does not apply); with
``--json`` prints one JSON object with these stable keys:

* ``encoding`` (str), ``family`` (``"none"|"input"|"rotary"|"bias"``);
* ``parameters``: ``length``, ``dim``, ``base``, ``n_heads``, ``shift_k``, ``decode_noise``,
  ``seed``, ``reconstruct_position``, ``bandwidth``, ``repeat_horizon``;
* ``values``: one entry per key of :data:`posenc.analysis.CRITERIA` — ``unique``,
  ``min_distance``, ``shift_residual``, ``toeplitz_error``, ``value_min``, ``value_max``,
  ``value_mean``, ``long_range_decay``, ``low_pass_fraction``, ``reconstruction_width``,
  ``decoding_accuracy``, ``decoding_accuracy_inverse_dft``, ``largest_period``,
  ``first_repeat``, ``extrapolates``, ``extrapolation_min_distance`` — a number, a boolean,
  or ``null`` when it does not apply;
* ``notes``: ``{key: text}`` — why a value is ``null`` or how it was measured; ``notes.view``
  says what was measured (e.g. "at initialisation").

Plugins add options (:mod:`posenc.plugins`): the benchmark's ``--checkpoint RUN_DIR`` scores a
trained run's encoding instead.

Meanings: docs/analysis.md and :mod:`posenc.analysis.scorecard`. An unknown ENCODING is an
error listing the registered names (exit status 2).
"""

from __future__ import annotations

import argparse
import json

from posenc import analysis, plugins, registry, tables, validate
from posenc.report import DEFAULT_DIM, DEFAULT_LENGTH


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="measure the papers' criteria for one registered encoding")
    encoding = p.add_argument("encoding", metavar="ENCODING")
    p.add_argument(
        "--dim", "-d", type=int, default=DEFAULT_DIM, help=f"encoding dimension d (default {DEFAULT_DIM})"
    )
    p.add_argument(
        "--length",
        "-S",
        type=int,
        default=DEFAULT_LENGTH,
        help=f"number of positions S (default {DEFAULT_LENGTH})",
    )
    p.add_argument(
        "--base", type=float, default=tables.DEFAULT_BASE, help="ρ of sinusoidal frequencies (default 10000)"
    )
    p.add_argument("--n-heads", type=int, default=8, help="heads of bias encodings (default 8)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of learned initial parameters and decoding noise"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (its keys: docs/analysis.md)")
    plugins.add_arguments("analyze", p)
    encoding.help = f"a registered encoding: {', '.join(registry.names())}"  # plugins may have added some
    p.set_defaults(func=run)


def check_scorecard_memory(length: int, dim: int) -> None:
    """Refuse (before any work) a scorecard whose ``[S, S]`` Gram and distance matrices cannot fit in memory."""
    validate.positive_int("--length", length)
    validate.positive_int("--dim", dim)
    # a few [S, S] float64 matrices (Gram, distances, their Toeplitz fit) and [S, d] tables at once
    validate.fits_in_memory(
        f"a scorecard at --length {length} (its {length} × {length} Gram matrix)",
        4 * 8 * length**2 + 4 * 8 * length * dim,
        advice="lower --length",
    )


def shown(value: object) -> str:
    """A criterion's value as the terminal shows it (6 significant digits, ``—`` for ``None``)."""
    return "—" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))


def run(args: argparse.Namespace) -> int:
    handled = plugins.handle("analyze", args)  # e.g. the benchmark's --checkpoint RUN_DIR
    if handled is not None:
        return handled
    check_scorecard_memory(args.length, args.dim)
    card = analysis.scorecard(
        args.encoding, length=args.length, dim=args.dim, base=args.base, n_heads=args.n_heads, seed=args.seed
    )
    if args.json:
        print(json.dumps(card.to_dict(), indent=2, allow_nan=False))
        return 0
    print(
        f"{card.encoding} ({card.family}) at S = {args.length}, d = {args.dim}: {card.notes.get('view', '')}"
    )
    width = max(map(len, analysis.CRITERIA))
    for key in analysis.CRITERIA:
        note = card.notes.get(key, "")
        print(f"  {key:<{width}}  {shown(card.values[key]):>14}  {note}".rstrip())
    return 0
