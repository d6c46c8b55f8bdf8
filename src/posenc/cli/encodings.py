"""``posenc encodings [--json]``: every registered encoding, where it acts, its source and what it is.

Read from :mod:`posenc.registry` (plugins' encodings included, e.g. the benchmark's ``dfstrans_dft``), so
the listing, the report's citations and the registry are one table. ``--json`` prints a list of objects
with the keys ``name``, ``family``, ``source``, ``summary``, ``learned``.
"""

from __future__ import annotations

import argparse
import json

from posenc import plugins, registry


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("encodings", help="list the registered encodings with their sources")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    plugins.loaded()  # a plugin registers its encodings when it is loaded
    infos = [registry.get(name) for name in registry.names()]
    if args.json:
        rows = [
            {
                "name": i.name,
                "family": i.family,
                "source": i.source,
                "summary": i.summary,
                "learned": i.learned,
            }
            for i in infos
        ]
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    name_width = max(len(i.name) for i in infos)
    family_width = max(len(i.family) for i in infos)
    for i in infos:
        print(f"{i.name:<{name_width}}  {i.family:<{family_width}}  {i.source}")
        print(f"{'':<{name_width}}  {'':<{family_width}}  {i.summary}")
    return 0
