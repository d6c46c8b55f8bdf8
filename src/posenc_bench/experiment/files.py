"""Durable, atomic file writes: write ``NAME.tmp-<pid>``, ``fsync`` it, ``os.replace`` it onto ``NAME``, ``fsync`` the folder.

``os.replace`` is atomic on POSIX (and on Windows within one volume), so a reader — or a
re-run after an interruption — sees either the old file or the complete new one, never a
half-written one. The ``fsync`` of the file before the rename makes its bytes reach the disk
before its name does (otherwise a power loss can leave the new name on an empty file); the
``fsync`` of the folder after it makes the rename itself durable. The temporary name carries the
writer's process id, so that processes writing the same file at once never write into, or move,
each other's temporary file. A write that fails (a full disk, a file size limit) removes its
temporary file and raises an ``OSError`` naming the file it was writing.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from pathlib import Path


def _fsync(path: Path, *, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        if directory:  # some platforms (Windows) cannot open a folder: the rename is all we can do
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # folders that refuse fsync (some network file systems): nothing more to do
            raise
    finally:
        os.close(fd)


def write_atomic(path: Path, write: Callable[[Path], object]) -> None:
    """Call ``write(tmp)`` with a temporary sibling path, flush it to disk, then move it onto ``path``."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as exc:  # a full disk or a file size limit (ulimit -f): say which file, and what is safe
        tmp.unlink(missing_ok=True)
        fix = "raise the file size limit (ulimit -f)" if exc.errno == errno.EFBIG else "free space"
        raise OSError(
            exc.errno,
            f"{exc.strerror or exc} while writing it; the file is as it was and nothing finished was lost "
            f"(completed runs stay on disk): {fix} and re-run the same command to resume",
            str(path),
        ) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync(path.parent, directory=True)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically and durably."""
    write_atomic(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def move_aside(directory: Path, names: tuple[str, ...], kind: str) -> list[str]:
    """Rename each existing ``directory/NAME`` to ``NAME.<kind>-<UTC time>`` (never overwriting); the new names."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    moved = []
    for name in names:
        path = directory / name
        if not path.is_file():
            continue
        target, n = directory / f"{name}.{kind}-{stamp}", 1
        while target.exists():
            target, n = directory / f"{name}.{kind}-{stamp}-{n}", n + 1
        os.replace(path, target)
        moved.append(target.name)
    return moved
