"""A self-contained HTML report: the papers' numbers, their figures and every encoding's scorecard.

``posenc report --out DIR`` (:mod:`posenc.cli.report`) writes ``DIR/report.html`` with the
figures embedded as base64 PNG (one file to mail or archive) plus the scorecards as JSON
(``DIR/scorecards.json``, the keys of :data:`posenc.analysis.CRITERIA`). Installed plugins
(:mod:`posenc.plugins`) add their own sections, e.g. the benchmark's trained encodings
(``--runs DIR``).
"""

from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from posenc import __version__, analysis, plugins, registry, spectrum, tables

DEFAULT_LENGTH = 80
DEFAULT_DIM = 256
"""Idé et al. (2024), Fig. 2: d = 256, S = 80."""


@dataclass(frozen=True)
class Reference:
    """A work the report cites."""

    key: str
    authors: str
    year: str
    title: str
    where: str
    url: str = ""

    label: str = ""

    @property
    def short(self) -> str:
        """``Surname (year)``, ``A, B & C (year)`` for three authors, ``First et al. (year)`` beyond (docs/references.md)."""
        if self.label:
            return f"{self.label} ({self.year})"
        names = [a.split()[-1] for a in self.authors.split(", ")]
        who = (
            names[0]
            if len(names) == 1
            else (f"{', '.join(names[:-1])} & {names[-1]}" if len(names) <= 3 else f"{names[0]} et al.")
        )
        return f"{who} ({self.year})"


REFERENCES: dict[
    str, Reference
] = {  # the works the claims cite; each encoding's own is its registry ``source``
    r.key: r
    for r in (
        Reference(
            "vaswani",
            "A. Vaswani, N. Shazeer, N. Parmar, J. Uszkoreit, L. Jones, A. N. Gomez, Ł. Kaiser, "
            "I. Polosukhin",
            "2017",
            "Attention Is All You Need",
            "NeurIPS 2017, §3.5",
            "https://arxiv.org/abs/1706.03762",
        ),
        Reference(
            "ide",
            "T. Idé, J. Labaien, P.-Y. Chen",
            "2024",
            "Improving Transformers using Faithful Positional Encoding",
            "arXiv:2405.09061",
            "https://arxiv.org/abs/2405.09061",
        ),
        Reference(
            "su",
            "J. Su",
            "2021",
            "Transformer upgrade road: 1. Tracing the origins of sinusoidal position encoding",
            "blog post, 8 March 2021 (English translation)",
            "https://kexue.fm/archives/8231",
        ),
        Reference(
            "denk",
            "T. Denk",
            "2019",
            "Linear Relationships in the Transformer's Positional Encoding",
            "blog post",
            "https://timodenk.com/blog/linear-relationships-in-the-transformers-positional-encoding/",
        ),
        Reference(
            "kazemnejad",
            "A. Kazemnejad",
            "2019",
            "Transformer Architecture: The Positional Encoding",
            "blog post, 20 September 2019",
            "https://kazemnejad.com/blog/transformer_architecture_positional_encoding/",
        ),
    )
}


def cite(key: str, where: str = "") -> str:
    """``Author (year), where`` as HTML, linked to the references section."""
    ref = REFERENCES[key]
    text = html.escape(ref.short + (f", {where}" if where else ""))
    return f'<a href="#ref-{key}">{text}</a>'


@dataclass(frozen=True)
class Claim:
    """A number stated in a paper next to the value measured here, and why they differ if they do."""

    claim: str
    source: str
    where: str
    stated: str
    measured: float
    note: str = ""


def _ripple(dim: int) -> tuple[float, float]:
    """``(max |f − δ|, peak/(d−1))`` of the DFT reconstruction of δ at ``s = 40`` with eq. 22 weights."""
    spike = analysis.reconstruct(analysis.one_hot(40, dim), analysis.dft_distribution(dim))
    return float(np.abs(spike - analysis.one_hot(40, dim)).max()), float(spike.max() / (dim - 1))


