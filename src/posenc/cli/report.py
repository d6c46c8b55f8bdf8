"""``posenc report --out DIR``: write the self-contained HTML report and print where it is."""

from __future__ import annotations

import argparse
from pathlib import Path

from posenc import _validate, report, tables
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
    p.add_argument(
        "--runs",
        type=Path,
        metavar="DIR",
        help="a `posenc bench` output folder: add initial vs trained scorecards of its runs",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _validate.output_path("--out", args.out, folder=True)
    check_scorecard_memory(args.length, args.dim)
    path = report.write_report(args.out, length=args.length, dim=args.dim, base=args.base, runs=args.runs)
    print(f"report written to {path.resolve()}")
    print(f"scorecards (JSON) in {(path.parent / 'scorecards.json').resolve()}")
    return 0
