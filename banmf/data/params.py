"""Declared parameter constraints, checked once when a fit begins.

Each estimator declares ``_parameter_constraints``: for every ``__init__`` parameter, the list
of what it may be (scikit-learn's idea, without depending on scikit-learn). A constraint is
one of

- :class:`Interval` (numbers of a kind between two bounds),
- :class:`Options` (a few literal values, compared by type and value so that ``True`` is not
  ``1``),
- :func:`subset_of` (a tuple of distinct values among a few),
- :data:`NONE`, :data:`BOOLEAN`, :data:`CALLABLE`, :data:`RANDOM_STATE`, :data:`FLOAT_DTYPE`,
  :data:`N_JOBS`.

:func:`validate_params` raises :class:`banmf.exceptions.InvalidParameterError` (a
``ValueError`` and a ``TypeError``) naming the estimator, the parameter, what it may be, and
what it got.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = [
    "BOOLEAN",
    "CALLABLE",
    "FLOAT_DTYPE",
    "NONE",
    "N_JOBS",
    "RANDOM_STATE",
    "Interval",
    "Kind",
    "Options",
    "subset_of",
    "validate_params",
]


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``numbers.Integral`` or ``numbers.Real``) from ``low`` to ``high``
    (None: unbounded), ``closed`` at "both", "left", "right" or "neither" end. Booleans and
    NaN never qualify."""

    kind: type
    low: float | None
    high: float | None
    closed: str = "both"

    def __contains__(self, value) -> bool:
        if _is_bool(value) or not isinstance(value, self.kind):
            return False
        if isinstance(value, numbers.Real) and np.isnan(value):
            return False
        left_ok = self.low is None or (
            value >= self.low if self.closed in ("both", "left") else value > self.low
        )
        right_ok = self.high is None or (
            value <= self.high if self.closed in ("both", "right") else value < self.high
        )
        return bool(left_ok and right_ok)

    def __str__(self) -> str:
        what = "an integer" if self.kind is numbers.Integral else "a number"
        if self.low is not None and self.high is not None:
            left = "[" if self.closed in ("both", "left") else "("
            right = "]" if self.closed in ("both", "right") else ")"
            return f"{what} in {left}{self.low}, {self.high}{right}"
        if self.low is not None:
            return f"{what} {'>=' if self.closed in ('both', 'left') else '>'} {self.low}"
        if self.high is not None:
            return f"{what} {'<=' if self.closed in ('both', 'right') else '<'} {self.high}"
        return what


class Options:
    """One of a few literal values (strings, mostly)."""

    def __init__(self, *values):
        self.values = values

    def __contains__(self, value) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    def __str__(self) -> str:
        return (
            "one of " + ", ".join(repr(v) for v in self.values)
            if len(self.values) > 1
            else repr(self.values[0])
        )


class Kind:
    """A named test (None, a boolean, a callable, ...)."""

    def __init__(self, text: str, test):
        self.text, self.test = text, test

    def __contains__(self, value) -> bool:
        return bool(self.test(value))

    def __str__(self) -> str:
        return self.text


def _is_float_dtype(value) -> bool:
    try:
        return np.dtype(value) in (np.dtype(np.float32), np.dtype(np.float64))
    except TypeError:
        return False


NONE = Kind("None", lambda v: v is None)
BOOLEAN = Kind("True or False", _is_bool)
CALLABLE = Kind("a callable", callable)
RANDOM_STATE = Kind(
    "None, an integer >= 0 or a numpy Generator",
    lambda v: (
        v is None
        or isinstance(v, (np.random.Generator, np.random.SeedSequence))
        or (isinstance(v, numbers.Integral) and not _is_bool(v) and v >= 0)
    ),
)
FLOAT_DTYPE = Kind("float32 or float64", _is_float_dtype)
N_JOBS = Kind(
    "None or a nonzero integer",
    lambda v: v is None or (isinstance(v, numbers.Integral) and not _is_bool(v) and v != 0),
)


def subset_of(*values) -> Kind:
    """A tuple (or list) of distinct values among ``values``, in any order; empty allowed."""

    def test(v) -> bool:
        if not isinstance(v, (tuple, list)):
            return False
        chosen = [x for x in v if any(type(x) is type(o) and x == o for o in values)]
        return len(chosen) == len(v) and len(set(chosen)) == len(chosen)

    return Kind(f"a tuple of distinct values among {', '.join(map(repr, values))}", test)


def validate_params(constraints: dict, params: dict, owner: str) -> None:
    """Check every parameter in ``params`` against its declared constraints.

    Raises
    ------
    InvalidParameterError
        On the first parameter that satisfies none of its constraints.
    """
    for name, value in params.items():
        allowed = constraints.get(name)
        if allowed is None:
            raise InvalidParameterError(f"{owner}: parameter {name!r} has no declared constraints")
        if not any(value in constraint for constraint in allowed):
            what = " or ".join(str(c) for c in allowed)
            raise InvalidParameterError(f"{owner}: {name} must be {what}, got {value!r}")
