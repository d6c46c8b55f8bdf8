"""The ``posenc`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds an ``argparse`` sub-parser whose ``func``
default takes the parsed namespace and returns an exit code. :func:`main` discovers them,
so adding a command touches no shared file.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from posenc import __version__


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand module of :mod:`posenc.cli` registered."""
    parser = argparse.ArgumentParser(
        prog="posenc", description="Positional encodings for Transformers: tables, analysis, benchmark."
    )
    parser.add_argument("--version", action="version", version=f"posenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``posenc`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"posenc {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"posenc {args.command}: interrupted; finished results are kept, re-run to resume", file=sys.stderr)
        return 130
