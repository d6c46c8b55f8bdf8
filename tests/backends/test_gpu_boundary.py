"""The checked boundary of the Triton kernels (posenc._gpu_checks), fuzzed on CPU tensors: needs neither
Triton nor a GPU, so it runs in CI. Every valid call of the launchers' shape passes; every mutation of
one argument — a size off by one or two, a wrong dtype, a stride, an overlap, another device, a bad
layout or count — is a ValueError/TypeError that names the argument, before any kernel could run."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from posenc import _gpu_checks as checks

NAMED = re.compile(
    r"^(x|out|cos|sin|r|layout|q|k|q_out|k_out|theta|q_positions|k_positions|offsets|fine sin|fine cos|"
    r"coarse sin|coarse cos)\b"
)


def rotate_args(n0: int, n1: int, seq: int, d: int, r: int, paired: bool, dtype: torch.dtype) -> dict:
    work = torch.float64 if dtype == torch.float64 else torch.float32
    cols = r // 2 if paired else r
    return {
        "x": torch.randn(n0, n1, seq, d).to(dtype),
        "out": torch.empty(n0, n1, seq, d, dtype=dtype),
        "c": torch.randn(seq, cols, dtype=work),
        "s": torch.randn(seq, cols, dtype=work),
        "layout": "half_split",
        "r": r,
        "paired": paired,
    }


def qk_args(b: int, h: int, hk: int, sq: int, sk: int, d: int, r: int, n: int, with_positions: bool) -> dict:
    table = torch.randn(n, r)
    return {
        "q": torch.randn(b, h, sq, d),
        "k": torch.randn(b, hk, sk, d),
        "q_out": torch.empty(b, h, sq, d),
        "k_out": torch.empty(b, hk, sk, d),
        "positions": (torch.arange(sq)[None].expand(b, sq), torch.arange(sk)[None])
        if with_positions
        else None,
        "offsets": (0, 0),
        "tables": (table[:, ::2], table[:, 1::2]),  # the adjacent layout's strided pair values
        "theta": torch.rand(r // 2 + 1, dtype=torch.float64),
        "layout": "adjacent",
        "r": r,
    }


def waves_args(n: int, f: int, columns: int) -> dict:
    b = max(1, int(n**0.5))
    return {
        "out": torch.empty(n, columns),
        "fine": (torch.randn(b, f, dtype=torch.float64), torch.randn(b, f, dtype=torch.float64)),
        "coarse": (
            torch.randn(-(-n // b), f, dtype=torch.float64),
            torch.randn(-(-n // b), f, dtype=torch.float64),
        ),
        "layout": 0,
        "layouts": 3,
    }


def refused(check, args: dict) -> None:
    with pytest.raises((ValueError, TypeError)) as error:
        check(**args)
    assert NAMED.match(str(error.value)), str(error.value)


ROTATE_MUTATIONS = {
    "out one row short": lambda a: {**a, "out": a["out"][:, :, :-1]},
    "out of another dtype": lambda a: {
        **a,
        "out": a["out"].double() if a["x"].dtype != torch.float64 else a["out"].float(),
    },
    "tables one row short": lambda a: {**a, "c": a["c"][:-1], "s": a["s"][:-1]},
    "tables one column over": lambda a: {
        **a,
        "c": torch.cat([a["c"], a["c"][:, :1]], 1),
        "s": torch.cat([a["s"], a["s"][:, :1]], 1),
    },
    "sin of another shape": lambda a: {**a, "s": a["s"][:, :-1]},
    "tables in bfloat16": lambda a: {**a, "c": a["c"].bfloat16(), "s": a["s"].bfloat16()},
    "r odd": lambda a: {**a, "r": a["r"] - 1},
    "r beyond d": lambda a: {**a, "r": a["x"].shape[-1] + 2},
    "x strided rows": lambda a: {
        **a,
        "x": torch.randn(*a["x"].shape[:-1], 2 * a["x"].shape[-1]).to(a["x"].dtype)[..., ::2],
    },
    "out broadcast": lambda a: (
        {**a, "out": torch.empty(1, *a["out"].shape[1:], dtype=a["out"].dtype).expand(3, *a["out"].shape[1:])}
        if a["x"].shape[0] == 3
        else {**a, "out": a["out"][:, :, :, :-1]}
    ),
    "out is x": lambda a: {**a, "out": a["x"]},
    "x 3-D": lambda a: {**a, "x": a["x"][0]},
    "bad layout": lambda a: {**a, "layout": "interleaved"},
    "x on the meta device": lambda a: {**a, "x": a["x"].to("meta")},
    "x a list": lambda a: {**a, "x": a["x"].tolist()},
}


@given(
    n0=st.integers(1, 3),
    n1=st.integers(1, 3),
    seq=st.integers(2, 9),
    pairs=st.integers(1, 6),
    extra=st.integers(0, 3),
    paired=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
    mutation=st.sampled_from(sorted(ROTATE_MUTATIONS)),
)
def test_rotate_accepts_valid_calls_and_refuses_every_mutation_naming_the_argument(
    n0, n1, seq, pairs, extra, paired, dtype, mutation
):
    args = rotate_args(n0, n1, seq, 2 * pairs + extra, 2 * pairs, paired, dtype)
    checks.check_rotate(**args)
    refused(checks.check_rotate, ROTATE_MUTATIONS[mutation](args))


QK_MUTATIONS = {
    "q_out one row short": lambda a: {**a, "q_out": a["q_out"][:, :, :-1]},
    "k_out of k's other shape": lambda a: (
        {**a, "k_out": a["q_out"]} if a["q"].shape != a["k"].shape else {**a, "k_out": a["k_out"][..., :-1]}
    ),
    "k of another batch": lambda a: {
        **a,
        "k": torch.randn(a["k"].shape[0] + 1, *a["k"].shape[1:]),
        "k_out": torch.empty(a["k"].shape[0] + 1, *a["k"].shape[1:]),
    },
    "k of another dtype": lambda a: {**a, "k": a["k"].double(), "k_out": a["k_out"].double()},
    "theta too short": lambda a: {**a, "theta": a["theta"][:-1]},
    "theta float32": lambda a: {**a, "theta": a["theta"].float()},
    "tables of too few pairs": lambda a: {**a, "tables": (a["tables"][0][:, :-1], a["tables"][1][:, :-1])},
    "tables float64 beside float32": lambda a: {
        **a,
        "tables": (a["tables"][0].double(), a["tables"][1].double()),
    },
    "r beyond d": lambda a: {**a, "r": a["q"].shape[-1] + 2},
    "q_out is k": lambda a: (
        {**a, "q_out": a["k"]} if a["q"].shape == a["k"].shape else {**a, "q_out": a["q"]}
    ),
    "positions of one row short": lambda a: {
        **a,
        "positions": (torch.arange(a["q"].shape[2] - 1)[None], torch.arange(a["k"].shape[2])[None]),
    },
    "positions float": lambda a: {
        **a,
        "positions": (
            torch.arange(a["q"].shape[2])[None].float(),
            torch.arange(a["k"].shape[2])[None].float(),
        ),
    },
    "positions int16": lambda a: {
        **a,
        "positions": (
            torch.arange(a["q"].shape[2], dtype=torch.int16)[None],
            torch.arange(a["k"].shape[2], dtype=torch.int16)[None],
        ),
    },
    "positions of a wrong batch": lambda a: {
        **a,
        "positions": (
            torch.zeros(a["q"].shape[0] + 1, a["q"].shape[2], dtype=torch.long),
            torch.arange(a["k"].shape[2])[None],
        ),
    },
    "negative offset": lambda a: {**a, "positions": None, "offsets": (-1, 0)},
    "bad layout": lambda a: {**a, "layout": "split"},
}


@given(
    b=st.integers(1, 3),
    h=st.integers(1, 4),
    hk=st.integers(1, 4),
    sq=st.integers(2, 7),
    sk=st.integers(2, 7),
    pairs=st.integers(1, 5),
    extra=st.integers(0, 2),
    n=st.integers(1, 12),
    with_positions=st.booleans(),
    mutation=st.sampled_from(sorted(QK_MUTATIONS)),
)
def test_rotate_qk_accepts_valid_calls_and_refuses_every_mutation_naming_the_argument(
    b, h, hk, sq, sk, pairs, extra, n, with_positions, mutation
):
    args = qk_args(b, h, hk, sq, sk, 2 * pairs + extra, 2 * pairs, n, with_positions)
    checks.check_rotate_qk(**args)
    refused(checks.check_rotate_qk, QK_MUTATIONS[mutation](args))


WAVES_MUTATIONS = {
    "out wider than 2f": lambda a: {
        **a,
        "out": torch.empty(a["out"].shape[0], 2 * a["fine"][0].shape[1] + 1),
    },
    "coarse one row short": lambda a: {**a, "coarse": (a["coarse"][0][:-1], a["coarse"][1][:-1])},
    "fine cos of another shape": lambda a: {**a, "fine": (a["fine"][0], a["fine"][1][:, :-1])},
    "fine in float32": lambda a: {**a, "fine": (a["fine"][0].float(), a["fine"][1].float())},
    "coarse transposed": lambda a: (
        {**a, "coarse": (a["coarse"][0].T.contiguous().T, a["coarse"][1])}
        if min(a["coarse"][0].shape) > 1
        else {**a, "coarse": (a["coarse"][0][:-1], a["coarse"][1])}
    ),
    "out 1-D": lambda a: {**a, "out": a["out"].reshape(-1)},
    "layout out of range": lambda a: {**a, "layout": 3},
}


@given(
    n=st.integers(2, 40),
    f=st.integers(1, 8),
    cut=st.integers(0, 1),
    mutation=st.sampled_from(sorted(WAVES_MUTATIONS)),
)
def test_waves_accepts_valid_calls_and_refuses_every_mutation_naming_the_argument(n, f, cut, mutation):
    args = waves_args(n, f, 2 * f - cut)
    checks.check_waves(**args)
    refused(checks.check_waves, WAVES_MUTATIONS[mutation](args))


STORAGE_ONLY = {"q_out is k"}
"""Mutations only the storage checks see (an output overlapping an input): the signature check leaves those
to its caller, whose outputs are fresh allocations."""


@given(
    b=st.integers(1, 3),
    h=st.integers(1, 4),
    hk=st.integers(1, 4),
    sq=st.integers(2, 7),
    sk=st.integers(2, 7),
    pairs=st.integers(1, 5),
    extra=st.integers(0, 2),
    n=st.integers(1, 12),
    with_positions=st.booleans(),
    mutation=st.sampled_from(sorted(set(QK_MUTATIONS) - STORAGE_ONLY)),
)
def test_rotate_qk_signature_check_refuses_every_metadata_mutation_naming_the_argument(
    b, h, hk, sq, sk, pairs, extra, n, with_positions, mutation
):
    args = qk_args(b, h, hk, sq, sk, 2 * pairs + extra, 2 * pairs, n, with_positions)
    checks.check_rotate_qk_signature(**args)
    checks.check_rotate_qk_signature(**args)  # now a known signature
    refused(checks.check_rotate_qk_signature, QK_MUTATIONS[mutation](args))


def test_rotate_qk_signature_check_runs_once_per_signature_but_checks_offsets_every_call(monkeypatch):
    calls = []
    full = checks.check_rotate_qk
    monkeypatch.setattr(checks, "check_rotate_qk", lambda *a, **kw: calls.append(kw) or full(*a, **kw))
    monkeypatch.setattr(checks, "_SIGNATURES", set())
    args = qk_args(2, 4, 2, 3, 5, 8, 8, 16, False)
    for offset in (0, 7, 100):
        checks.check_rotate_qk_signature(**{**args, "offsets": (offset, offset)})
    assert calls == [{"storage": False}]  # the metadata checks once, the storage checks never
    refused(checks.check_rotate_qk_signature, {**args, "offsets": (-1, 0)})
    refused(checks.check_rotate_qk_signature, {**args, "offsets": (0, True)})
    bad = {**args, "r": 10}  # beyond d: refused, and so never remembered
    refused(checks.check_rotate_qk_signature, bad)
    refused(checks.check_rotate_qk_signature, bad)
    other = qk_args(2, 4, 2, 3, 6, 8, 8, 16, True)  # another signature: checked again
    checks.check_rotate_qk_signature(**other)
    assert len(calls) == 4


@given(
    n0=st.integers(1, 3),
    n1=st.integers(1, 3),
    seq=st.integers(2, 9),
    pairs=st.integers(1, 6),
    extra=st.integers(0, 3),
    paired=st.booleans(),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
    mutation=st.sampled_from(sorted(set(ROTATE_MUTATIONS) - {"out is x"})),
)
def test_rotate_signature_check_refuses_every_metadata_mutation_naming_the_argument(
    n0, n1, seq, pairs, extra, paired, dtype, mutation
):
    args = rotate_args(n0, n1, seq, 2 * pairs + extra, 2 * pairs, paired, dtype)
    checks.check_rotate_signature(**args)
    checks.check_rotate_signature(**args)
    refused(checks.check_rotate_signature, ROTATE_MUTATIONS[mutation](args))


@given(
    n=st.integers(2, 40),
    f=st.integers(1, 8),
    cut=st.integers(0, 1),
    mutation=st.sampled_from(sorted(WAVES_MUTATIONS)),
)
def test_waves_signature_check_refuses_every_metadata_mutation_naming_the_argument(n, f, cut, mutation):
    args = waves_args(n, f, 2 * f - cut)
    checks.check_waves_signature(**args)
    checks.check_waves_signature(**args)
    refused(checks.check_waves_signature, WAVES_MUTATIONS[mutation](args))


def test_rotate_and_waves_signature_checks_run_once_per_signature(monkeypatch):
    calls = []
    for name in ("check_rotate", "check_waves"):
        full = getattr(checks, name)
        monkeypatch.setattr(checks, name, lambda *a, _f=full, _n=name, **kw: calls.append(_n) or _f(*a, **kw))
    monkeypatch.setattr(checks, "_SIGNATURES", set())
    rotate, waves = rotate_args(2, 3, 5, 8, 8, True, torch.float32), waves_args(30, 4, 8)
    for _ in range(3):
        checks.check_rotate_signature(**rotate)
        checks.check_waves_signature(**waves)
    assert calls == ["check_rotate", "check_waves"]
    checks.check_rotate_signature(
        **{**rotate, "paired": False, "c": torch.randn(5, 8), "s": torch.randn(5, 8)}
    )
    assert calls == ["check_rotate", "check_waves", "check_rotate"]
