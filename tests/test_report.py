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
    # self-contained: nothing is fetched; the only web addresses are the references' links
    assert (
        "src='http" not in page and 'src="http' not in page and "url(http" not in page and "<link" not in page
    )
    references = page[page.index("<section id='references'>") :]
    assert page.count("http") == references.count("http") == 2 * references.count("<a href='http")
    data = json.loads((tmp_path / "scorecards.json").read_text())
    assert data["not_measured"] == {}
    assert [c["encoding"] for c in data["scorecards"]] == registry.names()
    assert all(list(c["values"]) == list(analysis.CRITERIA) for c in data["scorecards"])


def test_seed_claims_match_the_papers_and_the_issue_numbers():
    claims = {c.claim: c for c in report.seed_claims()}
    assert round(claims["largest period 2π·10000^((d−2)/d), d = 512"].measured, 3) == 60611.477
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
        "row <span class='math'>PE[t]</span> of <code>posenc.x</code> &lt;b&gt;"
    )


@pytest.mark.parametrize(
    ("text", "html_text"),
    [
        ("w_i = 10000^(−2i/d)", "w<sub>i</sub> = 10000<sup>−2i/d</sup>"),
        ("the shift T^(k) and δ_(t,s)", "the shift T<sup>(k)</sup> and δ<sub>t,s</sub>"),
        ("(cos tθ_i, sin tθ_i), 2/2^n", "(cos tθ<sub>i</sub>, sin tθ<sub>i</sub>), 2/2<sup>n</sup>"),
        ("long_range_decay and ``min_distance``", "long_range_decay and <code>min_distance</code>"),
    ],
)
def test_report_maths_is_rendered_with_sub_and_sup(text, html_text):
    """Plain ``^`` and ``_`` become superscripts and subscripts; identifiers keep their underscores."""
    assert report.rst_inline(text) == html_text


def test_report_prose_has_no_ascii_maths_internal_names_or_unfound_references(tmp_path):
    import re

    page = report.write_report(tmp_path).read_text(encoding="utf-8")
    body = re.sub(r"<style>.*?</style>|<img[^>]*>|<code>.*?</code>", "", page, flags=re.S)
    text = html.unescape(re.sub(r"<[^>]+>", " ", body))
    assert not re.findall(r"\S+\^\S+", text)  # ASCII superscripts
    assert not re.findall(r"(?<![\w])[A-Za-zα-ωΑ-Ω]_\(|(?<![\w])[θλδwx]_\w", text)  # ASCII subscripts
    assert not re.findall(r"posenc\.\w+|\w+\(['\"]|build_encoding|riemann_limit|tables\.dft", text)
    assert "Anonymous" not in page and "n.d." not in page  # a source nobody could find is not cited
    references = page[page.index("<section id='references'>") :]
    items = re.findall(r"<li id='ref-(\w+)'>(.*?)</li>", references)
    assert items and all("<a href='https://" in item for _, item in items), items


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
    empty = [c["notes"][k] for c in cards for k, v in c["values"].items() if v is None]
    # one line per reason, whatever the family: 8 at the defaults (21 when grouped by family as well)
    assert notes.count("<li>") == len({report._short_reason(why) for why in empty}) <= 8
    for meaning in analysis.MEANINGS.values():  # each criterion defined where it is shown
        assert report.rst_inline(meaning) in page


