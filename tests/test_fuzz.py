"""Property-based fuzzing of the public API: finite results of the documented shape, or a named error.

For each entry point, hypothesis draws every argument either from values that make sense or
from a pool of bad ones (NaN, ±inf, huge, negative, zero, empty, wrong types and dtypes).
Every call must either return finite values of the documented shape, or raise ``ValueError``
/ ``TypeError`` whose message names one of the call's parameters (a bad pool also holds valid
values, and sensible values can be refused in combination, so the test cannot tell which).
"""

from __future__ import annotations

import dataclasses
import json
import math
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
from posenc.cli import main
from posenc.nn import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding
from posenc.nn.multiaxis import MultiAxisRotary

BAD_NUMBERS = [
    0,
    -1,
    -3,
    0.5,
    2.5,
    float("nan"),
    float("inf"),
    -float("inf"),
    1e308,
    -1e308,
    2**53 + 1,
    2**63,
    1e-300,
    True,
    False,
    "3",
    None,
    [],
    np.float64("nan"),
]
ANY_BAD = st.sampled_from(BAD_NUMBERS)
BAD_VALUES = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 2.0**60, -5.0, 0.5]


@dataclass(frozen=True)
class Arg:
    """An argument: a strategy of sensible values and one of bad ones."""

    good: st.SearchStrategy
    bad: st.SearchStrategy = ANY_BAD


def _arrays(shape: st.SearchStrategy, *, elements: st.SearchStrategy | None = None) -> st.SearchStrategy:
    elements = st.floats(-10, 10) if elements is None else elements
    return shape.flatmap(
        lambda s: st.lists(elements, min_size=int(np.prod(s)), max_size=int(np.prod(s))).map(
            lambda v, s=s: np.asarray(v, dtype=np.float64).reshape(s)
        )
    )


def _bad_arrays(ndim: int) -> st.SearchStrategy:
    shapes = st.one_of(
        st.just((0,) * ndim),
        st.tuples(*[st.integers(1, 4)] * max(ndim, 1)),
        st.tuples(*[st.integers(1, 3)] * (ndim + 1)),
        st.just(()),
    )
    poisoned = st.tuples(shapes, st.sampled_from(BAD_VALUES)).map(
        lambda sv: np.full(sv[0], sv[1]) if np.prod(sv[0]) else np.zeros(sv[0])
    )
    return st.one_of(poisoned, st.sampled_from(["abc", None, 3.5, [[1, 2], [3]], np.array(["a", "b"])]))


POSITIONS = Arg(
    st.one_of(
        st.integers(1, 12), _arrays(st.tuples(st.integers(1, 12)), elements=st.integers(0, 1000).map(float))
    ),
    _bad_arrays(1) | st.sampled_from(BAD_NUMBERS),
)
DIM = Arg(st.integers(1, 16))
BASE = Arg(st.floats(1.5, 1e6))
TABLE = Arg(_arrays(st.tuples(st.integers(2, 8), st.integers(1, 6))), _bad_arrays(2))
SQUARE = Arg(st.integers(2, 8).flatmap(lambda n: _arrays(st.just((n, n)))), _bad_arrays(2))
FREQS = Arg(_arrays(st.tuples(st.integers(1, 6)), elements=st.floats(1e-4, 3.0)), _bad_arrays(1))
DISTANCES = Arg(
    st.one_of(st.integers(1, 10), _arrays(st.tuples(st.integers(1, 6)), elements=st.floats(0, 50))),
    _bad_arrays(1) | st.sampled_from(BAD_NUMBERS),
)


def _n_or(positions: Any) -> int:
    """The number of positions ``positions`` stands for (1 for what has no length)."""
    try:
        return len(positions) if not isinstance(positions, int) else positions
    except TypeError:
        return 1


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


