"""The HTML report: self-contained, every registered encoding, the seeds' numbers, fast."""

from __future__ import annotations

import html
import json
import time

import numpy as np
import pytest

from posenc import analysis, registry

report = pytest.importorskip("posenc.report")
plots = pytest.importorskip("posenc.plots", reason="matplotlib is needed for the report's figures")


def test_report_with_defaults_is_complete_and_fast(tmp_path):
    start = time.perf_counter()
    path = report.write_report(tmp_path)
    elapsed = time.perf_counter() - start
    assert elapsed < 60.0  # the README's main job: under a minute on 2 cores
    page = path.read_text(encoding="utf-8")
    for name in registry.names():
        assert f"<th>{name}<br>" in page, f"{name} missing from the scorecard table"
    assert page.count("data:image/png;base64,") == len(plots.FIGURES)
    assert "http://" not in page and "https://" not in page  # self-contained
    data = json.loads((tmp_path / "scorecards.json").read_text())
    assert data["not_measured"] == {}
    assert [c["encoding"] for c in data["scorecards"]] == registry.names()
    assert all(list(c["values"]) == list(analysis.CRITERIA) for c in data["scorecards"])


def test_seed_claims_match_the_papers_and_the_issue_numbers():
    claims = {c.claim: c for c in report.seed_claims()}
    assert round(claims["largest period, d = 512"].measured, 3) == 60611.477
    # "almost half" of the frequencies in the lowest bin: 76/128 and 133/256
    assert claims["share of frequencies in the lowest bin (below 2π/d), d = 256"].measured == 76 / 128
    assert claims["share of frequencies in the lowest bin, d = 512"].measured == 133 / 256
    assert round(claims["crossing index (d/4)·log10(d/2π), d = 256"].measured) == 103
    # the largest wavelength is 10000^(-2/d) of 10000·2π: 86.6 % at d = 128
    share = claims["largest wavelength as a share of 10000·2π, d = 128"].measured
    assert share == pytest.approx(10000.0 ** (-2 / 128), rel=1e-12) and round(share, 3) == 0.866
    # Su's sum vs integral, independent float64 sum and closed-form integral (scipy's Ci)
    from scipy.special import sici

    def gap(d, top):
        x = np.arange(1, top + 1, dtype=float)
        w = 10000.0 ** (-2.0 * np.arange(d // 2) / d)
        total = np.cos(np.outer(x, w)).sum(axis=1)
        integral = (d / 2) * (sici(x)[1] - sici(x / 1e4)[1]) / np.log(1e4)
        return np.abs(total - integral).max() / (d / 2)

    assert claims["sum vs integral: max |Σ − (d/2)∫| / (d/2), d = 512, x ≤ 1024"].measured == pytest.approx(
        gap(512, 1024), rel=1e-9
    )
    assert (
        round(gap(512, 1024), 3) == 0.055
        and round(gap(512, 10_000), 3) == 0.094
        and round(gap(128, 128), 3) == 0.078
    )
    assert "88.9" in claims["sum vs integral: max |Σ − (d/2)∫| / (d/2), d = 512, x ≤ 1024"].note


def test_dft_ripple_is_peak_over_d_minus_1_and_explained():
    claim = next(c for c in report.seed_claims() if c.stated == "perfect")
    for d in (16, 64, 256):
        f = analysis.reconstruct(analysis.one_hot(5, d), analysis.dft_distribution(d))
        off = np.delete(f - analysis.one_hot(5, d), 5)
        assert np.abs(off).max() == pytest.approx(f[5] / (d - 1), rel=1e-9)
        plain = analysis.reconstruct(analysis.one_hot(5, d), np.ones(d // 2 + 1))
        assert np.abs(plain - analysis.one_hot(5, d)).max() < 1e-12
    assert "peak/(d−1)" in claim.note and "plain inverse DFT" in claim.note


def test_rst_inline_renders_markup():
    assert report.rst_inline("row ``PE[t]`` of :func:`posenc.x` <b>") == (
        "row <code>PE[t]</code> of <code>posenc.x</code> &lt;b&gt;"
    )


def test_report_has_references_no_raw_markup_and_one_line_per_reason(tmp_path):
    page = report.write_report(tmp_path).read_text(encoding="utf-8")
    assert "``" not in page and ":func:" not in page and "ide-*" not in page and "SPEC" not in page
    assert "<section id='references'>" in page and "<nav class='toc'>" in page
    import re

    cited = set(re.findall(r'href="#ref-([a-z]+)"', page))
    listed = set(re.findall(r"id='ref-([a-z]+)'", page))
    assert cited == listed and {"ide", "su", "denk", "kazemnejad", "vaswani"} <= cited  # cited ⇔ listed
    assert "prefers-color-scheme: dark" in page
    assert page.count("Sizes:") == len(plots.FIGURES)
    notes = page[page.index("Why a cell is") : page.index("What was measured")]
    cards = json.loads((tmp_path / "scorecards.json").read_text())["scorecards"]
    empty = [(c["family"], c["notes"][k]) for c in cards for k, v in c["values"].items() if v is None]
    assert notes.count("<li>") == len(set(empty)) < len(empty) / 3  # one line per family and reason
    for meaning in analysis.MEANINGS.values():  # each criterion defined where it is shown
        assert html.escape(meaning) in page


def test_report_renders_in_headless_chromium(tmp_path):
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    page = report.write_report(tmp_path)
    for scheme in ("light", "dark"):
        shot = tmp_path / f"{scheme}.png"
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--blink-settings=preferredColorScheme={0 if scheme == 'dark' else 1}",
                f"--screenshot={shot}",
                "--window-size=1280,2400",
                page.as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
        assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    image = pytest.importorskip("PIL.Image")
    light, dark = (
        np.asarray(image.open(tmp_path / f"{s}.png").convert("L"), dtype=float) for s in ("light", "dark")
    )
    assert light[5, 5] > 200 and dark[5, 5] < 60  # the page follows prefers-color-scheme
    # the same layout in both: text and figures at the same places (the row profiles of ink match)
    ink_light, ink_dark = (np.abs(np.diff(a, axis=1)).sum(axis=1) > 0 for a in (light, dark))
    assert np.mean(ink_light == ink_dark) > 0.95
