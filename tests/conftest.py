"""Shared fixtures: the location of real datasets, posenc's compiled loops on and off, and a hypothesis
profile for a noisy machine.

Real data lives outside the repository (never copied in). Tests find it through the
``POSENC_DATA`` environment variable or, by default, ``../shared/data`` beside the
checkout, and skip with the reason when it is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO_ROOT = Path(__file__).resolve().parents[1]

settings.register_profile(
    "posenc", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "posenc"))


def data_root() -> Path:
    """``$POSENC_DATA`` if set, else ``../shared/data`` beside the repository."""
    return Path(os.environ.get("POSENC_DATA", REPO_ROOT.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def msl_dir() -> Path:
    """The compact MSL copy (``train.npz``, ``test.npz``, ``labeled_anomalies.csv``), or skip."""
    path = data_root() / "msl"
    if not (path / "test.npz").is_file():
        pytest.skip(f"MSL data not found at {path} (set POSENC_DATA to the folder holding msl/)")
    return path


@pytest.fixture
def native() -> None:
    """Skip unless posenc's compiled loops (``posenc._kernels``) are built and switched on."""
    from posenc import _native

    if _native.kernels is None:
        pytest.skip("posenc._kernels is not built here (no C compiler at install time, or POSENC_NATIVE=0)")


@pytest.fixture
def pure(monkeypatch: pytest.MonkeyPatch):
    """Run a callable with the compiled loops switched off: the pure NumPy/PyTorch code."""
    from posenc import _native

    def run(fn, *args, **kwargs):
        with monkeypatch.context() as m:
            m.setattr(_native, "kernels", None)
            return fn(*args, **kwargs)

    return run