_GOOD_X = st.tuples(
    st.integers(0, 3),
    st.integers(0, 6),
    st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.float16]),
)
_BAD_X = (
    st.one_of(
        st.tuples(
            st.integers(0, 3), st.integers(0, 6), st.sampled_from([3, 5]), st.just(torch.float32)
        ),  # wrong d
        st.tuples(
            st.integers(0, 3), st.integers(0, 6), st.just(4), st.sampled_from([torch.int64, torch.bool])
        ),
    ).map(lambda t: torch.zeros(t[:3], dtype=t[3]))
    | st.sampled_from([None, 3.0, np.zeros((2, 3, 4)), torch.zeros(3, 4)])
)
MODULE_ARGS = {
    "d_model": Arg(st.just(4)),
    "x": Arg(_GOOD_X.map(lambda t: torch.randn(t[0], t[1], 4).to(t[2])), _BAD_X),
}


def MODULE_SHAPE(k: dict[str, Any]) -> tuple[int, ...]:
    return tuple(k["x"].shape)


TORCH_POSITION_DTYPES = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float32,
    torch.float64,
]


def _axes_positions(
    shape: tuple[int, ...], dtype: torch.dtype, values: st.SearchStrategy
) -> st.SearchStrategy:
    n = int(np.prod(shape))
    return st.lists(values, min_size=n, max_size=n).map(
        lambda v: torch.tensor(v, dtype=torch.float64).reshape(shape).to(dtype)
    )


_AXES_SHAPES = st.one_of(
    st.tuples(st.just(3), st.integers(1, 6)), st.tuples(st.just(3), st.integers(1, 3), st.integers(1, 6))
)
MULTIAXIS_POSITIONS = Arg(
    st.tuples(_AXES_SHAPES, st.sampled_from(TORCH_POSITION_DTYPES)).flatmap(
        lambda sd: _axes_positions(*sd, st.integers(0, 127))
    ),
    st.one_of(
        st.tuples(
            st.sampled_from([(2, 4), (4, 4), (3,), (4,), (1, 3, 4), (3, 2, 2, 4), (0, 4)]),
            st.sampled_from(TORCH_POSITION_DTYPES),
        ).flatmap(lambda sd: _axes_positions(*sd, st.integers(0, 127))),  # wrong number of axes
        st.tuples(
            _AXES_SHAPES, st.sampled_from([torch.float16, torch.bfloat16, torch.bool, torch.complex64])
        ).flatmap(lambda sd: _axes_positions(*sd, st.integers(0, 1))),  # rounding or non-real dtypes
        st.tuples(_AXES_SHAPES, st.sampled_from([torch.float32, torch.float64, torch.int64])).flatmap(
            lambda sd: _axes_positions(
                *sd,
                st.sampled_from([0.0, 1.0, float("nan"), float("inf"), -float("inf"), 2.0**53, -(2.0**60)])
                if sd[1].is_floating_point
                else st.sampled_from([0, 1, 2**53, -(2**53), 2**62]),
            )
        ),  # values beyond 2^53, NaN, ±inf
        st.sampled_from([None, 3, [[0, 1], [0, 1], [0, 1]], np.zeros((3, 4)), "positions"]),
    ),
)


def _multiaxis_call(positions: Any) -> tuple[np.ndarray, np.ndarray]:
    """``MultiAxisRotary.mrope(16, [2, 3, 3])`` on queries and keys shaped to fit ``positions``."""
    shape = tuple(positions.shape) if isinstance(positions, torch.Tensor) else ()
    b = shape[1] if len(shape) == 3 else 1
    q = torch.randn(b, 2, shape[-1] if shape else 1, 16, dtype=torch.float64)
    out = MultiAxisRotary.mrope(16, [2, 3, 3])(q, q, positions=positions)
    return tuple(t.numpy() for t in out)  # type: ignore[return-value]


def _multiaxis_shape(k: dict[str, Any]) -> tuple[int, ...]:
    shape = tuple(k["positions"].shape)
    return (2, shape[1] if len(shape) == 3 else 1, 2, shape[-1], 16)


SECTIONS = Arg(
    st.sampled_from([[4], [1, 3], [2, 2], [2, 1, 1], [1, 1, 2], [0, 2, 2], [4, 0, 0], [1, 1, 1, 1]]),
    ANY_BAD | st.sampled_from([[], [2, -1, 7], [2.5, 5.5], ["2", "6"], (8,), "233", [True, 7], [8, None]]),
)
GRID = Arg(
    st.tuples(st.integers(1, 4), st.integers(1, 4)),
    ANY_BAD | st.sampled_from([(), (2, 0), (2, -3), (2.5, 2), ("3", 2), (3,), (2, 2, 2)]),
)
AXIS_DIMS = Arg(
    st.tuples(st.integers(1, 4), st.integers(1, 4)).map(lambda t: (2 * t[0], 2 * t[1])),
    ANY_BAD | st.sampled_from([(), (3, 4), (4, 0), (4, -2), (4.0, 2), (5,), (2, 2, 2), (4,)]),
)
"""Two axes when good (a 2-D grid, the common case), so that shape and axis_dims drawn apart agree."""


