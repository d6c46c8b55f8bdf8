"""Every fixture of a real rope bug: ``posenc check --against`` passes the right dump and fails the wrong one,
naming where it goes wrong (both through the CLI, as a user runs it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rope_bugs import FIXTURES, Fixture, gallery, write

from posenc.cli import main

GALLERY = Path(__file__).resolve().parents[2] / "docs" / "check_gallery.md"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.name)
def test_check_passes_the_right_dump_and_names_the_bug_in_the_wrong_one(fixture: Fixture, tmp_path, capsys):
    config, right, wrong = write(fixture, tmp_path)
    assert main(["check", str(config), "--against", str(right)]) == 0, capsys.readouterr().out
    capsys.readouterr()
    assert main(["check", str(config), "--against", str(wrong)]) == 1
    out = capsys.readouterr().out
    assert re.search(fixture.says, out, flags=re.S), out


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.name)
def test_the_json_form_reports_the_same_failure(fixture: Fixture, tmp_path, capsys):
    config, _, wrong = write(fixture, tmp_path)
    assert main(["check", str(config), "--against", str(wrong), "--json"]) == 1
    against = json.loads(capsys.readouterr().out)["against"]
    assert against.get("disagreements") or against.get("disagreement")


def test_there_are_at_least_twelve_bug_classes_and_the_gallery_shows_each():
    assert len(FIXTURES) >= 12 and len({f.name for f in FIXTURES}) == len(FIXTURES)
    shown = GALLERY.read_text()
    for fixture in FIXTURES:
        assert f"`{fixture.name}`" in shown, fixture.name


def test_the_gallery_is_what_check_prints(tmp_path):
    """docs/check_gallery.md quotes check's output: regenerate it with the command in its first lines."""
    assert GALLERY.read_text() == gallery(tmp_path)
