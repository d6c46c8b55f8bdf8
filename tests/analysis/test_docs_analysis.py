"""Every number docs/analysis.md quotes, recomputed, and the doc's text checked against it.

Tolerances: a value is quoted to some digits and must print as those digits when recomputed
(``Quote(text, value)``: ``text.format(value)`` must occur in the doc); a round-off residual (about 1e-16,
and different with each platform's BLAS and libm) is quoted as a bound ``< B`` that must hold
(``Quote(text, value, below=B)``), B at least ten times the value measured here. The scorecard table is
regenerated cell by cell (three significant digits, residuals below 1e-12 as such bounds). The trained-run
numbers at the end of the doc come from a training run and are marked as such there.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from posenc import analysis, report, spectrum, tables

DOC = Path(__file__).resolve().parents[2] / "docs" / "analysis.md"
SCORED = ["none", "sinusoidal", "dft", "learned", "learnable_frequency", "rope", "alibi", "t5", "shaw"]


@cache
def text() -> str:
    return re.sub(r"\s+", " ", DOC.read_text(encoding="utf-8"))


@cache
def claims() -> dict[str, float]:
    return {c.claim: c.measured for c in report.seed_claims()}


def claim(prefix: str) -> float:
    (value,) = [v for k, v in claims().items() if k.startswith(prefix)]
    return value


@cache
def card(name: str, length: int = 80, dim: int = 256) -> dict[str, object]:
    return analysis.scorecard(name, length=length, dim=dim).values


def su_gap(theta: str, x: np.ndarray, dim: int) -> np.ndarray:
    total, integral = analysis.su_decay(analysis.SU_SCHEDULES[theta], x, dim=dim)
    return (total - integral) / (dim / 2)


FAR = np.arange(10_001, 200_001, dtype=np.float64)


def far_sum() -> np.ndarray:
    return analysis.frequency_kernel(spectrum.geometric(512), FAR) / 256


def far_integral() -> np.ndarray:
    return analysis.su_decay(analysis.SU_SCHEDULES["10000^-x"], FAR, dim=512)[1] / 256


def rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(a**2)))


def bump(s: int, *, length: int | None = None) -> np.ndarray:
    g = analysis.frequency_distribution(spectrum.geometric(256), dim=256)
    f = analysis.reconstruct(analysis.one_hot(s, 256), g)
    return f if length is None else f[:length]


def dft_spike() -> np.ndarray:
    return analysis.reconstruct(analysis.one_hot(40, 256), analysis.dft_distribution(256))


def shift_figure_residual() -> float:
    table = tables.sinusoidal(65, 16)
    return analysis.operator_residual(table, analysis.shift_operator(5, dim=16), 5)


@dataclass(frozen=True)
class Quote:
    text: str
    value: object  # a callable giving the measured value (or values, for several placeholders)
    below: float | None = None


QUOTES = [
    Quote("88.9 at d = 512", lambda: analysis.riemann_limit(spectrum.geometric(512))),
    Quote("{:.1f} at d = 128", lambda: analysis.riemann_limit(spectrum.geometric(128))),
    Quote("π d/(2 ln ρ) gives {:.1f} at d = 512", lambda: math.pi * 512 / (2 * math.log(1e4))),
    Quote("| ≈ 60611.477 | {:.3f} |", lambda: claim("largest period")),
    Quote("| ≈ 103 | {:.3f} |", lambda: analysis.crossing_index(256)),
    Quote("| ≈ 245 | {:.3f} |", lambda: analysis.crossing_index(512)),
    Quote("76 of 128 ({:.0f} %)", lambda: 100 * claim("share of frequencies in the lowest bin (below")),
    Quote("{} of 128", lambda: analysis.low_pass_count(spectrum.geometric(256), dim=256)),
    Quote("133 of 256 ({:.0f} %)", lambda: 100 * claim("share of frequencies in the lowest bin, d = 512")),
    Quote("{} of 256 (", lambda: analysis.low_pass_count(spectrum.geometric(512), dim=512)),
    Quote("{:.1f} % of 10000·2π at d = 128", lambda: 100 * claim("largest wavelength as a share")),
    Quote("| exact | < 1e-14 (float64 rounding) |", lambda: claim("shift residual max"), below=1e-14),
    Quote("relative residual {:.3f} |", lambda: claim("best linear shift")),
    Quote("< 1e-13 (d = 256, k = 1)", lambda: card("dft")["shift_residual"], below=1e-13),
    Quote("S = 300 | Su (2021) | 0 | < 1e-13 |", lambda: claim("Toeplitz deviation"), below=1e-13),
    Quote(
        "max difference < 0.8 % of d/2 for all five θ",
        lambda: max(np.abs(su_gap(t, np.arange(129.0), 512)).max() for t in analysis.SU_SCHEDULES),
        below=0.008,
    ),
    Quote("five θ", lambda: len(analysis.SU_SCHEDULES) and "five"),
    Quote("{:.2f} % / ", lambda: 100 * np.abs(su_gap("10000^-x", np.arange(1025.0), 512)).max()),
    Quote(" / {:.2f} % of d/2", lambda: 100 * np.abs(su_gap("10000^-x", np.arange(10_001.0), 512)).max()),
    Quote("RMS {:.2f} %, extremes", lambda: 100 * rms(far_sum())),
    Quote("extremes −{:.1f} % / ", lambda: -100 * far_sum().min()),
    Quote(" / +{:.1f} % (the integral", lambda: 100 * far_sum().max()),
    Quote("at most {:.1f} % there", lambda: 100 * np.abs(far_integral()).max()),
    Quote("the gap to it has RMS {:.2f} %", lambda: 100 * rms(far_sum() - far_integral())),
    Quote(
        "| {:.2f} % (phase step > π from x = ",
        lambda: 100 * np.abs(su_gap("10000^-x", np.arange(129.0), 128)).max(),
    ),
    Quote("(phase step > π from x = {:.1f})", lambda: analysis.riemann_limit(spectrum.geometric(128))),
    Quote(
        "peaks at {}, {}, {}; width at half max",
        lambda: tuple(analysis.peak(bump(s, length=80)).position for s in (5, 40, 75)),
    ),
    Quote("width at half max {:.1f} (", lambda: analysis.peak(bump(40)).width),
    Quote("({:.2f} at s = 5, cut by the lattice edge)", lambda: analysis.peak(bump(5)).width),
    Quote("above 10 % of the peak over {} points", lambda: int((bump(40) > 0.1 * bump(40).max()).sum())),
    Quote("a spike of width {:g};", lambda: analysis.peak(dft_spike()).width),
    Quote(
        "max \\|f − δ\\| = {:.2g} = peak/(d − 1) exactly",
        lambda: (
            claim("DFT reconstruction")
            if math.isclose(claim("DFT reconstruction"), dft_spike().max() / 255, rel_tol=1e-9)
            else None
        ),
    ),
    Quote("Theorem 1 | exact | < 1e-13 |", lambda: claim("inverse DFT"), below=1e-13),
    Quote("exactly peak/(d − 1) ({:.6f} for d = 256", lambda: dft_spike().max() / 255),
    Quote("above {:.2f} (104…254: 76 values)", lambda: analysis.crossing_index(256)),
    Quote(
        "(104…254: {} values)",
        lambda: sum(1 for l in range(0, 256, 2) if 1e4 ** (-l / 256) < 2 * math.pi / 256),
    ),
    Quote("above {:.2f} (246…510: 133 values)", lambda: analysis.crossing_index(512)),
    Quote(
        "(246…510: {} values)",
        lambda: sum(1 for l in range(0, 512, 2) if 1e4 ** (-l / 512) < 2 * math.pi / 512),
    ),
    Quote("(mean {:.3f}: the cosines", lambda: card("sinusoidal")["value_mean"]),
    Quote(
        "and {:.0f} % of its frequencies sit in the lowest DFT bin",
        lambda: 100 * card("sinusoidal")["low_pass_fraction"],
    ),
    Quote("(`long_range_decay` {:.3f})", lambda: card("sinusoidal")["long_range_decay"]),
    Quote(
        "min distance √2",
        lambda: "min distance √2" if math.isclose(card("dft")["min_distance"], math.sqrt(2)) else None,
    ),
    Quote(
        "repeat exactly at `d`",
        lambda: "repeat exactly at `d`" if card("dft")["first_repeat"] == 256 else None,
    ),
    Quote("least-squares residual {:.3f})", lambda: card("learned", 100, 16)["shift_residual"]),
    Quote("broad bumps of height {:.3f}", lambda: bump(40).max()),
    Quote("centred at {}, {}, {}, 33", lambda: tuple(int(np.argmax(bump(s))) for s in (5, 40, 75))),
    Quote("{} points above 10 % of their height", lambda: int((bump(40) > 0.1 * bump(40).max()).sum())),
    Quote(
        "`1000^(−u)` dips below 0 from x = {:.0f};",
        lambda: float(
            np.argmax(analysis.decay_integral(analysis.SU_SCHEDULES["1000^-x"], np.arange(1025.0), dim=1) < 0)
        ),
    ),
    Quote(
        "(up to {:.0f} % of d/2 for 900 ≤ x ≤ 1024)",
        lambda: (
            100
            * np.abs(analysis.frequency_kernel(spectrum.geometric(128), np.arange(900.0, 1025.0)) / 64).max()
        ),
    ),
    Quote(
        "below 1e-3 of their largest beyond ω = {:.2f};",
        lambda: float(
            spectrum.dft(256)[
                (g := analysis.frequency_distribution(spectrum.geometric(256), dim=256)) > 1e-3 * g.max()
            ].max()
        ),
    ),
    Quote("relative residual < 1e-14 (float64 rounding) |", shift_figure_residual, below=1e-14),
]


@pytest.mark.parametrize("quote", QUOTES, ids=[q.text for q in QUOTES])
def test_each_quoted_number_is_what_the_code_measures(quote):
    value = quote.value()
    assert value is not None, f"the statement {quote.text!r} does not hold"
    if quote.below is not None:
        assert 0 <= value < quote.below, (quote.text, value)
        expected = quote.text
    else:
        expected = quote.text.format(*value) if isinstance(value, tuple) else quote.text.format(value)
    assert expected in text(), f"docs/analysis.md should say {expected!r} (measured {value!r})"


def test_the_figure_count():
    plots = pytest.importorskip("posenc.plots")
    assert len(plots.FIGURES) == 7 and "the seven figures" in text()


def _cell(value: object) -> str:
    """How the doc's scorecard table prints a value (three significant digits; residuals as bounds)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value != 0 and abs(value) < 1e-12:
        return f"< 1e-{-(math.floor(math.log10(abs(value))) + 2)}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _bound_holds(quoted: str, value: object) -> bool:
    return isinstance(value, float) and 0 < abs(value) < float(quoted.removeprefix("< "))


def test_the_scorecard_table_is_regenerated_cell_by_cell():
    doc = DOC.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| (.+) \|$", doc[doc.index("| criterion | none |") :], re.M)
    table = dict(rows[: len(analysis.CRITERIA)])
    assert list(table) == list(analysis.CRITERIA)
    header = doc[doc.index("| criterion | none |") :].splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")][1:] == SCORED
    for key, cells in table.items():
        for name, quoted in zip(SCORED, cells.split(" | ")):
            value = card(name)[key]
            if quoted.startswith("< "):
                assert _bound_holds(quoted, value), (name, key, quoted, value)
            else:
                assert quoted == _cell(value), (name, key, quoted, value)