TARGETS = {
    "sinusoidal": Target(
        lambda positions, dim, base: posenc.sinusoidal(positions, dim, base=base),
        {"positions": POSITIONS, "dim": DIM, "base": BASE},
        lambda k: (_n_or(k["positions"]), k["dim"]),
    ),
    "dft": Target(
        lambda positions, dim: posenc.dft(positions, dim, alias=True),
        {"positions": POSITIONS, "dim": DIM},
        lambda k: (_n_or(k["positions"]), k["dim"]),
    ),
    "geometric": Target(
        lambda dim, base: spectrum.geometric(dim, base),
        {"dim": DIM, "base": BASE},
        lambda k: ((k["dim"] + 1) // 2,),
    ),
    "power_law": Target(
        lambda dim, alpha: spectrum.power_law(dim, alpha),
        {"dim": DIM, "alpha": Arg(st.floats(0.5, 4))},
        lambda k: ((k["dim"] + 1) // 2,),
    ),
    "alibi_slopes": Target(
        lambda n_heads: spectrum.alibi_slopes(n_heads),
        {"n_heads": Arg(st.integers(1, 16))},
        lambda k: (k["n_heads"],),
    ),
    "sinusoidal-options": Target(
        lambda positions, dim, layout, dtype: posenc.sinusoidal(positions, dim, layout=layout, dtype=dtype),
        {
            "positions": POSITIONS,
            "dim": DIM,
            "layout": Arg(st.sampled_from(spectrum.LAYOUTS), ANY_BAD | st.just("x")),
            "dtype": Arg(
                st.sampled_from([np.float64, np.float32, "float32"]),
                st.sampled_from([np.int64, "int8", bool, "nope", object]),
            ),
        },
        lambda k: (_n_or(k["positions"]), k["dim"]),
    ),
    "sinusoidal-frequencies": Target(
        lambda positions, frequencies: posenc.sinusoidal(positions, 8, frequencies=frequencies),
        {
            "positions": POSITIONS,
            "frequencies": Arg(_arrays(st.just((4,)), elements=st.floats(1e-4, 3.0)), _bad_arrays(1)),
        },
        lambda k: (_n_or(k["positions"]), 8),
    ),
    "table_spectrum": Target(lambda E: analysis.table_spectrum(E), {"E": TABLE}, lambda k: None),
    "kernel_by_distance": Target(lambda M: analysis.kernel_by_distance(M), {"M": SQUARE}, lambda k: None),
    "nearest_neighbour_accuracy": Target(
        lambda E, noise: analysis.nearest_neighbour_accuracy(E, noise=noise),
        {"E": TABLE, "noise": Arg(st.floats(0, 2))},
        lambda k: None,
    ),
    "low_pass_count": Target(
        lambda frequencies, dim: analysis.low_pass_count(frequencies, dim=dim),
        {"frequencies": FREQS, "dim": DIM},
        lambda k: None,
    ),
    "frequency_distribution": Target(
        lambda frequencies, dim, bandwidth: analysis.frequency_distribution(
            frequencies, dim=dim, bandwidth=bandwidth
        ),
        {"frequencies": FREQS, "dim": DIM, "bandwidth": Arg(st.floats(1e-3, 2.0))},
        lambda k: None,
    ),
    "peak": Target(
        lambda f: dataclasses.astuple(analysis.peak(f)),
        {"f": Arg(_arrays(st.tuples(st.integers(2, 12)), elements=st.floats(0.1, 5)), _bad_arrays(1))},
        lambda k: None,
    ),
    "gram": Target(lambda E: analysis.gram(E), {"E": TABLE}, lambda k: (k["E"].shape[0],) * 2),
    "min_pairwise_distance": Target(
        lambda E: analysis.min_pairwise_distance(E), {"E": TABLE}, lambda k: None
    ),
    "toeplitz_deviation": Target(lambda M: analysis.toeplitz_deviation(M), {"M": SQUARE}, lambda k: None),
    "linear_shift_residual": Target(
        lambda E, k: analysis.linear_shift_residual(E, k),
        {"E": TABLE, "k": Arg(st.integers(1, 3))},
        lambda k: None,
    ),
    "frequency_kernel": Target(
        lambda frequencies, distances: analysis.frequency_kernel(frequencies, distances),
        {"frequencies": FREQS, "distances": DISTANCES},
        lambda k: (_n_or(k["distances"]),),
    ),
    "shift_operator": Target(
        lambda k, dim: analysis.shift_operator(k, dim=dim),
        {"k": Arg(st.integers(-5, 5)), "dim": DIM},
        lambda k: (k["dim"], k["dim"]),
    ),
    "MultiAxisRotary-positions": Target(
        _multiaxis_call, {"positions": MULTIAXIS_POSITIONS}, _multiaxis_shape
    ),
    "MultiAxisRotary-sections": Target(
        lambda head_dim, sections, interleaved: (
            MultiAxisRotary.mrope(head_dim, sections, interleaved=interleaved)
            .cos_sin(torch.arange(5).expand(len(sections), 5), dtype=torch.float64)[0]
            .numpy()
        ),
        {
            "head_dim": Arg(st.just(8)),  # 4 pairs: the good sections sum to 4
            "sections": SECTIONS,
            "interleaved": Arg(st.booleans(), ANY_BAD),
        },
        lambda k: (5, k["head_dim"]),
    ),
    "MultiAxisRotary-axial": Target(
        lambda head_dim, axis_dims: (
            MultiAxisRotary.axial(head_dim, axis_dims)
            .cos_sin(torch.arange(5).expand(len(axis_dims), 5), dtype=torch.float64)[0]
            .numpy()
        ),
        {"head_dim": Arg(st.sampled_from([8, 16, 24])), "axis_dims": AXIS_DIMS},
        lambda k: (5, sum(k["axis_dims"])),
    ),
    "sincos_nd": Target(
        lambda shape, axis_dims, base, layout, column_order: posenc.tables.sincos_nd(
            shape, axis_dims, base=base, layout=layout, column_order=column_order
        ),
        {
            "shape": GRID,
            "axis_dims": AXIS_DIMS,
            "base": BASE,
            "layout": Arg(st.sampled_from(posenc.tables.GRID_LAYOUTS), ANY_BAD | st.just("x")),
            "column_order": Arg(
                st.one_of(st.none(), st.permutations([0, 1, 2])),
                ANY_BAD | st.sampled_from([(0, 0), (1, 2), (0.0,), "01", (0, 1, 2, 3)]),
            ),
        },
        lambda k: (int(np.prod(k["shape"])), sum(k["axis_dims"])),
    ),
    "SinusoidalEncoding": Target(_module(lambda d: SinusoidalEncoding(d)), MODULE_ARGS, MODULE_SHAPE),
    "DFTEncoding": Target(_module(lambda d: DFTEncoding(d, alias=True)), MODULE_ARGS, MODULE_SHAPE),
    "LearnedEncoding": Target(_module(lambda d: LearnedEncoding(d, max_len=8)), MODULE_ARGS, MODULE_SHAPE),
    "SinusoidalEncoding-concat": Target(
        _module(lambda d: SinusoidalEncoding(d, mode="concat", dim=3)),
        MODULE_ARGS,
        lambda k: (*k["x"].shape[:2], 7),
    ),
    "LearnableFrequencyEncoding": Target(
        _module(lambda d: LearnableFrequencyEncoding(d)), MODULE_ARGS, MODULE_SHAPE
    ),
    **{
        f"{name}-positions": Target(
            lambda positions, factory=factory: _module(factory)(4, _tokens(positions), _tensor(positions)),
            {"positions": POSITIONS},
            lambda k: (2, _n_or(k["positions"]), 4),
        )
        for name, factory in {
            "SinusoidalEncoding": lambda d: SinusoidalEncoding(d),
            "DFTEncoding": lambda d: DFTEncoding(d, alias=True),
            "LearnedEncoding": lambda d: LearnedEncoding(d, max_len=2000),
        }.items()
    },
}


def _tokens(positions: Any) -> torch.Tensor:
    """Tokens ``[2, s, 4]`` for ``positions`` (one token when they stand for no sensible count)."""
    n = _n_or(positions)
    return torch.zeros(2, n if 0 <= n <= 64 else 1, 4)


def _tensor(positions: Any) -> Any:
    """Module positions: a small int ``S`` as ``arange(S)``, arrays as tensors, anything else as it is."""
    if isinstance(positions, int) and not isinstance(positions, bool) and 0 < positions <= 64:
        return torch.arange(positions)
    if isinstance(positions, np.ndarray) and positions.dtype.kind in "fiub":
        return torch.from_numpy(positions)
    return positions


@st.composite
def _call(draw, target: Target) -> dict[str, Any]:
    return {
        name: draw(arg.bad) if draw(st.integers(0, 3)) == 0 else draw(arg.good)
        for name, arg in target.args.items()
    }


def _finite(result: Any) -> bool:
    parts = result if isinstance(result, tuple) else (result,)
    return all(np.isfinite(np.asarray(p, dtype=np.float64)).all() for p in parts)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_public_api_returns_finite_documented_shapes_or_names_the_bad_parameter(name):
    target = TARGETS[name]

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_call(target))
    def check(kwargs):
        try:
            result = target.call(**kwargs)
        except (ValueError, TypeError) as exc:
            message = str(exc)
            # a bad pool also holds some valid values, and a sensible value can be refused in combination:
            # the message must name one of the call's parameters
            assert any(s in message for s in kwargs), (
                f"{name}({kwargs!r}) raised {exc!r}, naming no parameter"
            )
            return
        assert _finite(result), f"{name}({kwargs!r}) returned non-finite values"
        expected = target.shape(kwargs)
        if expected is not None:
            assert np.shape(result) == expected, f"{name}({kwargs!r}) returned shape {np.shape(result)}"

    check()


_POSITION_DTYPES = sorted({np.dtype(c) for c in np.typecodes["AllInteger"] + np.typecodes["Float"]}, key=str)
_TABLES = {
    "sinusoidal": lambda t: posenc.sinusoidal(t, 6),
    "sinusoidal-float32": lambda t: posenc.sinusoidal(t, 5, dtype=np.float32),
    "dft": lambda t: posenc.dft(t, 6, alias=True),
    "tensor2tensor": lambda t: posenc.tables.tensor2tensor(t, 6),
}


@st.composite
def _typed_positions(draw) -> np.ndarray:
    """1-D positions of any integer or floating dtype, values anywhere in that dtype's range."""
    dtype = draw(st.sampled_from(_POSITION_DTYPES))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = int(info.min), int(info.max)
        edges = [v for v in (2**53 - 1, 2**53, 2**53 + 1, -(2**53), lo, hi) if lo <= v <= hi]
        values = st.one_of(
            st.integers(max(lo, -1000), min(hi, 1000)), st.integers(lo, hi), st.sampled_from(edges)
        )
    else:
        finite = float(np.finfo(dtype if dtype.itemsize <= 8 else np.float64).max)
        edges = [v for v in (2.0**53 - 1, 2.0**53, -(2.0**53), 0.5, finite) if abs(v) <= finite]
        values = st.one_of(
            st.floats(width=min(dtype.itemsize * 8, 64), allow_nan=False, allow_infinity=False),
            st.sampled_from(edges),
        )
    return np.array(draw(st.lists(values, min_size=1, max_size=12)), dtype=dtype)


@pytest.mark.parametrize("name", sorted(_TABLES))
def test_tables_take_every_integer_and_floating_dtype_of_positions(name):
    """Every integer and floating dtype: the table of the positions as float64 when they are below 2^53
    in magnitude (and integers for the DFT), else a ValueError naming ``positions``."""
    table = _TABLES[name]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_typed_positions())
    def check(t):
        exact = np.array([float(v) for v in t.tolist()])  # the values as given, rounded once to float64
        fits = bool((np.abs(exact) < 2.0**53).all()) and not (
            name == "dft" and (exact != np.round(exact)).any()
        )
        if not fits:
            with pytest.raises(ValueError, match="positions"):
                table(t)
            return
        out = table(t)
        np.testing.assert_array_equal(out, table(exact))
        assert np.isfinite(out).all()

    check()


