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

With ``--checkpoint RUN_DIR`` (a run directory of ``posenc bench``: ``config.json`` +
``checkpoint.pt``) it scores the run's *trained* encoding at the run's window length instead;
the JSON then also holds ``run`` (the directory), ``initial`` (the values at initialisation,
same keys), ``attention_form`` (``{"initial": …, "trained": …}``, each ``null`` or the keys
of :data:`posenc.analysis.FORM_KEYS`: Su's decomposition of the first layer's ``W_Q W_Kᵀ``)
and ``spectrum`` (``{"initial": …, "trained": …}``, each ``null`` or ``{"omega": [...],
"power": [...]}``: the table's power spectrum along positions, bins ``2πk/S``, summing to 1).

Meanings: docs/analysis.md and :mod:`posenc.analysis.scorecard`. An unknown ENCODING is an
error listing the registered names (exit status 2).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from posenc import _validate, analysis, tables
from posenc.report import DEFAULT_DIM, DEFAULT_LENGTH


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="measure the papers' criteria for one registered encoding")
    p.add_argument(
        "encoding", metavar="ENCODING", help="a registered encoding name (see `posenc analyze --help`)"
    )
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
    p.add_argument(
        "--checkpoint",
        type=Path,
        metavar="RUN_DIR",
        help="score the trained encoding of this `posenc bench` run directory (config.json + checkpoint.pt)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (stable keys; see module docs)")
    p.set_defaults(func=run)


def check_scorecard_memory(length: int, dim: int) -> None:
    """Refuse (before any work) a scorecard whose ``[S, S]`` Gram and distance matrices cannot fit in memory."""
    _validate.positive_int("--length", length)
    _validate.positive_int("--dim", dim)
    # a few [S, S] float64 matrices (Gram, distances, their Toeplitz fit) and [S, d] tables at once
    _validate.fits_in_memory(
        f"a scorecard at --length {length} (its {length} × {length} Gram matrix)",
        4 * 8 * length**2 + 4 * 8 * length * dim,
        advice="lower --length",
    )


def _shown(value: object) -> str:
    return "—" if value is None else (f"{value:.6g}" if isinstance(value, float) else str(value))


def run(args: argparse.Namespace) -> int:
    if args.checkpoint is not None:
        return _run_checkpoint(args)
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
        print(f"  {key:<{width}}  {_shown(card.values[key]):>14}  {note}".rstrip())
    return 0


def _run_checkpoint(args: argparse.Namespace) -> int:
    from posenc.experiment import trained  # torch only for a checkpoint

    result = trained.analyze_run(args.checkpoint)
    if result.run.config.encoding != args.encoding:
        raise ValueError(
            f"--checkpoint {args.checkpoint} is a run of encoding {result.run.config.encoding!r}, "
            f"not {args.encoding!r}"
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return 0
    card, first = result.cards["trained"], result.cards["initial"]
    print(
        f"{card.encoding} ({card.family}) trained in {result.run.directory}, S = {result.run.config.window}"
    )
    width = max(map(len, (*analysis.CRITERIA, *analysis.FORM_KEYS)))
    print(f"  {'criterion':<{width}}  {'initial':>14}  {'trained':>14}")
    for key in analysis.CRITERIA:
        note = card.notes.get(key, "") if card.values[key] is not None else ""
        print(
            f"  {key:<{width}}  {_shown(first.values[key]):>14}  {_shown(card.values[key]):>14}  {note}".rstrip()
        )
    centroids = [None if sp is None else float(np.sum(sp[0] * sp[1])) for sp in result.spectra.values()]
    print(
        f"  {'spectral centroid Σ ω p(ω)':<{width}}  {_shown(centroids[0]):>14}  {_shown(centroids[1]):>14}  "
        "power spectrum along positions (bins 2πk/S)"
    )
    first_form, trained_form = result.forms["initial"], result.forms["trained"]
    if first_form is None or trained_form is None:
        print("  first layer's W_Q W_K^T: not applicable (the encoding is not added to the tokens)")
    else:
        print("  Su's decomposition of the first layer's W_Q W_K^T restricted to the encoding:")
        for key in analysis.FORM_KEYS:
            print(f"  {key:<{width}}  {_shown(first_form[key]):>14}  {_shown(trained_form[key]):>14}")
    return 0
