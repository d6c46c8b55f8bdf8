"""The HTML report: self-contained, every registered encoding, the seeds' numbers, fast."""

from __future__ import annotations

import json
import time

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


def test_seed_claims_match_the_seeds():
    claims = {c.claim: c.measured for c in report.seed_claims()}
    assert round(claims["largest period, d = 512"], 3) == 60611.477
    assert claims["frequencies below 2π/d, d = 256"] == 76
    assert claims["frequencies below 2π/d, d = 512"] == 133
    assert round(claims["crossing index (d/4)·log10(d/2π), d = 256"]) == 103