@st.composite
def _typed_axes_positions(draw) -> torch.Tensor:
    """``[3, s]`` positions of any torch integer dtype, float32 or float64, values anywhere in its range."""
    dtype = draw(st.sampled_from(TORCH_POSITION_DTYPES))
    if dtype.is_floating_point:
        width = 32 if dtype == torch.float32 else 64
        values = st.one_of(
            st.floats(width=width, allow_nan=False, allow_infinity=False),
            st.sampled_from([2.0**53 - 1, 2.0**53, -(2.0**53), 0.5, float("nan"), float("inf")]),
        )
        rows = draw(st.lists(values, min_size=3, max_size=3 * 6))
        s = max(len(rows) // 3, 1)
        return torch.tensor((rows * 3)[: 3 * s], dtype=torch.float64).reshape(3, s).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    edges = [v for v in (2**53 - 1, 2**53, 2**53 + 1, -(2**53), lo, hi) if lo <= v <= hi]
    values = st.one_of(
        st.integers(max(lo, -1000), min(hi, 1000)), st.integers(lo, hi), st.sampled_from(edges)
    )
    rows = draw(st.lists(values, min_size=3, max_size=3 * 6))
    s = max(len(rows) // 3, 1)
    flat = (rows * 3)[: 3 * s]
    if dtype == torch.uint64:  # torch.tensor takes uint64 values only through their int64 bits
        return (
            torch.tensor([v - 2**64 if v >= 2**63 else v for v in flat], dtype=torch.int64)
            .view(torch.uint64)
            .reshape(3, s)
        )
    return torch.tensor(flat, dtype=dtype).reshape(3, s)


def _exact_values(positions: torch.Tensor) -> list[int | float]:
    if positions.dtype == torch.uint64:
        return [v % 2**64 for v in positions.view(torch.int64).reshape(-1).tolist()]
    return positions.reshape(-1).tolist()


def test_multiaxis_rotary_takes_every_integer_and_float_dtype_of_positions():
    """Every integer dtype, float32 and float64: the angles of the positions' exact values (formed in float64)
    when all are finite and below 2^53 in magnitude, else a ValueError naming ``positions``."""
    rope = MultiAxisRotary.mrope(16, [2, 3, 3])
    matrix = rope.frequencies.numpy()

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(_typed_axes_positions())
    def check(p):
        exact = _exact_values(p)
        if not all(math.isfinite(v) and abs(v) < 2**53 for v in exact):
            with pytest.raises(ValueError, match=r"^positions must be finite and < 2\^53"):
                rope.angles(p)
            return
        values = np.array([float(v) for v in exact]).reshape(p.shape)
        np.testing.assert_array_equal(rope.angles(p).numpy(), np.einsum("as,an->sn", values, matrix))

    check()


CHECK_CONFIG = {"head_dim": 8, "rope_theta": 500.0, "max_position_embeddings": 64}


def _true_dump(n: int) -> dict[str, Any]:
    """A correct dump of :data:`CHECK_CONFIG`'s rope at positions ``0 … n−1`` (float64 RoPE of Su et al.
    2021, half-split: ``q_rot = q·cos + rotate_half(q)·sin``)."""
    t = np.arange(n, dtype=np.float64)
    theta = 500.0 ** (-np.arange(0, 8, 2) / 8)
    cos, sin = np.cos(np.outer(t, theta)), np.sin(np.outer(t, theta))
    cos, sin = np.concatenate([cos, cos], 1), np.concatenate([sin, sin], 1)
    q = np.random.default_rng(n).standard_normal((n, 8))
    q_rot = q * cos + np.concatenate([-q[:, 4:], q[:, :4]], 1) * sin
    return {"positions": t, "cos": cos, "sin": sin, "q": q, "q_rot": q_rot}


POISON = [("positions",), ("length",), ("cos", "sin"), ("q", "q_rot")]
"""Arrays whose non-finite entries must never pass as agreement (a pair is compared when both are there)."""


def _non_finite(arrays: dict[str, Any], keys: tuple[str, ...]) -> bool:
    """Whether all of ``keys`` are in ``arrays`` and one holds a non-finite real number."""
    if not all(k in arrays for k in keys):
        return False
    values = [np.asarray(arrays[k]) for k in keys]
    return any(v.dtype.kind in "iuf" and not np.isfinite(v).all() for v in values)


_MUTATIONS = st.sampled_from(
    [
        ("drop", "positions"),
        ("drop", "cos"),
        ("drop", "q_rot"),
        ("drop", "q"),
        ("nan", "positions"),
        ("inf", "positions"),
        ("nan", "q"),
        ("nan", "cos"),
        ("inf", "q_rot"),
        ("nan", "length"),
        ("inf", "length"),
        ("set", "length", -5.0),
        ("set", "length", np.zeros(3)),
        ("set", "length", np.zeros((40, 40))),  # its repr spans lines: the error must not
        ("set", "layout", np.array([["half_split"] * 30] * 3)),
        ("set", "length", "long"),
        ("set", "layout", "rows"),
        ("set", "layout", np.arange(3)),
        ("set", "positions", np.zeros(0)),
        ("set", "positions", np.array(["a", "b"])),
        ("set", "positions", 2.0**60),
        ("set", "positions", np.zeros((2, 2, 2))),
        ("set", "cos", np.array(["x"] * 4)),
        ("set", "q", np.zeros((3, 5))),
        ("set", "q", np.zeros(8, dtype=np.complex128)),
        ("reshape", "cos"),
        ("reshape", "q_rot"),
        ("truncate", ""),
        ("not a zip", ""),
        ("npy", ""),
    ]
)


def _write_dump(path, arrays: dict[str, Any], mutations: list[tuple[Any, ...]]) -> bool:
    """Write ``arrays`` with ``mutations`` applied; whether a mutation must make the check fail."""
    arrays = dict(arrays)
    for kind, key, *value in mutations:
        if kind == "drop":
            arrays.pop(key, None)
        elif kind in ("nan", "inf"):
            array = np.array(arrays.get(key, 10.0 if key == "length" else 0.0))
            if array.dtype.kind not in "iuf":  # already replaced by strings or complex numbers
                continue
            array = array.astype(np.float64)
            array.reshape(-1)[-1:] = np.nan if kind == "nan" else np.inf
            arrays[key] = array
        elif kind == "set":
            arrays[key] = value[0]
        elif kind == "reshape" and key in arrays:
            arrays[key] = np.asarray(arrays[key])[..., :-1]
    poisoned = any(_non_finite(arrays, keys) for keys in POISON)
    np.savez(path, **arrays)
    if any(m[0] == "truncate" for m in mutations):
        path.write_bytes(path.read_bytes()[:100])
    if any(m[0] == "npy" for m in mutations):
        with path.open("wb") as file:
            np.save(file, np.zeros(3))
    if any(m[0] == "not a zip" for m in mutations):
        path.write_bytes(b"PK\x03\x04 a broken zip")
    return poisoned


def test_check_against_a_malformed_dump_exits_2_with_one_line_never_a_traceback(tmp_path_factory, capsys):
    """``posenc check --against`` on a dump with arrays dropped, misshaped, non-finite, of strings or
    complex numbers, or a broken file: exit 2 with one line, 1 for a disagreement, 0 only when the dump
    really agrees (non-finite values never pass)."""
    directory = tmp_path_factory.mktemp("dumps")
    config = directory / "config.json"
    config.write_text(json.dumps(CHECK_CONFIG))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.integers(1, 12), st.lists(_MUTATIONS, max_size=3))
    def check(n, mutations):
        path = directory / "dump.npz"
        poisoned = _write_dump(path, _true_dump(n), mutations)
        capsys.readouterr()
        status = main(["check", str(config), "--against", str(path)])
        lines = capsys.readouterr().err.strip().splitlines()
        if not mutations:
            assert status == 0, lines
        if status == 2:
            assert len(lines) == 1 and lines[0].startswith("posenc check: error:"), lines
        else:
            assert status in (0, 1) and not lines, (status, lines)
        if poisoned:
            assert status != 0, mutations

    check()
