"""A self-contained HTML report: the seeds' numbers, their figures and every encoding's scorecard.

``posenc report --out DIR`` (:mod:`posenc.cli.report`) writes ``DIR/report.html`` with the
figures embedded as base64 PNG (one file to mail or archive) plus the scorecards as JSON
(``DIR/scorecards.json``, the keys of :data:`posenc.analysis.CRITERIA`). Defaults finish in
a few seconds on two CPU cores.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from posenc import __version__, analysis, registry, spectrum, tables

DEFAULT_LENGTH = 80
DEFAULT_DIM = 256
"""The paper's Fig. 2 setting (seed ide-*): d = 256, S = 80."""


@dataclass(frozen=True)
class Claim:
    """A number stated by a seed next to the value measured here."""

    claim: str
    source: str
    stated: str
    measured: float


def seed_claims() -> list[Claim]:
    """Every numeric claim of the seeds (SPEC §1–§5), measured through :mod:`posenc.analysis`."""
    w256, w512 = spectrum.geometric(256), spectrum.geometric(512)
    sin200 = tables.sinusoidal(200, 64)
    g256 = analysis.frequency_distribution(w256, dim=256)
    bump = analysis.peak(analysis.reconstruct(analysis.one_hot(40, 256), g256))
    spike = analysis.reconstruct(analysis.one_hot(40, 256), analysis.dft_distribution(256))
    return [
        Claim("largest period, d = 512", "notes-*", "≈ 60611.477", float(2 * math.pi / w512.min())),
        Claim("crossing index (d/4)·log10(d/2π), d = 256", "ide-* eq. 16", "≈ 103", analysis.crossing_index(256)),
        Claim("crossing index, d = 512", "ide-* eq. 16", "≈ 245", analysis.crossing_index(512)),
        Claim("frequencies below 2π/d, d = 256", "SPEC §5", "76 of 128", analysis.low_pass_count(w256, dim=256)),
        Claim("frequencies below 2π/d, d = 512", "SPEC §5", "133 of 256", analysis.low_pass_count(w512, dim=512)),
        Claim("shift residual max|T PE[t] − PE[t+k]|, d = 64, k = 7", "SPEC §2", "~1e-14",
              float(np.abs(sin200[:-7] @ analysis.shift_operator(7, dim=64).T - sin200[7:]).max())),
        Claim("best linear shift of a sine-only table, d = 64, k = 7, 200 positions", "SPEC §2", "≈ 0.44",
              analysis.linear_shift_residual(sin200[:, 0::2], 7)),
        Claim("Toeplitz deviation of the sinusoidal Gram matrix, d = 128, S = 300", "su-*", "0",
              analysis.toeplitz_deviation(analysis.gram(tables.sinusoidal(300, 128)))),
        Claim("sinusoidal reconstruction of δ at s = 40: width at half maximum", "ide-* Fig. 2",
              "broad (insensitive up to ~30)", bump.width),
        Claim("DFT reconstruction of δ at s = 40 (eq. 22 weights): max |f − δ|", "ide-* Fig. 2", "perfect",
              float(np.abs(spike - analysis.one_hot(40, 256)).max())),
        Claim("inverse DFT of e(s) vs the one-hot, d = 256, all s: max error", "ide-* Theorem 1", "exact",
              float(np.abs(tables.dft(256, 256) @ analysis.dft_basis(256).T - np.eye(256)).max())),
    ]


def _figure_html(name: str) -> str:
    from posenc import plots  # matplotlib only when a report is written

    fig = plots.FIGURES[name]()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    caption = html.escape((plots.FIGURES[name].__doc__ or name).strip().splitlines()[0])
    image = f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
    return f"<figure>{image}<figcaption>{caption}</figcaption></figure>"


def _format(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.4g}"
    return str(value)


