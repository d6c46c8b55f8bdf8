"""Torch state on disk: written atomically, read back as data only.

A checkpoint is a pickle, and unpickling an arbitrary pickle runs whatever code it names. Every
torch file the benchmark reads goes through :func:`load_state`, which unpickles with
``weights_only=True`` (tensors, containers and plain values; any other object is refused before it is
built), and a file that is refused or unreadable is an :class:`UnusableFile` whose message says why
in a few words, never torch's own multi-line text. A caller moves such a file aside
(:func:`posenc_bench.experiment.files.move_aside`) and retrains instead of trusting it.

:func:`save_state` serialises in memory first, so a write that fails (a full disk, ``ulimit -f``) is
an ``OSError`` naming the file (:func:`~posenc_bench.experiment.files.write_atomic`), not torch's
``RuntimeError``, and the file on disk stays as it was.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from posenc_bench.experiment.files import write_atomic


class UnusableFile(Exception):
    """A file that exists but is not what it claims to be; the message says why (it follows the file's name)."""


def save_state(path: Path, state: Any) -> None:
    """``torch.save(state)`` to ``path``, atomically and durably."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    write_atomic(path, lambda tmp: tmp.write_bytes(buffer.getbuffer()))


def load_state(path: Path, *, device: torch.device | str = "cpu") -> Any:
    """The tensors and plain values saved in ``path``; :class:`UnusableFile` if it holds anything else
    (code, objects of other classes) or is not a readable torch file."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "GLOBAL" in str(exc):  # the restricted unpickler met a class or function: what a payload names
            raise UnusableFile(
                "holds code or objects other than tensors and plain values, so it is not unpickled"
            ) from None
        raise UnusableFile("is not a torch file (garbled pickle data)") from None
    except FileNotFoundError:
        raise
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        why = "an empty file" if isinstance(exc, EOFError) else f"{type(exc).__name__}"
        raise UnusableFile(f"is not a readable torch file ({why})") from None
