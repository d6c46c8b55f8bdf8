"""What the benchmark adds to the ``posenc`` command line (:mod:`posenc.plugins`, entry point ``bench``).

* ``posenc bench …`` (:mod:`posenc_bench.cli`);
* ``posenc analyze ENCODING --checkpoint RUN_DIR`` (:mod:`posenc_bench.trained_cli`);
* ``posenc report --runs DIR``: the trained-encodings section (:mod:`posenc_bench.report`).

Importing this module imports nothing heavy: each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from posenc import plugins

COMMANDS = {
    "bench": "compare positional encodings: anomaly classification and detection, length generalisation"
}


def register_command(name: str, sub: argparse._SubParsersAction) -> None:
    """Add the full ``posenc bench`` sub-parser."""
    from posenc_bench import cli

    cli.register(sub)


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """``--checkpoint`` for ``analyze``, ``--runs`` for ``report``."""
    if command == "analyze":
        parser.add_argument(
            "--checkpoint",
            type=Path,
            metavar="RUN_DIR",
            help="score the trained encoding of this `posenc bench` run directory (config.json + checkpoint.pt)",
        )
    elif command == "report":
        parser.add_argument(
            "--runs",
            type=Path,
            metavar="DIR",
            help="a `posenc bench` output folder: add initial vs trained scorecards of its runs",
        )


def handle(command: str, args: argparse.Namespace) -> int | None:
    """Run ``analyze --checkpoint``; every other command is posenc's."""
    if command == "analyze" and getattr(args, "checkpoint", None) is not None:
        from posenc_bench.trained_cli import run_checkpoint

        return run_checkpoint(args)
    return None


def report_sections(args: argparse.Namespace) -> list[plugins.Section]:
    """The trained-encodings section when ``--runs`` is given."""
    if getattr(args, "runs", None) is None:
        return []
    from posenc_bench.report import trained_section

    return [trained_section(args.runs)]
