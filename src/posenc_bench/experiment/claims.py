"""Claiming a run directory, so that several ``posenc bench`` processes on one ``--out`` share the work.

A process claims a directory by holding an exclusive ``fcntl.flock`` on its ``claim.lock`` for
as long as it reads or writes the run. Another process that finds the lock held either moves on
to other runs (``wait=False``) and comes back later, or waits for it (``wait=True``): when the
lock is released, the run is finished (its ``metrics.json`` is then read, not trained again) or
its holder died (the kernel releases the lock of a killed process, and the run resumes from its
checkpoint). The lock file stays in place, empty (a finished run's files are left untouched):
removing it would let a third process lock a new file while the second still holds the old one.

Where ``fcntl`` does not exist (Windows) nothing is locked: concurrent processes on one ``--out``
may then train the same run twice, though every write stays atomic.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

LOCK = "claim.lock"


@contextlib.contextmanager
def claim(directory: Path, *, wait: bool, log: Callable[[str], None] = print) -> Iterator[bool]:
    """Hold ``directory``'s run for the ``with`` block; yields whether it is held.

    ``wait=False`` yields ``False`` at once when another process holds it; ``wait=True`` says so
    through ``log`` and blocks until it is released.
    """
    directory.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield True
        return
    path = directory / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            log(f"{directory}: another process is training this run; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in directory.glob("*.tmp-*"):  # left by a killed writer; none can be writing now
            stale.unlink(missing_ok=True)
        yield True
    finally:
        os.close(fd)  # releases the lock
