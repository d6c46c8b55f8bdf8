"""``posenc report --out DIR``: write the self-contained HTML report and print where it is."""

from __future__ import annotations

import argparse
from pathlib import Path

from posenc import plugins, report, tables, validate
from posenc.cli.analyze import check_scorecard_memory


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report (figures, scorecards of all encodings)"
    )
    p.add_argument("--out", type=Path, required=True, help="output folder (created if needed)")
    p.add_argument(
        "--dim", "-d", type=int, default=report.DEFAULT_DIM, help="d of the scorecards (default 256)"
    )
    p.add_argument(
        "--length", "-S", type=int, default=report.DEFAULT_LENGTH, help="S of the scorecards (default 80)"
    )
    p.add_argument("--base", type=float, default=tables.DEFAULT_BASE, help="ρ (default 10000)")
    plugins.add_arguments("report", p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    validate.output_path("--out", args.out, folder=True)
    check_scorecard_memory(args.length, args.dim)
    path = report.write_report(
        args.out, length=args.length, dim=args.dim, base=args.base, sections=plugins.report_sections(args)
    )
    print(f"report written to {path.resolve()}")
    print(f"scorecards (JSON) in {(path.parent / 'scorecards.json').resolve()}")
    return 0
