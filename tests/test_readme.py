"""The README's and docs' commands as a reader runs them: offline, from the checkout's root."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_first_hugging_face_example_builds_its_config_locally(monkeypatch):
    """The first example that reads a Hugging Face config must run offline (the hub model is gated)."""
    pytest.importorskip("transformers")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    first = next(b for b in _python_blocks(README) if "from_hf" in b)
    assert "from_pretrained" not in first and "LlamaConfig(" in first
    scope: dict = {}
    exec(compile(first, "README.md", "exec"), scope)
    assert scope["q_rot"].shape == scope["q"].shape
    assert README.index("LlamaConfig(") < README.index("from_pretrained")


@pytest.mark.slow  # keeps -m "not slow" under 2 CPU-minutes
def test_the_precision_command_of_docs_conventions_runs_from_the_checkout():
    """It failed with ``No module named 'peers'``; its figures are those the default install gives."""
    pytest.importorskip("transformers")
    text = (ROOT / "docs" / "conventions.md").read_text(encoding="utf-8")
    command = re.search(r'`python -c "(.*?)"`', text).group(1)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    hf_error, our_error = map(float, done.stdout.strip().strip("()").split(","))
    row = re.search(r"\| default \| 10⁶ \| (\S+) \| (\S+) \|", text)
    shown = (f"{hf_error:.1e}".replace("e-0", "e-"), f"{our_error:.1e}".replace("e-0", "e-"))
    assert shown == row.groups(), (hf_error, our_error)


def test_the_position_error_budget_in_the_readme_is_what_the_script_measures():
    """ "Position 10,000,000 is as exact as 10" was not what is measured; the README now quotes the script."""
    pytest.importorskip("mpmath")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from position_error import max_error
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    quoted = re.search(r"d = 256: (\S+) at 10, (\S+) at 10⁷, (\S+) at 10⁹", README)
    assert quoted is not None
    measured = [f"{max_error(t, 256, 10000.0):.1e}".replace("e-0", "e-") for t in (10, 10**7, 10**9)]
    assert measured == list(quoted.groups())
