"""Import a peer library the conformance tests compare against, or skip saying why it cannot be used.

``pytest.importorskip`` skips only when a module is absent (``ModuleNotFoundError``). A peer can also
be installed and still fail to import because of something beneath it: transformers pulls in
huggingface_hub, which imports the standard library's ``ssl``, and a Python whose ``_ssl`` extension
was built for another interpreter raises ``ImportError`` there. That says nothing about posenc, so
those tests skip too, and the skip reason carries the error so the report shows what the machine lacks.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


def import_peer(module: str, why: str) -> ModuleType:
    """``module`` imported, or the calling test (or test module, at import time) skipped with ``why``."""
    try:
        return importlib.import_module(module)
    except ImportError as error:  # absent (ModuleNotFoundError) or installed but unimportable
        pytest.skip(f"{why}; cannot import {module}: {error}", allow_module_level=True)