def seed_claims() -> list[Claim]:
    """Every numeric claim of the papers, measured through :mod:`posenc.analysis`."""
    w128, w256, w512 = spectrum.geometric(128), spectrum.geometric(256), spectrum.geometric(512)
    sin200 = tables.sinusoidal(200, 64)
    g256 = analysis.frequency_distribution(w256, dim=256)
    bump = analysis.peak(analysis.reconstruct(analysis.one_hot(40, 256), g256))
    ripple, peak_share = _ripple(256)
    plain = analysis.reconstruct(analysis.one_hot(40, 256), np.ones(129))
    depart = _departures()
    return [
        Claim(
            "largest period 2π·10000^((d−2)/d), d = 512",
            "vaswani",
            "“from 2π to 10000·2π”",
            "< 10000·2π = 62831.853",
            float(2 * math.pi / w512.min()),
            "the frequencies stop one grid step short of 10000^(−1)",
        ),
        Claim(
            "largest wavelength as a share of 10000·2π, d = 128",
            "kazemnejad",
            "“from 2π to 10000·2π”",
            "1",
            float(w128[0] / w128[-1] / 1e4),
            "the largest wavelength is 2π·10000^((d−2)/d): one grid step short of 10000·2π (86.6 % at d = 128)",
        ),
        Claim(
            "crossing index (d/4)·log10(d/2π), d = 256",
            "ide",
            "eq. 16",
            "≈ 103",
            analysis.crossing_index(256),
        ),
        Claim("crossing index, d = 512", "ide", "eq. 16", "≈ 245", analysis.crossing_index(512)),
        Claim(
            "share of frequencies in the lowest bin (below 2π/d), d = 256",
            "ide",
            "§3.1",
            "“almost half”",
            analysis.low_pass_count(w256, dim=256) / w256.size,
            "76 of 128 frequencies: more than half",
        ),
        Claim(
            "share of frequencies in the lowest bin, d = 512",
            "ide",
            "§3.1",
            "“almost half”",
            analysis.low_pass_count(w512, dim=512) / w512.size,
            "133 of 256",
        ),
        Claim(
            "shift residual max|T PE[t] − PE[t+k]|, d = 64, k = 7",
            "denk",
            "eq. 9",
            "0 (exact)",
            float(np.abs(sin200[:-7] @ analysis.shift_operator(7, dim=64).T - sin200[7:]).max()),
            "float64 rounding. Denk indexes the frequencies λ_m = 10000^(−2m/d) from m = 1, one grid step "
            "from Vaswani's i = 0; the operator here uses Vaswani's grid",
        ),
        Claim(
            "best linear shift of a sine-only table, d = 64, k = 7, 200 positions (relative residual)",
            "kazemnejad",
            "“Why are both sine and cosine used?”",
            "no linear map exists",
            analysis.linear_shift_residual(sin200[:, 0::2], 7),
        ),
        Claim(
            "Toeplitz deviation of the sinusoidal Gram matrix, d = 128, S = 300",
            "su",
            "",
            "0",
            analysis.toeplitz_deviation(analysis.gram(tables.sinusoidal(300, 128))),
        ),
        Claim(
            "sum vs integral: max |Σ − (d/2)∫| / (d/2), d = 512, x ≤ 1024",
            "su",
            "“long-range decay”",
            "≈ (approximation)",
            depart["512_1024"],
            f"the sum follows the integral only while neighbouring phases differ by < π, i.e. up to "
            f"x ≈ {analysis.riemann_limit(w512):.1f} at d = 512 (π / (1 − 10000^(−2/d)))",
        ),
        Claim("the same, d = 512, x ≤ 10⁴", "su", "", "≈", depart["512_10000"]),
        Claim(
            "RMS of Σ/(d/2) for 10⁴ < x ≤ 2·10⁵, d = 512",
            "su",
            "",
            "→ 0 (decay)",
            depart["512_far_rms"],
            f"the sum never decays: it keeps oscillating at this level, while the integral it stands for is at "
            f"most {100 * depart['512_far_integral']:.1f} % there and falls towards 0",
        ),
        Claim(
            "the same gap at the figure's d = 128, x ≤ 128",
            "su",
            "",
            "≈",
            depart["128_128"],
            f"phase step > π already from x ≈ {analysis.riemann_limit(w128):.1f}",
        ),
        Claim(
            "sinusoidal reconstruction of δ at s = 40: width at half maximum",
            "ide",
            "Fig. 2",
            "broad (insensitive up to ~30)",
            bump.width,
        ),
        Claim(
            "DFT reconstruction of δ at s = 40 (eq. 22 weights): max |f − δ|",
            "ide",
            "Fig. 2",
            "perfect",
            ripple,
            f"eq. 22 gives the constant and Nyquist bins half the weight of the others, which leaves a "
            f"ripple of exactly peak/(d−1) = {peak_share:.4g} on every other lattice point; with equal weights "
            f"(the plain inverse DFT) the reconstruction is exact: max |f − δ| = "
            f"{float(np.abs(plain - analysis.one_hot(40, 256)).max()):.1e}",
        ),
        Claim(
            "inverse DFT of e(s) vs the one-hot, d = 256, all s: max error",
            "ide",
            "Theorem 1",
            "exact",
            float(np.abs(tables.dft(256, 256) @ analysis.dft_basis(256).T - np.eye(256)).max()),
        ),
    ]


