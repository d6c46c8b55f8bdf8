"""``posenc table NAME --length S --dim D [--out FILE.npy|.csv]``: build, summarise and save a table."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from posenc import spectrum, tables, validate
from posenc.errors import UsageError

TABLES = ("sinusoidal", "dft")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("table", help="build an encoding table, print a summary, optionally save it")
    p.add_argument("name", help=f"table-defined encoding: {', '.join(TABLES)}")
    p.add_argument("--length", "-S", type=int, required=True, help="number of positions S (0…S-1)")
    p.add_argument("--dim", "-d", type=int, required=True, help="encoding dimension d")
    p.add_argument(
        "--base", type=float, default=tables.DEFAULT_BASE, help="sinusoidal base ρ (default 10000)"
    )
    p.add_argument(
        "--layout", default="interleaved", choices=spectrum.LAYOUTS, help="sinusoidal column layout"
    )
    p.add_argument("--alias", action="store_true", help="dft: wrap positions ≥ d modulo d (not faithful)")
    p.add_argument("--out", type=Path, help="write the table to FILE.npy (float64) or FILE.csv")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name not in TABLES:
        raise UsageError(
            f"NAME must be one of {', '.join(TABLES)} (encodings defined by a table), got {args.name!r}"
        )
    validate.positive_int("--length", args.length)
    validate.positive_int("--dim", args.dim)
    if args.out is not None:
        validate.output_path("--out", args.out, folder=False)
        if args.out.suffix not in (".npy", ".csv"):
            raise UsageError(f"--out must end in .npy or .csv, got {str(args.out)!r}")
    if args.name == "dft" and args.length > args.dim and not args.alias:
        raise UsageError(
            f"--length {args.length} > --dim {args.dim}: the DFT encoding is faithful only for positions "
            f"0 … d-1 (position s + d gets the same row as s; Idé et al., Theorem 1); use --length <= "
            f"{args.dim}, --dim >= {args.length}, or --alias to wrap positions modulo d"
        )
    # the table, its float64 angles and a summary copy: about three [S, d] float64 arrays at once
    validate.fits_in_memory(
        f"a {args.name} table of --length {args.length} × --dim {args.dim}",
        3 * 8 * args.length * args.dim,
        advice="lower --length or --dim",
    )
    if args.name == "sinusoidal":
        table = tables.sinusoidal(args.length, args.dim, base=args.base, layout=args.layout)
    else:
        table = tables.dft(args.length, args.dim, alias=args.alias)
    norms = np.linalg.norm(table, axis=1)
    print(f"{args.name} table: {table.shape[0]} positions × {table.shape[1]} dims, float64")
    print(f"  range [{table.min():.6g}, {table.max():.6g}]  mean {table.mean():.6g}")
    print(f"  row norm: min {norms.min():.6g}  max {norms.max():.6g}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if args.out.suffix == ".npy":
            np.save(args.out, table)
        else:
            np.savetxt(args.out, table, delimiter=",", fmt="%.17g")
        print(f"  written to {args.out}")
    return 0
