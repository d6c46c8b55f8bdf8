"""``posenc figures --out DIR [--format png svg]``: write every figure of the papers (:data:`posenc.plots.FIGURES`)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("figures", help="write the papers' figures (PNG and SVG) into a folder")
    p.add_argument("--out", type=Path, required=True, help="output folder (created if needed)")
    p.add_argument(
        "--format",
        nargs="+",
        default=["png", "svg"],
        choices=("png", "svg", "pdf"),
        help="file formats (default: png svg)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from posenc import plots, validate  # matplotlib only for this command

    validate.output_path("--out", args.out, folder=True)

    for path in plots.write_all(args.out, formats=args.format):
        print(path)
    return 0
