"""The declarative constraints every run axis is checked by: membership against plain comparisons,
errors that name the field, the value and what is allowed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from posenc_bench.experiment.constraints import (
    Constraints,
    Interval,
    NoneOr,
    Options,
    Pattern,
    check_parameters,
    option,
)

CLOSED = ("both", "left", "right", "neither")


@given(
    low=st.floats(-10, 10),
    width=st.floats(0, 10),
    x=st.floats(allow_nan=True, allow_infinity=True),
    closed=st.sampled_from(CLOSED),
)
def test_interval_membership_is_the_plain_comparison(low, width, x, closed):
    high = low + width
    left = x >= low if closed in ("both", "left") else x > low
    right = x <= high if closed in ("both", "right") else x < high
    assert Interval(float, low, high, closed=closed).holds(x) == (left and right and math.isfinite(x))


@given(x=st.integers(-5, 5))
def test_an_unbounded_int_interval_is_a_lower_bound(x):
    assert Interval(int, 1, None).holds(x) == (x >= 1)
    assert Interval(int, 0, None).holds(x) == (x >= 0)


@dataclass(frozen=True)
class Toy:
    size: int = 1
    rate: float = 0.5
    kind: str = "a"
    tag: str = ""

    _parameter_constraints: ClassVar[Constraints] = {
        "size": Interval(int, 1, None),
        "rate": Interval(float, 0, 1, closed="right"),
        "kind": Options(("a", "b")),
        "tag": Pattern(r"[a-z]*", "lower-case letters"),
    }

    def __post_init__(self) -> None:
        check_parameters(self)


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"size": 0}, ValueError, "size must be a positive int, got 0"),
        ({"size": 2.0}, TypeError, r"size must be a positive int, got 2.0 \(float\)"),
        ({"size": True}, TypeError, r"size must be a positive int, got True \(bool\)"),
        ({"rate": 0}, ValueError, r"rate must be a number in \(0, 1\]; got 0"),
        ({"rate": math.nan}, ValueError, r"rate must be a number in \(0, 1\]; got nan"),
        ({"kind": "c"}, ValueError, "kind must be one of 'a', 'b'; got 'c'"),
        ({"kind": 1}, TypeError, "kind must be one of 'a', 'b'; got 1"),
        ({"tag": "A"}, ValueError, "tag must be lower-case letters, got 'A'"),
    ],
)
def test_a_bad_value_is_refused_naming_field_value_and_what_is_allowed(changes, error, message):
    Toy()  # the defaults hold
    with pytest.raises(error, match=message):
        Toy(**changes)


@dataclass(frozen=True)
class Flagged:
    """Set only by flags: an error names the flag of an ``option`` field, the name of any other."""

    batch_size: int = option(1)
    n_heads: int = option(1, flag="--heads")
    limit: int | None = option(None)
    seed: int = 0

    _parameter_constraints: ClassVar[Constraints] = {
        "batch_size": Interval(int, 1, None),
        "n_heads": Interval(int, 1, None),
        "limit": NoneOr(Interval(int, 1, None)),
        "seed": Interval(int, 0, None),
    }

    def __post_init__(self) -> None:
        check_parameters(self, flags=True)


@pytest.mark.parametrize(
    "changes, error, message",
    [
        ({"batch_size": 0}, ValueError, "^--batch-size must be a positive int, got 0$"),
        ({"n_heads": 0}, ValueError, "^--heads must be a positive int, got 0$"),
        ({"limit": 0}, ValueError, "^--limit must be a positive int, got 0$"),
        ({"limit": "3"}, TypeError, r"^--limit must be a positive int, got '3' \(str\)$"),
        ({"seed": -1}, ValueError, "^seed must be an int >= 0, got -1$"),
    ],
)
def test_a_configuration_set_by_flags_names_the_flag(changes, error, message):
    assert Flagged(limit=None) == Flagged() and Flagged(limit=3).limit == 3  # None: the setting is off
    with pytest.raises(error, match=message):
        Flagged(**changes)
