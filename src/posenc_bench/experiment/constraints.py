"""Declarative parameter constraints, checked by one function (the pattern of scikit-learn's
``_parameter_constraints``, Pedregosa et al. 2011).

A frozen configuration dataclass declares, per field, what its value may be::

    _parameter_constraints: ClassVar[Constraints] = {
        "window": Interval(int, 1, None),
        "dropout": Interval(float, 0, 1, closed="left"),
        "monitor": Options(("auprc", "loss")),
    }

and calls :func:`check_parameters` once in ``__post_init__``. An error names the field, the value and
what is allowed: ``ValueError`` (:class:`posenc.errors.UsageError`) for a value out of range,
``TypeError`` (:class:`posenc.errors.UsageTypeError`) for a value of the wrong type. A field that a
command-line flag sets is declared with :func:`option`, whose metadata names the flag (:func:`flag`);
a configuration that only flags set names such fields by their flags (``check_parameters(self, flags=True)``).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field
from typing import Any, Literal

from posenc.errors import UsageError, UsageTypeError


def option(default: Any, help: str | None = None, *, flag: str | None = None) -> Any:
    """A field that a command-line flag sets: the flag's name when it is not ``--`` and the field's name
    with dashes, and, for a flag made from the field, its help text (``{default}`` is filled in, else the
    default is appended); ``help=None`` where the flag is declared by hand."""
    return field(default=default, metadata={"flag": flag} | ({} if help is None else {"help": help}))


def flag(item: Field[Any]) -> str:
    """The flag that sets an :func:`option` field: its ``flag`` metadata, else ``--`` and the name with dashes."""
    return item.metadata.get("flag") or "--" + item.name.replace("_", "-")


class Constraint:
    """What one field may hold: :meth:`check` raises naming the field, the value and what is allowed."""

    #: The types a value must have (``bool`` never counts as a number).
    types: tuple[type, ...] = (object,)

    def holds(self, value: Any) -> bool:
        """Whether ``value`` (already of :attr:`types`) is allowed."""
        return True

    def describe(self) -> str:
        """What is allowed, as it follows "must be", e.g. ``"an int >= 1"``."""
        raise NotImplementedError

    def check(self, name: str, value: Any) -> None:
        allowed = self.describe()
        got = f"{';' if ',' in allowed else ','} got {value!r}"
        numeric = any(issubclass(t, numbers.Number) for t in self.types)
        if not isinstance(value, self.types) or (numeric and isinstance(value, bool)):
            raise UsageTypeError(f"{name} must be {allowed}{got} ({type(value).__name__})")
        if not self.holds(value):
            raise UsageError(f"{name} must be {allowed}{got}")


@dataclass(frozen=True)
class Interval(Constraint):
    """A number of ``kind`` (``int``: any integer; ``float``: any real) in ``[low, high]``; ``None`` is
    unbounded, ``closed`` says which ends belong. A real number must be finite unless ``high`` is ``inf``."""

    kind: type[int] | type[float]
    low: float | None
    high: float | None
    closed: Literal["both", "left", "right", "neither"] = "both"

    @property
    def types(self) -> tuple[type, ...]:  # type: ignore[override]
        return (numbers.Integral,) if self.kind is int else (numbers.Real,)

    def holds(self, value: Any) -> bool:
        v = float(value)
        if math.isnan(v) or (math.isinf(v) and self.high != math.inf):
            return False
        above = self.low is None or (v >= self.low if self.closed in ("both", "left") else v > self.low)
        below = self.high is None or (v <= self.high if self.closed in ("both", "right") else v < self.high)
        return above and below

    def describe(self) -> str:
        unbounded = self.low is None or self.high is None
        noun = (
            "an int"
            if self.kind is int
            else "a finite number"
            if unbounded and self.high != math.inf
            else "a number"
        )
        if self.kind is int and self.low == 1 and self.high is None:
            return "a positive int"
        number = "{:d}" if self.kind is int else "{:g}"
        if self.high is None and self.low is not None:
            return f"{noun} {'>=' if self.closed in ('both', 'left') else '>'} {number.format(self.low)}"
        left = "[" if self.closed in ("both", "left") else "("
        right = "]" if self.closed in ("both", "right") else ")"
        low = "-inf" if self.low is None else number.format(self.low)
        high = "inf" if self.high is None else number.format(self.high)
        return f"{noun} in {left}{low}, {high}{right}"


@dataclass(frozen=True)
class Options(Constraint):
    """One of a fixed set of strings."""

    values: tuple[str, ...]
    types: tuple[type, ...] = (str,)

    def holds(self, value: Any) -> bool:
        return value in self.values

    def describe(self) -> str:
        return "one of " + ", ".join(map(repr, self.values))


@dataclass(frozen=True)
class Pattern(Constraint):
    """A string matching ``regex`` in full; ``description`` says what that means to a reader."""

    regex: str
    description: str
    types: tuple[type, ...] = (str,)

    def holds(self, value: Any) -> bool:
        return re.fullmatch(self.regex, value) is not None

    def describe(self) -> str:
        return self.description


@dataclass(frozen=True)
class Type(Constraint):
    """Any value of ``kind`` (e.g. ``Mapping``)."""

    kind: type
    description: str

    @property
    def types(self) -> tuple[type, ...]:  # type: ignore[override]
        return (self.kind,)

    def describe(self) -> str:
        return self.description


@dataclass(frozen=True)
class Satisfies(Constraint):
    """A check that names what is wrong itself: ``function(name, value)`` raises (e.g. a registry lookup)."""

    function: Callable[[str, Any], object]

    def check(self, name: str, value: Any) -> None:
        self.function(name, value)


@dataclass(frozen=True)
class NoneOr(Constraint):
    """``None`` (the setting is off) or a value that ``constraint`` allows (its error when not)."""

    constraint: Constraint

    def check(self, name: str, value: Any) -> None:
        if value is not None:
            self.constraint.check(name, value)

    def describe(self) -> str:
        return f"None or {self.constraint.describe()}"


Constraints = Mapping[str, Constraint]


def check_parameters(config: Any, *, flags: bool = False) -> None:
    """Check every field of ``config`` against its class's ``_parameter_constraints``, in table order.

    An error names the field; with ``flags``, a field declared by :func:`option` by its :func:`flag`.
    """
    table: Constraints = type(config)._parameter_constraints
    for name, constraint in table.items():
        constraint.check(parameter_name(config, name) if flags else name, getattr(config, name))


def parameter_name(config: Any, name: str) -> str:
    """How a configuration that only flags set names its field ``name``: an :func:`option` field by
    its :func:`flag`, any other field by its name."""
    item = config.__dataclass_fields__[name]
    return flag(item) if "flag" in item.metadata else name


#: The values most configurations share: sizes and counts, seeds, and AdamW's rate and decay.
POSITIVE_INT = Interval(int, 1, None)
SEED = Interval(int, 0, None)
#: How many seeds (or split seeds) a grid repeats: a thousand is far past what a paired comparison needs.
REPEATS = Interval(int, 1, 1000)
#: AdamW's rate, at most 10⁶ (each step moves every weight by about the rate: far past any useful one,
#: and still a float32, which 1e300 is not; a rate that diverges is stopped by the training's own check,
#: naming --lr), and its decay, at most 10 (the decay multiplies the rate: above 1/lr it flips weights).
LEARNING_RATE = Interval(float, 0, 1e6, closed="right")
WEIGHT_DECAY = Interval(float, 0, 10)
