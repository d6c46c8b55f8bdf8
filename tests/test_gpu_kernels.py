"""posenc's Triton kernels (posenc._gpu_kernels) under Triton's CPU interpreter, where Triton is installed.

On a CUDA machine ``test_cuda.py`` runs them compiled on the GPU; here the same kernels run as NumPy
code, so their indexing, masks and layouts are checked on any machine with Triton.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is not installed (it comes with PyTorch's CUDA wheels)")
torch = pytest.importorskip("torch")
if torch.cuda.is_available():
    pytest.skip("a CUDA device runs the compiled kernels (tests/test_cuda.py)", allow_module_level=True)

REL = {"float32": 2.0**-22, "float64": 2.0**-50, "bfloat16": 2.0**-7}
"""The error of one conversion to the dtype plus the float32/float64 work, relative to the terms' size: half
an ulp, or for bfloat16 one ulp (the interpreter converts float32 to bfloat16 by truncation, where the GPU
rounds to nearest)."""


@pytest.fixture(scope="module")
def errors() -> dict[str, dict[str, float]]:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    script = Path(__file__).with_name("triton_interpreter.py")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result: dict[str, dict[str, float]] = json.loads(done.stdout)
    return result


def test_rotary_kernel_under_the_interpreter(errors):
    rotary = errors["rotary"]
    assert len(rotary) == 2 * 3 * 3 * 2  # layouts × dtypes × (d, r) × table forms
    for case, err in rotary.items():
        assert err <= REL[case.split()[1]], (case, err)


def test_one_launch_qk_kernel_under_the_interpreter(errors):
    rotate_qk = errors["rotate_qk"]
    assert len(rotate_qk) == 2 * 3 * 2 * 3 * 2  # layouts × dtypes × (d, r) × positions × direction
    for case, err in rotate_qk.items():
        assert err <= REL[case.split()[1]], (case, err)


def test_rotary_module_through_the_one_launch_operator_under_the_interpreter(errors):
    module = errors["module"]  # forward and both gradients against the table path, float64
    assert sorted(module) == sorted(
        f"{layout} {form}"
        for layout in ("half_split", "adjacent")
        for form in ("default", "offset", "[s] int32", "[b, s] int64")
    )
    for case, err in module.items():
        assert err <= 1e-15, (case, err)


def test_table_kernel_under_the_interpreter(errors):
    tables = errors["tables"]
    # interleaved_cos_first with an odd dim ends in a sine: a layout the kernel does not write
    expected = [f"{layout} {dim}" for layout in ("interleaved", "split") for dim in (6, 7, 130, 129)]
    assert sorted(tables) == sorted([*expected, "interleaved_cos_first 6", "interleaved_cos_first 130"])
    for case, err in tables.items():
        assert err <= 3.1e-8, (case, err)