def _scorecard_table(cards: list[analysis.Scorecard], failed: dict[str, str]) -> str:
    head = "".join(f"<th>{html.escape(c.encoding)}<br><small>{c.family}</small></th>" for c in cards)
    head += "".join(f"<th>{html.escape(n)}</th>" for n in failed)
    rows = []
    for key in analysis.CRITERIA:
        cells = "".join(
            f'<td title="{html.escape(c.notes.get(key, ""))}">{html.escape(_format(c.values[key]))}</td>' for c in cards
        )
        cells += "".join("<td>—</td>" for _ in failed)
        rows.append(f"<tr><th>{key}</th>{cells}</tr>")
    return f"<table><tr><th>criterion</th>{head}</tr>{''.join(rows)}</table>"


def _notes_html(cards: list[analysis.Scorecard], failed: dict[str, str]) -> str:
    items = []
    for c in cards:
        notes = "".join(f"<li><code>{html.escape(k)}</code>: {html.escape(v)}</li>" for k, v in c.notes.items())
        items.append(f"<li><b>{html.escape(c.encoding)}</b><ul>{notes}</ul></li>")
    items += [f"<li><b>{html.escape(n)}</b>: not measured — {html.escape(why)}</li>" for n, why in failed.items()]
    return f"<ul>{''.join(items)}</ul>"


_STYLE = """body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}table{border-collapse:collapse;
font-size:90%}td,th{border:1px solid #999;padding:3px 6px;text-align:right}th{background:#eee}
figure{display:inline-block;margin:1em 0}img{max-width:100%}figcaption{font-size:90%;color:#333}"""


def write_report(
    out_dir: Path | str, *, length: int = DEFAULT_LENGTH, dim: int = DEFAULT_DIM, base: float = tables.DEFAULT_BASE,
    n_heads: int = 8, seed: int = 0,
) -> Path:
    """Write ``out_dir/report.html`` (self-contained) and ``out_dir/scorecards.json``; return the HTML path.

    Args:
        out_dir: folder, created if needed.
        length, dim: ``(S, d)`` of the scorecards (figures use the seeds' own parameters).
        base, n_heads, seed: as in :func:`posenc.analysis.scorecard`.
    """
    from posenc import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cards, failed = [], {}
    for name in registry.names():
        try:
            cards.append(analysis.scorecard(name, length=length, dim=dim, base=base, n_heads=n_heads, seed=seed))
        except ImportError as exc:  # a PyTorch module of the registry that is not installed / not written
            failed[name] = f"{type(exc).__name__}: {exc}"
    claims = "".join(
        f"<tr><td style='text-align:left'>{html.escape(c.claim)}</td><td>{html.escape(c.source)}</td>"
        f"<td>{html.escape(c.stated)}</td><td>{c.measured:.10g}</td></tr>" for c in seed_claims()
    )
    params = {"length S": length, "dim d": dim, "base ρ": base, "n_heads": n_heads, "seed": seed,
              "posenc": __version__, "numpy": np.__version__}
    body = "".join([
        "<h1>posenc report: positional encodings measured</h1>",
        "<h2>Parameters</h2><table>",
        "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in params.items()),
        "</table>",
        "<h2>The seeds' numbers, measured</h2><table><tr><th>claim</th><th>seed</th><th>stated</th>"
        f"<th>measured</th></tr>{claims}</table>",
        f"<h2>Scorecards at S = {length}, d = {dim}</h2>",
        "<p>Hover a cell for how it was measured; “—” = does not apply (reason in the notes below).</p>",
        _scorecard_table(cards, failed),
        "<h3>Notes</h3>", _notes_html(cards, failed),
        "<h2>Figures</h2>", "".join(_figure_html(name) for name in plots.FIGURES),
    ])
    head = f"<meta charset='utf-8'><title>posenc report</title><style>{_STYLE}</style>"
    page = f"<!DOCTYPE html><html><head>{head}</head><body>{body}</body></html>"
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    (out / "scorecards.json").write_text(
        json.dumps({"parameters": params, "scorecards": [c.to_dict() for c in cards], "not_measured": failed},
                   indent=2, allow_nan=False), encoding="utf-8")
    return path
