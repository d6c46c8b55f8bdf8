"""The report section of ``posenc bench`` runs: each run's encoding at initialisation and as trained.

``posenc report --out DIR --runs RUNS`` adds it (through :mod:`posenc_bench.plugin`) as the section
``#trained``; its records go into ``scorecards.json`` under ``runs``.
"""

from __future__ import annotations

import html
from pathlib import Path

from posenc import analysis, plugins, report

KEY, TITLE = "trained", "Trained encodings: initial vs trained"

TRAINED_KEYS: tuple[str, ...] = (
    "min_distance",
    "shift_residual",
    "toeplitz_error",
    "long_range_decay",
    "low_pass_fraction",
    "largest_period",
    "decoding_accuracy",
    "extrapolates",
    *analysis.FORM_KEYS,
)
"""The columns of the trained-encodings table (all criteria are in the JSON)."""

FORM_MEANINGS: dict[str, str] = {
    "diagonal_share": "‖diag H‖ / ‖H‖_F of the first layer's query–key form H (Su's premise: a dominant diagonal)",
    "form_toeplitz_error": "how far p_mᵀ H p_n is from depending on m − n only (0 = purely relative)",
    "relative_share": "‖relative‖ / (‖relative‖ + ‖absolute‖) of diag H's parts (sinusoidal-type tables)",
}


def trained_section(runs_dir: Path) -> plugins.Section:
    """The trained-encodings section and, when a run has a sinusoidal-type additive encoding, its Su figure."""
    from posenc import plots
    from posenc_bench.experiment import trained

    results, skipped = [], []
    for directory in trained.find_runs(runs_dir):
        try:
            results.append(trained.analyze_run(directory))
        except ValueError as exc:  # a run this posenc cannot rebuild: say so, keep the others
            skipped.append(f"<li>{html.escape(str(exc))}</li>")
    if not results:
        listed = f"<ul class='notes'>{''.join(skipped)}</ul>" if skipped else ""
        return plugins.Section(
            KEY,
            TITLE,
            f"<p>No analysable run directory (config.json + checkpoint.pt) under "
            f"{html.escape(str(runs_dir))}.</p>{listed}",
            records=[],
            records_key="runs",
        )
    rows = []
    for r in results:
        c = r.run.config
        cells = []
        for key in TRAINED_KEYS:
            source = (
                (r.cards["initial"].values, r.cards["trained"].values)
                if key in analysis.CRITERIA
                else (r.forms["initial"] or {}, r.forms["trained"] or {})
            )
            first, last = (report.format_value(v.get(key)) for v in source)
            cells.append(f"<td>{html.escape(first)}<br><b>{html.escape(last)}</b></td>")
        where = html.escape(str(r.run.directory.relative_to(runs_dir)))
        rows.append(
            f"<tr><th class='left run'>{html.escape(c.encoding)}-{html.escape(c.scale)}<br><small>S = {c.window}, "
            f"d = {c.d_model}; {where}</small></th>{''.join(cells)}</tr>"
        )
    meaning = {**analysis.MEANINGS, **FORM_MEANINGS}
    head = "".join(
        f"<th title='{html.escape(meaning[k])}'><code>{html.escape(k).replace('_', '_<wbr>')}</code></th>"
        for k in TRAINED_KEYS
    )
    table = (
        f"<div class='wide'><table class='scores'><thead><tr><th class='left'>run</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    text = (
        f"<p>{len(results)} runs of <code>{html.escape(str(runs_dir))}</code>, each scored at its window length "
        "with its encoding's parameters at initialisation (rebuilt under the run's seed, upper value) and as "
        "trained (the checkpoint, bold). Every criterion of every run is in <code>scorecards.json</code> "
        "(<code>runs</code>) and <code>posenc analyze NAME --checkpoint RUN_DIR</code>. The last three columns are "
        "Su's decomposition of the first layer's query–key form "
        "H = diag(γ) W<sub>Q</sub>ᵀ W<sub>K</sub> diag(γ)/√d<sub>h</sub> restricted to the encoding "
        f"({report.cite('su', 'general H')}): <code>diagonal_share</code> = ‖diag H‖/‖H‖<sub>F</sub> (Su's premise "
        "is a dominant diagonal), <code>form_toeplitz_error</code> of p<sub>m</sub>ᵀ H p<sub>n</sub> (0 = purely "
        "relative), <code>relative_share</code> of diag H's relative part against its absolute part "
        "(sinusoidal-type tables only). Rotary and bias encodings do not enter W<sub>Q</sub> W<sub>K</sub>ᵀ "
        "through the tokens: “—”.</p>"
    )
    if skipped:
        text += f"<p>Not analysed:</p><ul class='notes'>{''.join(skipped)}</ul>"
    spectra = [
        (
            f"{r.run.config.encoding}-{r.run.config.scale} seed {r.run.config.seed}",
            r.spectra["initial"][0],
            r.spectra["initial"][1],
            r.spectra["trained"][1],
        )
        for r in results
        if r.spectra["initial"] is not None
        and r.spectra["trained"] is not None
        and r.run.config.encoding != "none"
    ]
    figure = (
        report.figure_html("trained_spectra", plots.trained_spectra(spectra), {"runs": len(spectra)})
        if spectra
        else ""
    )
    for r in results:
        h, w, layout = r.diagonals["trained"], r.frequencies["trained"], r.layouts["trained"]
        if h is not None and w is not None and layout is not None:
            fig = plots.bilinear_parts(
                dim=h.size,
                length=r.run.config.window,
                trained=h,
                trained_frequencies=w,
                trained_layout=layout,
            )
            figure += report.figure_html(
                "bilinear_parts",
                fig,
                {
                    "dim": h.size,
                    "length": r.run.config.window,
                    "run": f"{r.run.config.encoding}, seed {r.run.config.seed}",
                },
            )
            break
    return plugins.Section(
        KEY, TITLE, text + table, figure, [r.to_dict() for r in results], records_key="runs"
    )
