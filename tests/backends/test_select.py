"""The selection core of posenc.backends: a backend is chosen by its declared setting, then its own test."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from posenc.backends import Backend, Environment, select

CPU = Environment(
    device="cpu", dtype=torch.float32, compiling=False, exporting=False, native=True, triton=False
)


def _b(name: str, **kw: object) -> Backend[int]:
    return Backend(name=name, apply=lambda: name, **kw)  # type: ignore[arg-type]


REFERENCE = _b("reference", compiled=True, exported=True)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (CPU, "loop"),
        (dataclasses.replace(CPU, native=False), "reference"),
        (dataclasses.replace(CPU, dtype=torch.float16), "reference"),
        (dataclasses.replace(CPU, device="cuda", triton=True), "triton"),
        (dataclasses.replace(CPU, compiling=True), "compiled"),
        (dataclasses.replace(CPU, compiling=True, exporting=True), "reference"),
    ],
)
def test_first_admitted_backend_is_chosen(env: Environment, expected: str) -> None:
    table = [
        _b("compiled", eager=False, compiled=True),
        _b("loop", devices=frozenset({"cpu"}), dtypes=frozenset({torch.float32}), needs="native"),
        _b("triton", devices=frozenset({"cuda"}), needs="triton"),
        REFERENCE,
    ]
    assert select(table, 0, env).name == expected


def test_call_specific_support_is_asked_last() -> None:
    table = [_b("even only", supports=lambda n: n % 2 == 0), REFERENCE]
    assert select(table, 2, CPU).name == "even only"
    assert select(table, 3, CPU).name == "reference"


def test_a_table_without_a_reference_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="no backend"):
        select([_b("cuda only", devices=frozenset({"cuda"}))], 0, CPU)


def test_environment_of_a_cpu_tensor() -> None:
    env = Environment.of(torch.zeros(2))
    assert (env.device, env.dtype, env.compiling, env.exporting, env.triton) == (
        "cpu", torch.float32, False, False, False,
    )  # fmt: skip


def test_only_select_reads_the_compile_state_and_the_kernel_switches():
    """The one selection site: no module of the torch layer outside ``posenc.backends``' core tests the
    compile/export state or whether the compiled loops are loaded (``nn/input.py`` skips a value check of
    its own while tracing, which chooses no backend; ``tables.py`` is the NumPy core, which may not import
    the torch backends)."""
    import re
    from pathlib import Path

    import posenc

    root = Path(posenc.__file__).parent
    allowed = {"backends/__init__.py", "nn/input.py", "tables.py", "_native.py", "_gpu.py"}
    pattern = re.compile(r"is_compiling\(\)|is_exporting\(\)|_native\.kernels is|POSENC_(NATIVE|TRITON)")
    found = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if str(p.relative_to(root)) not in allowed and pattern.search(p.read_text(encoding="utf-8"))
    )
    assert found == []


def test_the_rotary_module_keeps_the_module_and_its_glue_only():
    """``nn/rotary.py`` holds the module, the reference's seams and the Hugging Face/scaling glue; the rotations'
    backends live in ``posenc.backends`` (at most 600 lines)."""
    from pathlib import Path

    import posenc

    lines = (Path(posenc.__file__).parent / "nn" / "rotary.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 600, lines
