"""Extensions that other packages contribute to posenc's command line and report.

posenc never imports a package built on it; such a package announces itself instead, through
an entry point of the group ``posenc.plugins`` in its own metadata (``pyproject.toml``)::

    [project.entry-points."posenc.plugins"]
    bench = "posenc_bench.plugin"

The entry point names a module with any of these attributes (each optional):

=========================================  ==================================================================
``COMMANDS: dict[str, str]``               subcommand name → one-line help
``register_command(name, subparsers)``     add the full sub-parser of one of its ``COMMANDS``
``add_arguments(command, parser)``         add options to one of posenc's own commands
``handle(command, args) -> int | None``    run a posenc command itself when one of its options asks for it
                                           (``None``: posenc runs it)
``report_sections(args) -> [Section]``     sections that ``posenc report`` adds to the HTML report
=========================================  ==================================================================

Plugins are loaded when a command asks for them (never by ``import posenc``), each once.
"""

from __future__ import annotations

import argparse
import functools
import importlib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

GROUP = "posenc.plugins"


@dataclass(frozen=True)
class Section:
    """One section of the HTML report that a plugin contributes.

    Attributes:
        key: the anchor (``[a-z0-9-]+``); title: its heading.
        html: the body (trusted HTML: the plugin escapes what it shows).
        figures: HTML of figures appended to the report's figure section.
        records: JSON-serialisable data stored in ``scorecards.json`` under ``records_key`` (default ``key``).
    """

    key: str
    title: str
    html: str
    figures: str = ""
    records: Any = None
    records_key: str | None = None


@functools.cache
def loaded() -> tuple[Any, ...]:
    """Every installed plugin, loaded (in entry-point name order)."""
    points = sorted(metadata.entry_points(group=GROUP), key=lambda p: p.name)
    return tuple(point.load() for point in points)


def commands() -> dict[str, Any]:
    """Subcommand name → the plugin that provides it."""
    return {name: plugin for plugin in loaded() for name in getattr(plugin, "COMMANDS", {})}


def command_help() -> dict[str, str]:
    """Subcommand name → one-line help, for every plugin command."""
    return {
        name: help_text for plugin in loaded() for name, help_text in getattr(plugin, "COMMANDS", {}).items()
    }


def add_arguments(command: str, parser: argparse.ArgumentParser) -> None:
    """Let every plugin add its options to posenc's ``command``."""
    for plugin in loaded():
        if hasattr(plugin, "add_arguments"):
            plugin.add_arguments(command, parser)


def handle(command: str, args: argparse.Namespace) -> int | None:
    """The exit code of the first plugin that runs ``command`` for these ``args``; ``None`` if none does."""
    for plugin in loaded():
        if hasattr(plugin, "handle"):
            code = plugin.handle(command, args)
            if code is not None:
                return int(code)
    return None


def report_sections(args: argparse.Namespace) -> list[Section]:
    """The report sections every plugin contributes for these ``posenc report`` arguments."""
    return [
        s for plugin in loaded() if hasattr(plugin, "report_sections") for s in plugin.report_sections(args)
    ]


def package_roots() -> tuple[Path, ...]:
    """The source folders of the loaded plugins' top-level packages (their deliberate errors are users')."""
    tops = {importlib.import_module(plugin.__name__.split(".")[0]) for plugin in loaded()}
    return tuple(Path(top.__file__).resolve().parent for top in tops if top.__file__ is not None)
