"""The ``posenc`` command line.

Each subcommand lives in its own module of this package and exposes
``register(subparsers) -> None``, which adds an ``argparse`` sub-parser whose ``func``
default takes the parsed namespace and returns an exit code. :data:`COMMANDS` names them with
their one-line help; a command's module (and whatever it imports: torch, scipy, matplotlib) is
imported only when that command is run or its own ``--help`` is asked, so ``posenc --help``
stays fast. Adding a command: a module here and one line in :data:`COMMANDS`. Packages built on
posenc add commands (``posenc bench``) and options through :mod:`posenc.plugins`.

Errors: a :class:`posenc.UsageError` (a bad flag, value, file or setting), a ``ValueError``
raised by posenc's own checks, and an ``OSError`` (missing file, unwritable folder, full disk)
are printed as one line, exit status 2. So is a missing optional dependency (matplotlib, torch, …):
the line names the extra that installs it (:data:`EXTRAS`). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import linecache
import os
import re
import sys
import typing
from collections.abc import Sequence
from pathlib import Path

from posenc import __version__, plugins
from posenc.errors import UsageError

#: Subcommand name → the module's one-line help (the module's ``register`` gives the same help).
COMMANDS: dict[str, str] = {
    "analyze": "measure the papers' criteria for one registered encoding",
    "check": "hold a Hugging Face rope config (or a framework's dumped tables) against the float64 truth",
    "encodings": "list the registered encodings with their sources",
    "figures": "write the papers' figures (PNG and SVG) into a folder",
    "report": "write a self-contained HTML report (figures, scorecards of all encodings)",
    "table": "build an encoding table, print a summary, optionally save it",
}

#: Top-level module of an optional dependency → the extra of ``pip install "posenc[EXTRA]"`` that brings it.
EXTRAS: dict[str, str] = {
    "matplotlib": "plots",
    "torch": "torch",
    "sklearn": "experiment",
    "tqdm": "experiment",
    "stumpy": "experiment",
}

#: Commands that need a larger extra than the first module they miss (the benchmark needs all of its own).
COMMAND_EXTRAS: dict[str, str] = {"bench": "experiment"}

_PACKAGE = Path(__file__).resolve().parents[1]


class OneLineParser(argparse.ArgumentParser):
    """A parser whose errors are one line, ``posenc CMD: error: --flag: what is wrong; see posenc CMD --help``
    (argparse prints its whole usage text first); its sub-parsers are of this class too."""

    def error(self, message: str) -> typing.NoReturn:
        flag = re.match(r"argument ([^:]+): (.*)", message, flags=re.S)
        if flag:  # "argument --seeds: --seeds must be …" says the flag once
            name, rest = flag.groups()
            name = max(name.split("/"), key=len)  # "-d/--dim": the long name
            message = rest if rest.startswith(name) else f"{name}: {rest}"
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module is imported and registers its full sub-parser.

    The other commands get a placeholder sub-parser (name and help) so that they are listed.
    """
    parser = OneLineParser(
        prog="posenc", description="Positional encodings for Transformers: tables, analysis, benchmark."
    )
    parser.add_argument("--version", action="version", version=f"posenc {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in {**COMMANDS, **plugins.command_help()}.items():
        if name == command and name in COMMANDS:
            importlib.import_module(f"{__name__}.{name}").register(sub)
        elif name == command:
            plugins.commands()[name].register_command(name, sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _raised_by_posenc(exc: BaseException) -> bool:
    """Whether a ``raise`` statement of posenc's own code raised ``exc`` (a deliberate check).

    A ``ValueError`` from inside NumPy or torch (a broadcast error, say) is a bug, not a user error.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    filename = tb.tb_frame.f_code.co_filename
    path = Path(filename).resolve()
    ours = any(path.is_relative_to(root) for root in (_PACKAGE, *plugins.package_roots()))
    return ours and linecache.getline(filename, tb.tb_lineno).lstrip().startswith("raise ")


def _user_error(exc: BaseException) -> bool:
    """Errors the user can fix (module docstring); the others are bugs and keep their traceback."""
    if isinstance(exc, (UsageError, OSError)):
        return True
    return isinstance(exc, ValueError) and _raised_by_posenc(exc)


def missing_extra(command: str | None, exc: ModuleNotFoundError) -> str | None:
    """The one-line message for ``exc`` when it is a missing optional dependency (else ``None``)."""
    module = (exc.name or "").partition(".")[0]
    if module not in EXTRAS:
        return None
    extra = COMMAND_EXTRAS.get(command or "", EXTRAS[module])
    return (
        f"posenc {command}: error: this command needs {module}, which is not installed; "
        f'install it with: pip install "posenc[{extra}]"'
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``posenc`` console script; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    known = command in COMMANDS or command in plugins.command_help()
    try:
        args = build_parser(command if known else None).parse_args(argv)
        return int(args.func(args) or 0)
    except ModuleNotFoundError as exc:
        message = missing_extra(command, exc)
        if message is None:
            raise
        print(message, file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into e.g. `head`, which stopped reading: not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"posenc {command}: interrupted; finished results are kept, re-run to resume", file=sys.stderr)
        return 130
    except MemoryError:
        print(
            f"posenc {command}: error: out of memory; ask for less (a shorter --length, a smaller --dim "
            "or --batch-size)",
            file=sys.stderr,
        )
        return 2
    except Exception as exc:  # re-raised below unless the user can fix it
        if not _user_error(exc):
            raise
        message = (
            str(exc)
            if not isinstance(exc, OSError) or not exc.filename
            else (f"{exc.filename}: {exc.strerror or exc}")
        )
        print(f"posenc {command}: error: {message}", file=sys.stderr)
        return 2