def _browser() -> str:
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium)")
    return browser


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_report_renders_in_headless_chromium(tmp_path):
    import subprocess

    browser = _browser()
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


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_report_printed_to_a4_pdf_keeps_every_scorecard_column_and_all_prose(tmp_path):
    """Printed to PDF the rope, alibi, t5 and shaw columns were dropped and notes cut off: at A4 every
    scorecard column is on the page and every word of the claims' notes is printed."""
    import re
    import shutil
    import subprocess

    browser = _browser()
    if shutil.which("pdftotext") is None or shutil.which("pdfinfo") is None:
        pytest.skip("pdftotext/pdfinfo are not installed (apt-get install poppler-utils)")
    page = report.write_report(tmp_path)
    pdf = tmp_path / "report.pdf"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True).stdout
    assert "(A4)" in info
    text = subprocess.run(
        ["pdftotext", "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    headers = [line.split() for line in text.splitlines() if line.split()[:1] == ["criterion"]]
    names = registry.names()  # in tables of SCORECARD_COLUMNS encodings, each repeating the criteria
    tables = [names[i : i + report.SCORECARD_COLUMNS] for i in range(0, len(names), report.SCORECARD_COLUMNS)]
    assert headers and all(h[1:] in tables for h in headers), headers
    assert {n for h in headers for n in h[1:]} == set(names), headers
    printed = set(re.findall(r"[A-Za-z]{4,}", text))
    for claim in report.seed_claims():
        missing = set(re.findall(r"[A-Za-z]{4,}", claim.note)) - printed
        assert not missing, (claim.claim, missing)


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_report_scorecard_fits_a_1400_pixel_screen(tmp_path):
    """At 1400 px the shaw column was clipped (the table scrolled inside its box)."""
    import json as json_module
    import re
    import subprocess

    browser = _browser()
    page = report.write_report(tmp_path)
    probe = tmp_path / "probe.html"
    script = (
        "<script>addEventListener('load', () => { const boxes = [...document.querySelectorAll('table.scores')]"
        ".map(t => t.parentElement); document.body.dataset.fit = JSON.stringify("
        "[Math.max(...boxes.map(b => b.scrollWidth)), Math.min(...boxes.map(b => b.clientWidth))]); })</script>"
    )
    probe.write_text(
        page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8"
    )
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,2000",
            "--virtual-time-budget=2000",
            "--dump-dom",
            probe.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    scroll, client = json_module.loads(html.unescape(re.search(r'data-fit="([^"]+)"', dom).group(1)))
    assert scroll <= client, (scroll, client)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    page = report.write_report(out).read_text(encoding="utf-8")
    return page, json.loads((out / "scorecards.json").read_text())


def test_every_encoding_cites_the_source_its_registry_entry_gives(written):
    page, _ = written
    measured = page[page.index("What was measured") :]
    for name in registry.names():
        source = registry.get(name).source
        if name != "none":
            assert f"<b>{name}</b> <span class='source'>({html.escape(source)})</span>" in measured, name
    assert not hasattr(report, "ENCODING_SOURCES")  # one citation per encoding: the registry's


def test_values_print_with_three_significant_digits_and_the_json_keeps_them_whole(written):
    import re

    page, data = written
    cells = re.findall(r"<td(?: title=\"[^\"]*\"| class='num')>([^<]*(?:<sup>[^<]*</sup>)?)</td>", page)
    numbers = [re.sub(r"×10<sup>.*", "", c).lstrip("−") for c in cells if re.match(r"−?\d", c)]
    assert len(numbers) > 100
    digits = [len(n.replace(".", "").lstrip("0")) for n in numbers]
    assert max(digits) <= 3, [n for n, d in zip(numbers, digits) if d > 3][:5]
    assert "e-" not in "".join(cells) and "e+" not in "".join(cells)  # powers of ten typeset, never "1.1e-"
    claims = {c["claim"]: c["measured"] for c in data["claims"]}
    assert claims == {c.claim: c.measured for c in report.seed_claims()}  # full float64 values


def test_names_keep_their_underscores_and_maths_its_subscripts(written):
    page, _ = written
    assert "p<sub>rope</sub>" not in page and "<b>p_rope</b>" in page
    assert report.maths("p_rope, w_i, a_0, δ_(t,s) and d_model") == (
        "p_rope, w<sub>i</sub>, a<sub>0</sub>, δ<sub>t,s</sub> and d_model"
    )


def test_the_reasons_are_the_users_not_internal_wording(written):
    page, data = written
    notes = page[page.index("Why a cell is") : page.index("What was measured")]
    assert "build it with" not in page and "max_len &gt;=" not in notes and "S - k = " not in notes
    # the JSON keeps each note whole
    learned = next(c for c in data["scorecards"] if c["encoding"] == "learned")
    assert "max_len" in learned["notes"]["extrapolation_min_distance"]


@pytest.mark.slow
def test_report_printed_to_a4_has_no_mostly_blank_page(tmp_path):
    """Printed at A4 the report took 14 pages, four of them mostly blank (one table row, one bullet, one
    figure each): now every page but the last is at least 60 % used and it takes at most 9."""
    import shutil
    import subprocess

    browser = _browser()
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm is not installed (apt-get install poppler-utils)")
    page = report.write_report(tmp_path)
    pdf = tmp_path / "report.pdf"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    subprocess.run(["pdftoppm", "-r", "30", "-gray", str(pdf), str(tmp_path / "p")], check=True, timeout=120)
    image = pytest.importorskip("PIL.Image")
    pages = sorted(tmp_path.glob("p-*.pgm"))
    assert 1 < len(pages) <= 9, len(pages)
    for path in pages[:-1]:
        ink = np.asarray(image.open(path), dtype=float) < 200
        rows = np.flatnonzero(ink.any(axis=1))
        used = (rows[-1] - rows[0]) / ink.shape[0]  # from the first line printed to the last
        assert used > 0.6, (path.name, used)
