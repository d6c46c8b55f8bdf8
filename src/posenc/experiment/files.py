"""Atomic file writes: write ``NAME.tmp``, then ``os.replace`` it onto ``NAME``.

``os.replace`` is atomic on POSIX (and on Windows within one volume), so a reader — or a
re-run after an interruption — sees either the old file or the complete new one, never a
half-written one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomic(path: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(tmp)`` with a temporary sibling path, then move it onto ``path``."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
