"""Property-based fuzzing of the public API: finite results of the documented shape, or a named error.

For each entry point, hypothesis draws every argument either from values that make sense or
from a pool of bad ones (NaN, ±inf, huge, negative, zero, empty, wrong types and dtypes).
Every call must either return finite values of the documented shape, or raise ``ValueError``
/ ``TypeError`` whose message names a parameter that received a bad value (any of the call's
parameters when all looked sensible: then the combination is what is refused).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import posenc
from posenc import analysis, spectrum
from posenc.nn import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding

BAD_NUMBERS = [0, -1, -3, 0.5, 2.5, float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 2**53 + 1, 2**63,
               1e-300, True, False, "3", None, [], np.float64("nan")]
ANY_BAD = st.sampled_from(BAD_NUMBERS)
BAD_VALUES = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 2.0**60, -5.0, 0.5]


@dataclass(frozen=True)
class Arg:
    """An argument: a strategy of sensible values and one of bad ones."""

    good: st.SearchStrategy
    bad: st.SearchStrategy = ANY_BAD


def _arrays(shape: st.SearchStrategy, *, elements: st.SearchStrategy | None = None) -> st.SearchStrategy:
    elements = elements or st.floats(-10, 10)
    return shape.flatmap(lambda s: st.lists(elements, min_size=int(np.prod(s)), max_size=int(np.prod(s))).map(
        lambda v, s=s: np.asarray(v, dtype=np.float64).reshape(s)))


def _bad_arrays(ndim: int) -> st.SearchStrategy:
    shapes = st.one_of(st.just((0,) * ndim), st.tuples(*[st.integers(1, 4)] * max(ndim, 1)),
                       st.tuples(*[st.integers(1, 3)] * (ndim + 1)), st.just(()))
    poisoned = st.tuples(shapes, st.sampled_from(BAD_VALUES)).map(
        lambda sv: np.full(sv[0], sv[1]) if np.prod(sv[0]) else np.zeros(sv[0]))
    return st.one_of(poisoned, st.sampled_from(["abc", None, 3.5, [[1, 2], [3]], np.array(["a", "b"])]))


POSITIONS = Arg(st.one_of(st.integers(1, 12), _arrays(st.tuples(st.integers(1, 12)),
                                                      elements=st.integers(0, 1000).map(float))),
                _bad_arrays(1) | st.sampled_from(BAD_NUMBERS))
DIM = Arg(st.integers(1, 16))
BASE = Arg(st.floats(1.5, 1e6))
TABLE = Arg(_arrays(st.tuples(st.integers(2, 8), st.integers(1, 6))), _bad_arrays(2))
SQUARE = Arg(st.integers(2, 8).flatmap(lambda n: _arrays(st.just((n, n)))), _bad_arrays(2))
FREQS = Arg(_arrays(st.tuples(st.integers(1, 6)), elements=st.floats(1e-4, 3.0)), _bad_arrays(1))
DISTANCES = Arg(st.one_of(st.integers(1, 10), _arrays(st.tuples(st.integers(1, 6)), elements=st.floats(0, 50))),
                _bad_arrays(1) | st.sampled_from(BAD_NUMBERS))


def _n(positions: Any) -> int:
    return positions if isinstance(positions, int) else len(positions)


@dataclass(frozen=True)
class Target:
    """``call(**kwargs)`` with ``args``; ``shape(kwargs)`` is the documented result shape (None: a number)."""

    call: Callable[..., Any]
    args: dict[str, Arg]
    shape: Callable[[dict[str, Any]], tuple[int, ...] | None]


def _module(factory: Callable[[int], torch.nn.Module]):
    def call(d_model, x, positions=None):
        out = factory(d_model)(x, positions=positions)
        return out.detach().to(torch.float64).numpy()

    return call


_GOOD_X = st.tuples(st.integers(0, 3), st.integers(0, 6), st.sampled_from([torch.float32, torch.float64,
                                                                             torch.bfloat16, torch.float16]))
_BAD_X = st.one_of(
    st.tuples(st.integers(0, 3), st.integers(0, 6), st.sampled_from([3, 5]), st.just(torch.float32)),  # wrong d
    st.tuples(st.integers(0, 3), st.integers(0, 6), st.just(4), st.sampled_from([torch.int64, torch.bool])),
).map(lambda t: torch.zeros(t[:3], dtype=t[3])) | st.sampled_from([None, 3.0, np.zeros((2, 3, 4)), torch.zeros(3, 4)])
MODULE_ARGS = {"d_model": Arg(st.just(4)), "x": Arg(_GOOD_X.map(lambda t: torch.randn(t[0], t[1], 4).to(t[2])), _BAD_X)}
def MODULE_SHAPE(k: dict[str, Any]) -> tuple[int, ...]:
    return tuple(k["x"].shape)

TARGETS = {
    "sinusoidal": Target(lambda positions, dim, base: posenc.sinusoidal(positions, dim, base=base),
                         {"positions": POSITIONS, "dim": DIM, "base": BASE}, lambda k: (_n(k["positions"]), k["dim"])),
    "dft": Target(lambda positions, dim: posenc.dft(positions, dim, alias=True),
                  {"positions": POSITIONS, "dim": DIM}, lambda k: (_n(k["positions"]), k["dim"])),
    "geometric": Target(lambda dim, base: spectrum.geometric(dim, base), {"dim": DIM, "base": BASE},
                        lambda k: ((k["dim"] + 1) // 2,)),
    "power_law": Target(lambda dim, alpha: spectrum.power_law(dim, alpha), {"dim": DIM, "alpha": Arg(st.floats(0.5, 4))},
                        lambda k: ((k["dim"] + 1) // 2,)),
    "alibi_slopes": Target(lambda n_heads: spectrum.alibi_slopes(n_heads), {"n_heads": Arg(st.integers(1, 16))},
                           lambda k: (k["n_heads"],)),
    "gram": Target(lambda E: analysis.gram(E), {"E": TABLE}, lambda k: (k["E"].shape[0],) * 2),
    "min_pairwise_distance": Target(lambda E: analysis.min_pairwise_distance(E), {"E": TABLE}, lambda k: None),
    "toeplitz_deviation": Target(lambda M: analysis.toeplitz_deviation(M), {"M": SQUARE}, lambda k: None),
    "linear_shift_residual": Target(lambda E, k: analysis.linear_shift_residual(E, k),
                                    {"E": TABLE, "k": Arg(st.integers(1, 3))}, lambda k: None),
    "frequency_kernel": Target(lambda frequencies, distances: analysis.frequency_kernel(frequencies, distances),
                               {"frequencies": FREQS, "distances": DISTANCES},
                               lambda k: (_n(k["distances"]),)),
    "shift_operator": Target(lambda k, dim: analysis.shift_operator(k, dim=dim),
                             {"k": Arg(st.integers(-5, 5)), "dim": DIM}, lambda k: (k["dim"], k["dim"])),
    "SinusoidalEncoding": Target(_module(lambda d: SinusoidalEncoding(d)), MODULE_ARGS, MODULE_SHAPE),
    "DFTEncoding": Target(_module(lambda d: DFTEncoding(d, alias=True)), MODULE_ARGS, MODULE_SHAPE),
    "LearnedEncoding": Target(_module(lambda d: LearnedEncoding(d, max_len=8)), MODULE_ARGS, MODULE_SHAPE),
    "SinusoidalEncoding-concat": Target(_module(lambda d: SinusoidalEncoding(d, mode="concat", dim=3)), MODULE_ARGS,
                                        lambda k: (*k["x"].shape[:2], 7)),
    "LearnableFrequencyEncoding": Target(_module(lambda d: LearnableFrequencyEncoding(d)), MODULE_ARGS, MODULE_SHAPE),
    **{f"{name}-positions": Target(
        lambda positions, factory=factory: _module(factory)(4, torch.zeros(2, _n_or(positions), 4), _tensor(positions)),
        {"positions": POSITIONS}, lambda k: (2, _n(k["positions"]), 4))
       for name, factory in {"SinusoidalEncoding": lambda d: SinusoidalEncoding(d),
                             "DFTEncoding": lambda d: DFTEncoding(d, alias=True),
                             "LearnedEncoding": lambda d: LearnedEncoding(d, max_len=2000)}.items()},
}


def _n_or(positions: Any) -> int:
    try:
        return len(positions) if not isinstance(positions, int) else positions
    except TypeError:
        return 1


def _tensor(positions: Any) -> Any:
    if isinstance(positions, int):
        return torch.arange(positions)
    if isinstance(positions, np.ndarray) and positions.dtype.kind in "fiub":
        return torch.from_numpy(positions)
    return positions


@st.composite
def _call(draw, target: Target) -> tuple[dict[str, Any], set[str]]:
    kwargs, bad = {}, set()
    for name, arg in target.args.items():
        if draw(st.integers(0, 3)) == 0:
            kwargs[name], _ = draw(arg.bad), bad.add(name)
        else:
            kwargs[name] = draw(arg.good)
    return kwargs, bad


def _finite(result: Any) -> bool:
    parts = result if isinstance(result, tuple) else (result,)
    return all(np.isfinite(np.asarray(p, dtype=np.float64)).all() for p in parts)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_public_api_returns_finite_documented_shapes_or_names_the_bad_parameter(name):
    target = TARGETS[name]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_call(target))
    def check(drawn):
        kwargs, bad = drawn
        try:
            result = target.call(**kwargs)
        except (ValueError, TypeError) as exc:
            message = str(exc)
            suspects = bad or set(kwargs)
            assert any(s in message for s in suspects), f"{name}({kwargs!r}) raised {exc!r}, naming none of {suspects}"
            return
        assert _finite(result), f"{name}({kwargs!r}) returned non-finite values"
        expected = target.shape(kwargs)
        if expected is not None:
            assert np.shape(result) == expected, f"{name}({kwargs!r}) returned shape {np.shape(result)}"
        else:
            assert np.ndim(result) == 0

    check()
