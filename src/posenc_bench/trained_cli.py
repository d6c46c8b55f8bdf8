"""``posenc analyze ENCODING --checkpoint RUN_DIR [--json]``: the scorecard of a trained ``posenc bench`` run.

``RUN_DIR`` is a run directory of ``posenc bench`` (``config.json`` + ``checkpoint.pt``); the run's
*trained* encoding is scored at the run's window length. With ``--json`` the object holds the keys
of ``posenc analyze --json`` and also ``run`` (the directory), ``initial`` (the values at
initialisation, same keys), ``attention_form`` (``{"initial": …, "trained": …}``, each ``null`` or
the keys of :data:`posenc.analysis.FORM_KEYS`: Su's decomposition of the first layer's ``W_Q W_Kᵀ``)
and ``spectrum`` (``{"initial": …, "trained": …}``, each ``null`` or ``{"omega": [...], "power":
[...]}``: the table's power spectrum along positions, bins ``2πk/S``, summing to 1).
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from posenc import analysis
from posenc.cli.analyze import shown


def run_checkpoint(args: argparse.Namespace) -> int:
    """Print (or, with ``--json``, dump) the initial and trained scorecards of ``args.checkpoint``."""
    from posenc_bench.experiment import trained  # torch only for a checkpoint

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
            f"  {key:<{width}}  {shown(first.values[key]):>14}  {shown(card.values[key]):>14}  {note}".rstrip()
        )
    centroids = [None if sp is None else float(np.sum(sp[0] * sp[1])) for sp in result.spectra.values()]
    print(
        f"  {'spectral centroid Σ ω p(ω)':<{width}}  {shown(centroids[0]):>14}  {shown(centroids[1]):>14}  "
        "power spectrum along positions (bins 2πk/S)"
    )
    first_form, trained_form = result.forms["initial"], result.forms["trained"]
    if first_form is None or trained_form is None:
        print("  first layer's W_Q W_K^T: not applicable (the encoding is not added to the tokens)")
    else:
        print("  Su's decomposition of the first layer's W_Q W_K^T restricted to the encoding:")
        for key in analysis.FORM_KEYS:
            print(f"  {key:<{width}}  {shown(first_form[key]):>14}  {shown(trained_form[key]):>14}")
    return 0