def _departures() -> dict[str, float]:
    """How far Su's sum departs from its integral (fractions of d/2), closed-form integral."""
    out = {}
    theta = analysis.SU_SCHEDULES["10000^-x"]
    for d, top in ((512, 1024), (512, 10_000), (128, 128)):
        total, integral = analysis.su_decay(theta, np.arange(top + 1), dim=d)
        out[f"{d}_{top}"] = float(np.abs(total - integral).max() / (d / 2))
    far_x = np.arange(10_001, 200_001, dtype=np.float64)
    far = analysis.frequency_kernel(spectrum.geometric(512), far_x) / 256
    out["512_far_rms"] = float(np.sqrt(np.mean(far**2)))
    out["512_far_integral"] = float(np.abs(analysis.su_decay(theta, far_x, dim=512)[1]).max() / 256)
    return out


_ROLES = (("``", "``"), (":func:`", "`"), (":class:`", "`"), (":data:`", "`"), (":mod:`", "`"), ("`", "`"))
_GROUP = r"\((?:[^()]|\([^()]*\))*\)"
_SUP = re.compile(rf"\^({_GROUP}|[-−+]?[\w.]+)")
# A subscript is a group, a number or one letter: ``w_i``, ``a_0``, ``δ_(t,s)``; ``p_rope`` is a name, left alone.
_SUB = re.compile(
    rf"((?<![\w])[A-Za-z]|(?<![α-ωΑ-Ω_])[α-ωΑ-Ω])_({_GROUP}|[0-9]+(?![\w])|[A-Za-zα-ω](?![\w]))"
)


def _script(group: str) -> str:
    """A super/subscript's content: an outer ``(…)`` that only groups an expression is dropped, ``(k)`` kept."""
    if group.startswith("(") and group.endswith(")") and re.search(r"[−\-+/·*, ]", group[1:-1]):
        return group[1:-1]
    return group


def maths(text: str) -> str:
    """Escaped HTML text with plain-text maths rendered: ``x^(…)``/``x^y`` as ``<sup>``, ``w_i``/``δ_(t,s)`` as ``<sub>``.

    Only a single letter takes a subscript, and only a group, a number or a single letter is one, so identifiers
    such as ``long_range`` or ``p_rope`` are left alone.
    """
    text = _SUB.sub(lambda m: f"{m[1]}<sub>{_script(m[2])}</sub>", text)
    return _SUP.sub(lambda m: f"<sup>{_script(m[1])}</sup>", text)


