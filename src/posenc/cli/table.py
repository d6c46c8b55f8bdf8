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
    p.add_argument(
        "--out",
        type=Path,
        help="write the table to FILE.npy (float64) or FILE.csv (a header row names the columns: "
        "sin0,cos0,… or the DFT's a0,a1,…,b1,…,b0)",
    )
    p.set_defaults(func=run)


def column_names(name: str, dim: int, layout: str) -> list[str]:
    """The CSV header: ``sin<i>``/``cos<i>`` of frequency ``w_i`` where the layout puts them (sinusoidal), or
    the DFT encoding's ``a0, a1 … aK, b1 … bK, b0`` (Idé, Labaien & Chen 2024, eq. 21)."""
    if name == "sinusoidal":
        sin_cols, cos_cols = spectrum.layout_columns(dim, layout)
        names = [""] * dim
        for kind, cols in (("sin", sin_cols), ("cos", cos_cols)):
            for i, col in enumerate(cols):
                names[int(col)] = f"{kind}{i}"
        return names
    n_k = (dim - 1) // 2
    return ["a0", *(f"a{k}" for k in range(1, n_k + 1)), *(f"b{k}" for k in range(1, n_k + 1))] + (
        ["b0"] if dim % 2 == 0 else []
    )


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
            header = ",".join(column_names(args.name, args.dim, args.layout))
            np.savetxt(args.out, table, delimiter=",", fmt="%.17g", header=header, comments="")
        print(f"  written to {args.out}")
    return 0
