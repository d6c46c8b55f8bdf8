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