def rst_inline(text: str) -> str:
    """reST inline markup as HTML, everything else escaped with its maths rendered (:func:`maths`).

    A quoted identifier (````min_distance````, ``:func:`x```) becomes ``<code>``; a quoted formula
    (````θ_i = 10000^(−2i/d)````, a single symbol) becomes maths in ``<span class='math'>``.
    """
    pattern = "|".join(f"{re.escape(a)}(.+?){re.escape(b)}" for a, b in _ROLES)
    out, last = [], 0
    for match in re.finditer(pattern, text):
        out.append(maths(html.escape(text[last : match.start()])))
        code = next(g for g in match.groups() if g is not None).lstrip("~")
        if len(code) > 1 and re.fullmatch(r"[A-Za-z_][\w.]*", code):
            out.append(f"<code>{html.escape(code)}</code>")
        else:
            out.append(f"<span class='math'>{maths(html.escape(code))}</span>")
        last = match.end()
    out.append(maths(html.escape(text[last:])))
    return "".join(out)


def _caption(name: str, sizes: dict[str, object]) -> str:
    from posenc import plots

    doc = [
        part
        for part in (getattr(plots, name).__doc__ or name).strip().split("\n\n")
        if not part.strip().startswith("Args:")
    ]
    text = " ".join(line.strip() for part in doc[:2] for line in part.splitlines())
    shown = ", ".join(
        f"{k} = {', '.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in sizes.items()
    )
    title = name.replace("_", " ").capitalize()
    return f"<b>{html.escape(title)}.</b> {rst_inline(text)} <span class='sizes'>Sizes: {maths(html.escape(shown))}.</span>"


def figure_html(name: str, fig: Any | None = None, sizes: dict[str, object] | None = None) -> str:
    """``<figure>`` of ``plots.FIGURES[name]`` (or the given ``fig``), the PNG inline, captioned from its docstring."""
    from posenc import plots  # matplotlib only when a report is written

    fig = plots.FIGURES[name]() if fig is None else fig
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    width = (
        fig.get_figwidth()
    )  # printed at its natural size (fonts at their point sizes), never wider than the page
    image = f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">'
    caption = _caption(name, plots.figure_sizes(name) if sizes is None else sizes)
    return (
        f"<figure id='fig-{html.escape(name)}' style='max-width:{width:g}in'>{image}"
        f"<figcaption>{caption}</figcaption></figure>"
    )


SIGNIFICANT = 3
"""Significant digits of the values the report prints (``scorecards.json`` keeps them whole)."""


