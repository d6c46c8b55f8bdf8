"""``posenc encodings``: the registry's listing (name, family, source, summary) through the CLI."""

from __future__ import annotations

import json
import re

from posenc import registry
from posenc.cli import main


def test_every_registered_encoding_is_listed_with_its_source(capsys):
    assert main(["encodings", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == registry.names()
    for row in rows:
        info = registry.get(row["name"])
        assert (row["family"], row["source"], row["summary"]) == (info.family, info.source, info.summary)
        # a source a reader can find: an author and a year (the report cites it as it stands)
        assert row["name"] == "none" or re.search(r"[A-Z]\w+.* (19|20)\d\d\b", row["source"]), row


def test_the_table_prints_name_family_and_source_on_one_line(capsys):
    assert main(["encodings"]) == 0
    out = capsys.readouterr().out
    for name in registry.names():
        info = registry.get(name)
        assert re.search(rf"^{re.escape(name)}\s+{info.family}\s+{re.escape(info.source)}$", out, re.M), name
