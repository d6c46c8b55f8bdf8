"""The compiled form of the q+k rotation kernel, read without a GPU (``benchmarks/kernel_static.py``): for
bfloat16 and float32 on the Hugging Face layout (``half_split``), compiled for Hopper (``sm_90a``) by
Triton with the ``ptxas`` of its wheel, every position form fits in 96 registers without spilling, and
its queries and keys move 16 bytes per access."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="Triton is not installed (pip install --no-deps triton: the CPU wheel)")
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("TRITON_INTERPRET=1 replaces compilation by the interpreter", allow_module_level=True)

_spec = importlib.util.spec_from_file_location(
    "kernel_static", Path(__file__).parents[2] / "benchmarks" / "kernel_static.py"
)
assert _spec is not None and _spec.loader is not None
kernel_static = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("kernel_static", kernel_static)  # its dataclass looks its module up
_spec.loader.exec_module(kernel_static)

if kernel_static.ptxas() is None:
    pytest.skip("the ptxas bundled with Triton is absent or does not run here", allow_module_level=True)

MAX_REGISTERS = 96
"""At most 96 registers a thread: with 4 warps a program, 5 programs (20 warps) per multiprocessor."""


@pytest.fixture(scope="module")
def reports():
    return kernel_static.measure({"rotate_qk"}, ["bfloat16", "float32"], ["half_split"])


def test_every_position_form_compiles_to_the_one_launch_kernel_and_the_far_rows(reports):
    cases = {(r.kernel, r.case) for r in reports}
    for dtype in ("bfloat16", "float32"):
        assert ("_rotate_qk_kernel", f"{dtype} half_split int offsets") in cases
        for form in ("[b, s] positions", "decode [b, 1] positions"):
            # tensor positions: the host cannot tell which lie beyond the cache, so the far rows' launch follows
            assert ("_rotate_qk_kernel", f"{dtype} half_split {form}") in cases
            assert ("_rotate_qk_far_kernel", f"{dtype} half_split {form}") in cases
    assert len(reports) == 2 * (1 + 2 + 2)


def test_the_hot_kernel_fits_in_96_registers_without_spilling(reports):
    for r in reports:
        if r.kernel == "_rotate_qk_kernel":
            assert r.registers <= MAX_REGISTERS, (r.case, r.registers)
            assert (r.spill_stores, r.spill_loads, r.stack) == (0, 0, 0), r


def test_the_far_rows_kernel_does_not_spill(reports):
    for r in reports:
        assert (r.spill_stores, r.spill_loads) == (0, 0), (r.kernel, r.case)


def test_queries_and_keys_move_16_bytes_per_access(reports):
    """The hot kernel stores nothing but q_out and k_out: every store 16 bytes wide; each stored vector is
    the rotation of a loaded vector of the same shape and layout, so at least as many 16-byte loads; and in
    the int-offset form (no position loads) no global access narrower than 8 bytes (the pair values of one
    row, shared by the heads of a tile, may be read 8 bytes at a time)."""
    for r in reports:
        if r.kernel != "_rotate_qk_kernel":
            continue
        assert set(r.stores) == {16}, (r.case, r.stores)
        assert r.loads[16] >= r.stores[16], (r.case, r.loads, r.stores)
        if "int offsets" in r.case:
            assert min(r.loads) >= 8, (r.case, r.loads)


def test_the_far_rows_kernel_keeps_its_position_assertion_and_the_hot_kernel_has_none(reports):
    """The far-rows kernel reads every tensor position and asserts ``|t| < 2^53`` (compiled with
    ``debug=True``: without it Triton drops ``tl.device_assert``); the hot kernel carries no assertion."""
    for r in reports:
        if r.kernel == "_rotate_qk_far_kernel":
            assert r.asserts >= 1, r.case
        else:
            assert r.asserts == 0, r.case