def format_value(value: Any) -> str:
    """A criterion's value as plain text: :data:`SIGNIFICANT` digits, ``—`` for ``None``."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "inf" if math.isinf(value) else f"{value:.{SIGNIFICANT}g}"
    return str(value)


def value_html(value: Any) -> str:
    """:func:`format_value` as HTML: a power of ten typeset (``1.11×10<sup>−15</sup>``), minus signs as −."""
    text = format_value(value)
    mantissa, e, exponent = text.partition("e")
    if e and mantissa.lstrip("-").replace(".", "").isdigit():
        text = f"{mantissa}×10<sup>{int(exponent)}</sup>"
    return text.replace("-", "−")


SCORECARD_COLUMNS = 8
"""Encodings per scorecard table: more are split into further tables that repeat the criteria, so that
each fits a 1400 px screen and an A4 page."""


def _scorecard_table(cards: list[analysis.Scorecard], failed: dict[str, str]) -> str:
    columns: list[analysis.Scorecard | str] = [*cards, *failed]
    return "".join(
        _scorecard_part(columns[i : i + SCORECARD_COLUMNS]) for i in range(0, len(columns), SCORECARD_COLUMNS)
    )


def _scorecard_part(columns: list[analysis.Scorecard | str]) -> str:
    """One table of the scorecard: the criteria down, ``columns`` (scorecards, or names not measured) across."""
    head = "".join(
        f"<th>{html.escape(c)}</th>"
        if isinstance(c, str)
        else f"<th>{html.escape(c.encoding)}<br><small>{c.family}</small></th>"
        for c in columns
    )
    rows = []
    for key in analysis.CRITERIA:
        cells = "".join(
            "<td>—</td>"
            if isinstance(c, str)
            else f'<td title="{html.escape(_short_reason(c.notes.get(key, "")))}">{value_html(c.values[key])}</td>'
            for c in columns
        )
        meaning = rst_inline(analysis.MEANINGS[key])
        rows.append(
            f"<tr><th class='crit'><code>{key}</code><div class='meaning'>{meaning}</div></th>{cells}</tr>"
        )
    return (
        f"<div class='wide'><table class='scores'><thead><tr><th>criterion</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


_REASONS: tuple[tuple[str, str], ...] = (
    (r"no per-position vector", "no vector per position: it acts on the scores of pairs (i, j)"),
    (r"made of sinusoids at known frequencies", "no sinusoids at known frequencies"),
    (r"DFT-coefficient rows only", "rows are not DFT coefficients"),
    (r"no weights on the DFT bins", "no weights on the DFT bins to reconstruct with"),
    (r"needs more row pairs", "too few positions: a least-squares shift needs S − k > d rows"),
    (r"no repeat within", "no row repeats the first within the positions searched"),
    (r"the table is all zeros", "the table is all zeros: no kernel to decay"),
    (r"max_len|positions must lie in|exceeds", "no rows beyond its S positions (a table of fixed length)"),
)
"""A scorecard note (the JSON keeps it whole) → the short reason the report prints, first match wins."""


def _short_reason(note: str) -> str:
    return next((short for pattern, short in _REASONS if re.search(pattern, note)), note)


def _notes_html(cards: list[analysis.Scorecard], failed: dict[str, str]) -> str:
    """One line per reason a criterion does not apply (its criteria and encodings), then how each encoding was
    measured, citing the source its registry entry gives."""
    reasons: dict[str, tuple[dict[str, None], dict[str, None]]] = {}
    for c in cards:
        for key in analysis.CRITERIA:
            if c.values[key] is None and key in c.notes and key != "view":
                keys, names = reasons.setdefault(_short_reason(c.notes[key]), ({}, {}))
                keys[key] = names[c.encoding] = None
    lines = [
        f"<li>{rst_inline(why)}: {', '.join(f'<code>{k}</code>' for k in keys)} "
        f"<span class='who'>({html.escape(', '.join(names))})</span></li>"
        for why, (keys, names) in reasons.items()
    ]
    views = "".join(
        f"<li><b>{html.escape(c.encoding)}</b>{_source(c.encoding)}: {rst_inline(c.notes.get('view', ''))}</li>"
        for c in cards
    )
    lines += [
        f"<li><b>{html.escape(n)}</b>: not measured — {rst_inline(why)}</li>" for n, why in failed.items()
    ]
    return (
        f"<h3>Why a cell is “—”</h3><ul class='notes'>{''.join(lines)}</ul>"
        f"<h3>What was measured</h3><ul class='notes'>{views}</ul>"
    )


def _source(name: str) -> str:
    """`` (source)``: the paper the registry names for encoding ``name`` (nothing for ``none``)."""
    source = registry.get(name).source.strip()
    return f" <span class='source'>({html.escape(source)})</span>" if source not in ("", "—") else ""


def _claims_html(claims: Sequence[Claim]) -> str:
    rows = "".join(
        f"<tr><td class='left'>{rst_inline(c.claim)}</td><td class='left'>{cite(c.source, c.where)}</td>"
        f"<td class='left'>{rst_inline(c.stated)}</td><td class='num'>{value_html(c.measured)}</td>"
        f"<td class='left why'>{rst_inline(c.note)}</td></tr>"
        for c in claims
    )
    return (
        "<div class='wide'><table><thead><tr><th class='left'>claim</th><th class='left'>source</th><th>stated</th>"
        f"<th>measured</th><th class='left'>why they differ / how to read it</th></tr></thead><tbody>{rows}</tbody>"
        "</table></div>"
    )


_STYLE = """
:root{--fg:#1d1d1f;--muted:#555;--bg:#fff;--line:#c8c8c8;--head:#f1f1f3;--accent:#1f5fa8;--card:#fff}
@media (prefers-color-scheme: dark){:root{--fg:#e6e6e6;--muted:#a8a8a8;--bg:#17181a;--line:#3a3b3e;
--head:#222326;--accent:#8ab4f8;--card:#f4f4f4}}
html{background:var(--bg);color:var(--fg)}
body{font:16px/1.55 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;max-width:72rem;
margin:0 auto;padding:1.5rem 2rem 4rem}
h1{font-size:1.9rem;line-height:1.2;margin:.5rem 0 1rem}h2{font-size:1.4rem;margin-top:2.5rem;
border-bottom:1px solid var(--line);padding-bottom:.25rem}h3{font-size:1.1rem;margin-top:1.5rem}
a{color:var(--accent)}p,li{max-width:48rem}code{font:.9em ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
nav.toc{border:1px solid var(--line);border-radius:6px;padding:.5rem 1.25rem;display:inline-block;background:var(--head)}
nav.toc ol{margin:.25rem 0;padding-left:1.25rem}
.wide{overflow-x:auto}table{border-collapse:collapse;font-size:.85rem;margin:.75rem 0}
td,th{border:1px solid var(--line);padding:.3rem .5rem;text-align:right;vertical-align:top}
td{white-space:nowrap}td.left,td.why{white-space:normal}th.left{text-align:left}
th{background:var(--head);font-weight:600}td.left,th.crit{text-align:left}td.why{color:var(--muted);min-width:18rem}
th.crit{min-width:14rem;font-weight:500}.meaning{font-weight:400;color:var(--muted);font-size:.8rem;max-width:22rem}
td.trained{font-weight:600}th.run{min-width:9rem;max-width:13rem;font-weight:500;overflow-wrap:anywhere}ul.notes li{margin:.2rem 0;font-size:.92rem}
figure{margin:1.5rem 0;max-width:60rem}figure img{width:100%;height:auto;background:var(--card);border-radius:4px;
border:1px solid var(--line)}figcaption{font-size:.9rem;color:var(--muted);margin-top:.4rem}
.sizes{font-style:italic}ol.refs li{margin:.3rem 0;overflow-wrap:anywhere}
span.math{font-family:"STIX Two Math","Cambria Math","Latin Modern Math",serif}sub,sup{line-height:0}
table.scores{font-size:.8rem}table.scores th.crit{min-width:11rem}table.scores .meaning{max-width:15rem}
td.num{white-space:nowrap}.who{color:var(--muted)}.source{color:var(--muted)}
@page{size:A4;margin:12mm}
@media print{html{background:#fff;color:#000}body{max-width:none;padding:0;font-size:9.5pt;line-height:1.4}
nav.toc{display:none}h1{font-size:16pt;margin:0 0 .4rem}h2{font-size:13pt;margin-top:1.2rem}h3{font-size:10.5pt;margin-top:.9rem}
.wide{overflow:visible}table{font-size:7pt;margin:.4rem 0}.wide table,table.scores{font-size:7pt;width:100%}
td,th{padding:.1rem .2rem}td{white-space:nowrap}td.left,td.why{white-space:normal;overflow-wrap:break-word;min-width:0}
th.crit,table.scores th.crit{min-width:0;width:20%}
.meaning,table.scores .meaning{max-width:none;font-size:6.5pt}p,li{max-width:none}ul.notes li{font-size:8.5pt;margin:.1rem 0}
thead{display:table-header-group}tr{break-inside:avoid}h2,h3{break-after:avoid}
figure{break-inside:avoid;margin:.6rem auto}figure img{max-width:100%;border:none}figcaption{font-size:8pt}
}
"""


def write_report(
    out_dir: Path | str,
    *,
    length: int = DEFAULT_LENGTH,
    dim: int = DEFAULT_DIM,
    base: float = tables.DEFAULT_BASE,
    n_heads: int = 8,
    seed: int = 0,
    sections: Sequence[plugins.Section] = (),
) -> Path:
    """Write ``out_dir/report.html`` (self-contained) and ``out_dir/scorecards.json``; return the HTML path.

    Args:
        out_dir: folder, created if needed.
        length, dim: ``(S, d)`` of the scorecards (each figure prints its own sizes).
        base, n_heads, seed: as in :func:`posenc.analysis.scorecard`.
        sections: further sections (a plugin's, :mod:`posenc.plugins`), placed before the figures; their
            figures join the figure section and their records ``scorecards.json`` under their keys.
    """
    from posenc import plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    claims = seed_claims()
    cards, failed = [], {}
    for name in registry.names():
        try:
            cards.append(
                analysis.scorecard(name, length=length, dim=dim, base=base, n_heads=n_heads, seed=seed)
            )
        except ImportError as exc:  # a PyTorch module of the registry that is not installed / not written
            failed[name] = f"{type(exc).__name__}: {exc}"
    params = {
        "length S": length,
        "dim d": dim,
        "base ρ": base,
        "n_heads": n_heads,
        "seed": seed,
        "posenc": __version__,
        "numpy": np.__version__,
    }
    parts: list[tuple[str, str, str]] = [
        (
            "claims",
            "The papers' numbers, measured",
            "<p>Each number a source states, next to the value measured here; the last column says why they "
            "differ where they do (values to three significant digits; <code>scorecards.json</code> holds them "
            "whole).</p>" + _claims_html(claims),
        ),
        (
            "scorecards",
            f"Scorecards at S = {length}, d = {dim}",
            "<p>Every registered encoding measured by the same criteria; each criterion's definition is under its "
            "name, and hovering a cell shows how it was measured.</p>"
            + "<p class='params'>Measured with "
            + ", ".join(f"{html.escape(k)} = {html.escape(str(v))}" for k, v in params.items())
            + ".</p>"
            + _scorecard_table(cards, failed)
            + _notes_html(cards, failed),
        ),
    ]
    parts.extend((s.key, s.title, s.html) for s in sections)
    figures = "".join(figure_html(name) for name in plots.FIGURES) + "".join(s.figures for s in sections)
    parts.append(
        (
            "figures",
            "Figures",
            f"<p>Grey-scale figures after {cite('kazemnejad')}, {cite('ide')}, {cite('su')} and "
            f"{cite('denk')}; each caption gives the sizes it was drawn at.</p>" + figures,
        )
    )
    cited = [r for r in REFERENCES.values() if any(f'href="#ref-{r.key}"' in c for _, _, c in parts)]
    refs = "".join(
        f"<li id='ref-{r.key}'>{html.escape(r.authors)} ({r.year}). <i>{html.escape(r.title)}</i>. "
        f"{html.escape(r.where)}."
        + (f" <a href='{html.escape(r.url)}'>{html.escape(r.url)}</a>" if r.url else "")
        + "</li>"
        for r in cited
    )
    parts.append(("references", "References", f"<ol class='refs'>{refs}</ol>"))
    toc = "".join(f"<li><a href='#{key}'>{html.escape(title)}</a></li>" for key, title, _ in parts)
    body = "".join(
        [
            "<h1>posenc report: positional encodings measured</h1>",
            (
                "<p>What the sources claim about positional encodings, measured; how every registered encoding scores on "
                "the same criteria; and the figures the claims rest on.</p>"
            ),
            f"<nav class='toc'><b>Contents</b><ol>{toc}</ol></nav>",
            *(
                f"<section id='{key}'><h2>{html.escape(title)}</h2>{content}</section>"
                for key, title, content in parts
            ),
        ]
    )
    head = (
        "<meta charset='utf-8'><meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta name='color-scheme' content='light dark'><title>posenc report</title><style>{_STYLE}</style>"
    )
    page = f"<!DOCTYPE html><html lang='en'><head>{head}</head><body>{body}</body></html>"
    path = out / "report.html"
    path.write_text(page, encoding="utf-8")
    (out / "scorecards.json").write_text(
        json.dumps(
            {
                "parameters": params,
                "claims": [dataclasses.asdict(c) for c in claims],
                "scorecards": [c.to_dict() for c in cards],
                "not_measured": failed,
                **{s.records_key or s.key: s.records for s in sections if s.records is not None},
            },
            indent=2,
            allow_nan=False,
        ),
        encoding="utf-8",
    )
    return path
