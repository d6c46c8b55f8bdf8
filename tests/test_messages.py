"""Bad input to the public library API: a ValueError/TypeError naming the parameter the user typed and the
value, never a NumPy or torch message leaking through (a broadcast error, ``np.float64(…)``, a Python
``unexpected keyword argument``) and never a silent result.

One row per bad call: the call, the exception class, and a pattern the message must match (it starts
with the parameter's name).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from posenc import analysis, spectrum, tables

NAN = float("nan")
E = tables.sinusoidal(20, 8)
THETA = analysis.SU_SCHEDULES["x"]

LEAKS = re.compile(
    r"operands could not|broadcast|could not convert|np\.(float|int)\d*\(|ufunc|out of bounds|not subscriptable|"
    r"unsupported operand|positional argument|unexpected keyword|NoneType|array\(|dtype\('|invalid literal|"
    r"expected non-negative integer|tensor\("
)

CASES = [
    # tables
    (
        "tables.sinusoidal dim",
        lambda: tables.sinusoidal(4, 0),
        ValueError,
        r"^dim must be a positive int, got 0",
    ),
    ("tables.sinusoidal dim float", lambda: tables.sinusoidal(4, 2.5), TypeError, r"^dim .*got 2\.5"),
    ("tables.sinusoidal base", lambda: tables.sinusoidal(4, 8, base=NAN), ValueError, r"^base .*got nan"),
    ("tables.sinusoidal base str", lambda: tables.sinusoidal(4, 8, base="x"), TypeError, r"^base .*'x'"),
    (
        "tables.sinusoidal positions 2-D",
        lambda: tables.sinusoidal([[1, 2]], 8),
        ValueError,
        r"^positions must be 1-D",
    ),
    (
        "tables.sinusoidal positions text",
        lambda: tables.sinusoidal(["a"], 8),
        TypeError,
        r"^positions must hold real",
    ),
    (
        "tables.sinusoidal layout",
        lambda: tables.sinusoidal(4, 8, layout="x"),
        ValueError,
        r"^layout must be one of",
    ),
    (
        "tables.sinusoidal frequencies",
        lambda: tables.sinusoidal(4, 8, frequencies=[1.0]),
        ValueError,
        r"^frequencies must hold",
    ),
    ("tables.sinusoidal dtype", lambda: tables.sinusoidal(4, 8, dtype="int8"), TypeError, r"^dtype must be"),
    (
        "tables.dft positions",
        lambda: tables.dft([9], 8),
        ValueError,
        r"^positions must lie in 0…dim-1 = 0…7.*got 9 at index 0",
    ),
    (
        "tables.dft positions fraction",
        lambda: tables.dft([1.5], 8),
        ValueError,
        r"^positions must be integers.*got 1\.5 at index 0",
    ),
    ("tables.dft alias", lambda: tables.dft(4, 8, alias="yes"), TypeError, r"^alias must be True or False"),
    ("tables.angles frequencies", lambda: tables.angles(4, [[1.0]]), ValueError, r"^frequencies must be 1-D"),
    (
        "tables.angles overflow",
        lambda: tables.angles(3, [1e308]),
        ValueError,
        r"^positions × frequencies must stay finite in float64, got 2 \(positions\[2\]\) times w = 1e\+308",
    ),
    (
        "analysis.frequency_kernel overflow",
        lambda: analysis.frequency_kernel([1e308], 3),
        ValueError,
        r"^distances × frequencies must stay finite in float64, got 2 \(distances\[2\]\)",
    ),
    ("tables.sincos_nd shape", lambda: tables.sincos_nd((), 8), TypeError, r"^shape must be"),
    # spectrum
    ("spectrum.geometric base", lambda: spectrum.geometric(8, -1), ValueError, r"^base .*got -1"),
    ("spectrum.power_law alpha", lambda: spectrum.power_law(8, NAN), ValueError, r"^alpha .*got nan"),
    ("spectrum.su theta", lambda: spectrum.su(8, 3), TypeError, r"^theta must be a callable"),
    (
        "spectrum.su theta length",
        lambda: spectrum.su(8, lambda u: [1.0]),
        ValueError,
        r"^theta\(x\) must return",
    ),
    (
        "spectrum.custom empty",
        lambda: spectrum.custom([]),
        ValueError,
        r"^frequencies must hold at least one",
    ),
    ("spectrum.schedule name", lambda: spectrum.schedule("nope", 8), ValueError, r"^schedule must be one of"),
    (
        "spectrum.schedule option",
        lambda: spectrum.schedule("linear", 8, gamma=1.0),
        TypeError,
        r"^schedule 'linear' takes no options; got gamma",
    ),
    (
        "spectrum.schedule wrong option",
        lambda: spectrum.schedule("power_law", 8, base=2.0),
        TypeError,
        r"^schedule 'power_law' takes the options alpha; got base",
    ),
    (
        "spectrum.alibi_slopes",
        lambda: spectrum.alibi_slopes(0),
        ValueError,
        r"^n_heads must be a positive int",
    ),
    ("spectrum.rotary_dim", lambda: spectrum.rotary_dim(64, 1.5), ValueError, r"^rotary_dim .*1\.5"),
    # analysis
    ("analysis.shift_operator dim", lambda: analysis.shift_operator(1, dim=0), ValueError, r"^dim must be"),
    (
        "analysis.operator_residual operator",
        lambda: analysis.operator_residual(E, np.eye(3), 1),
        ValueError,
        r"^operator must be \[d, d\]",
    ),
    (
        "analysis.operator_residual k",
        lambda: analysis.operator_residual(E, np.eye(8), 50),
        ValueError,
        r"^k must lie in 1…19.*got 50",
    ),
    (
        "analysis.linear_shift_residual E",
        lambda: analysis.linear_shift_residual(E * NAN, 1),
        ValueError,
        r"^E must be finite, got nan at index \(0, 0\)",
    ),
    ("analysis.gram E", lambda: analysis.gram(np.ones((2, 2, 2))), ValueError, r"^E must be 2-D"),
    (
        "analysis.frequency_kernel distances",
        lambda: analysis.frequency_kernel(np.ones(2), [NAN]),
        ValueError,
        r"^distances must be finite",
    ),
    (
        "analysis.decay_integral theta",
        lambda: analysis.decay_integral("x", np.arange(3), dim=8),
        TypeError,
        r"^theta must be a callable",
    ),
    (
        "analysis.decay_integral weight",
        lambda: analysis.decay_integral(THETA, np.arange(3), dim=8, weight=3),
        TypeError,
        r"^weight must be",
    ),
    (
        "analysis.bilinear_parts h",
        lambda: analysis.bilinear_parts(np.ones(3), 1, 2, dim=8),
        ValueError,
        r"^h must hold the d = 8",
    ),
    (
        "analysis.bilinear_parts m",
        lambda: analysis.bilinear_parts(np.ones(8), NAN, 2, dim=8),
        ValueError,
        r"^m must hold finite",
    ),
    (
        "analysis.form_summary H",
        lambda: analysis.form_summary(np.ones((3, 3)), E),
        ValueError,
        r"^H must be \[d, d\]",
    ),
    (
        "analysis.frequency_distribution bandwidth",
        lambda: analysis.frequency_distribution([1.0], dim=8, bandwidth=0),
        ValueError,
        r"^bandwidth .*got 0",
    ),
    (
        "analysis.crossing_index base",
        lambda: analysis.crossing_index(8, base=-1),
        ValueError,
        r"^base .*got -1",
    ),
    (
        "analysis.table_spectrum axis",
        lambda: analysis.table_spectrum(E, axis="x"),
        ValueError,
        r"^axis must be one of",
    ),
    (
        "analysis.reconstruct weights",
        lambda: analysis.reconstruct(np.ones(8), np.ones(2)),
        ValueError,
        r"^weights must hold",
    ),
    (
        "analysis.reconstruct reference",
        lambda: analysis.reconstruct(np.ones((2, 8)), np.ones(5)),
        ValueError,
        r"^reference must be 1-D",
    ),
    (
        "analysis.one_hot position",
        lambda: analysis.one_hot(9, 8),
        ValueError,
        r"^position must be an int in 0…dim-1 = 0…7.*got 9",
    ),
    (
        "analysis.one_hot fraction",
        lambda: analysis.one_hot(1.5, 8),
        ValueError,
        r"^position must be an int .*got 1\.5",
    ),
    ("analysis.peak f", lambda: analysis.peak([]), ValueError, r"^f must hold at least 2 values"),
    (
        "analysis.min_pairwise_distance E",
        lambda: analysis.min_pairwise_distance(np.ones((1, 3))),
        ValueError,
        r"^E must have at least 2",
    ),
    (
        "analysis.nearest_neighbour_accuracy noise",
        lambda: analysis.nearest_neighbour_accuracy(E, noise=-1.0),
        ValueError,
        r"^noise must be >= 0",
    ),
    (
        "analysis.nearest_neighbour_accuracy seed",
        lambda: analysis.nearest_neighbour_accuracy(E, noise=0.1, seed=-1),
        ValueError,
        r"^seed must be an int >= 0, got -1",
    ),
    (
        "analysis.inverse_dft_accuracy seed",
        lambda: analysis.inverse_dft_accuracy(tables.dft(4, 8), seed=1.5),
        TypeError,
        r"^seed must be an int >= 0, got 1\.5",
    ),
    (
        "analysis.scorecard encoding",
        lambda: analysis.scorecard("nope", length=8, dim=8),
        ValueError,
        r"unknown encoding 'nope'; registered encodings: none, sinusoidal",
    ),
    (
        "analysis.scorecard length",
        lambda: analysis.scorecard("sinusoidal", length=0, dim=8),
        ValueError,
        r"^length must be a positive int",
    ),
    (
        "analysis.encoding_view dim",
        lambda: analysis.encoding_view("rope", dim=0, length=8),
        ValueError,
        r"^dim must be",
    ),
]


def _torch_cases():
    torch = pytest.importorskip("torch")
    from posenc.nn import DFTEncoding, LearnableFrequencyEncoding, LearnedEncoding, SinusoidalEncoding

    x = torch.zeros(2, 3, 8)
    return [
        (
            "SinusoidalEncoding d_model",
            lambda: SinusoidalEncoding("8"),
            TypeError,
            r"^d_model must be a positive int, got '8'",
        ),
        (
            "SinusoidalEncoding scale",
            lambda: SinusoidalEncoding(8, scale=NAN),
            ValueError,
            r"^scale .*got nan",
        ),
        (
            "SinusoidalEncoding dim",
            lambda: SinusoidalEncoding(8, dim=4),
            ValueError,
            r"^dim must equal d_model=8",
        ),
        (
            "LearnedEncoding init_std",
            lambda: LearnedEncoding(8, max_len=4, init_std=NAN),
            ValueError,
            r"^init_std .*got nan",
        ),
        (
            "LearnableFrequencyEncoding option",
            lambda: LearnableFrequencyEncoding(8, schedule="linear", gamma=2.0),
            TypeError,
            r"gamma",
        ),
        ("forward x", lambda: SinusoidalEncoding(8)([1, 2]), TypeError, r"^x must be a torch.Tensor"),
        (
            "forward positions list",
            lambda: SinusoidalEncoding(8)(x, positions=[0, 1, 2]),
            TypeError,
            r"^positions must be a torch.Tensor of shape \[3\] or \[b, 3\]",
        ),
        (
            "forward positions float16",
            lambda: SinusoidalEncoding(8)(x, positions=torch.zeros(3, dtype=torch.float16)),
            TypeError,
            r"^positions must be an integer dtype",
        ),
        (
            "forward positions batch",
            lambda: SinusoidalEncoding(8)(x, positions=torch.zeros(3, 3, dtype=torch.long)),
            ValueError,
            r"^positions must have shape \[3\] or \[b, 3\] with b = 2 or 1",
        ),
        (
            "forward offset",
            lambda: SinusoidalEncoding(8)(x, offset=1.5),
            TypeError,
            r"^offset must be an int >= 0, got 1\.5",
        ),
        (
            "LearnedEncoding positions",
            lambda: LearnedEncoding(8, max_len=4)(x, positions=torch.tensor([0, 4, 1])),
            ValueError,
            r"^positions must be integers in 0…max_len-1 = 0…3 .*got 4 at index 1",
        ),
        (
            "DFTEncoding positions",
            lambda: DFTEncoding(8)(x, positions=torch.tensor([[0, 1, 2], [0, 9, 2]])),
            ValueError,
            r"^positions must lie in 0…dim-1 = 0…7 .*got 9",
        ),
        (
            "table length",
            lambda: SinusoidalEncoding(8).table(1.5),
            TypeError,
            r"^length must be a positive int, got 1\.5",
        ),
    ]


def _check(call, kind, pattern):
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    assert re.search(pattern, message), message
    assert not LEAKS.search(message), message
    assert "\n" not in message


@pytest.mark.parametrize(("call", "kind", "pattern"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_to_the_numpy_core_names_the_parameter(call, kind, pattern):
    _check(call, kind, pattern)


def test_bad_input_to_the_input_encodings_names_the_parameter():
    failures = []
    for name, call, kind, pattern in _torch_cases():
        try:
            _check(call, kind, pattern)
        except (AssertionError, pytest.fail.Exception) as exc:
            failures.append(f"{name}: {exc}")
    assert not failures, "\n".join(failures)
