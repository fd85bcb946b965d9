"""Hyper-parameter constraints and their check, for every estimator of the package: each class
declares ``_parameter_constraints`` {name: [constraint, ...]} (scikit-learn's convention) and
``fit`` calls ``validate_params``. Our own small version of scikit-learn's private
``_param_validation``, with the same messages (``The 'alpha' parameter of MSVMAv must be a
float in the range (0, inf). Got 0 instead.``), so that nothing here depends on a private API.

A constraint is an ``Interval``, ``StrOptions``, a type (its instances), ``None`` (the value
None), ``"boolean"`` or ``"random_state"`` (None, an int in [0, 2^32 - 1] or a
``numpy.random.RandomState``)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np


class InvalidParameterError(ValueError, TypeError):
    """A hyper-parameter of the wrong type or out of range (a ValueError and a TypeError, as
    scikit-learn's)."""


class Interval:
    """Numbers of ``type`` (``numbers.Integral`` or ``numbers.Real``) between ``left`` and
    ``right`` (None: unbounded); ``closed``: "left", "right", "both" or "neither"."""

    def __init__(self, type: type, left: float | None, right: float | None, *,
                 closed: str) -> None:
        self.type, self.left, self.right, self.closed = type, left, right, closed

    def is_satisfied_by(self, value: Any) -> bool:
        if not isinstance(value, self.type):
            return False
        if not isinstance(value, Integral) and math.isnan(value):
            return False
        if self.left is not None and (value < self.left or (
                value == self.left and self.closed not in ("left", "both"))):
            return False
        return self.right is None or value < self.right or (
            value == self.right and self.closed in ("right", "both"))

    def __str__(self) -> str:
        kind = "an int" if self.type is Integral else "a float"
        lo = "[" if self.closed in ("left", "both") else "("
        hi = "]" if self.closed in ("right", "both") else ")"
        left = "-inf" if self.left is None else self.left
        right = "inf" if self.right is None else self.right
        return f"{kind} in the range {lo}{left}, {right}{hi}"


class StrOptions:
    """One of a set of strings (``values``: them in the order given, for schemas and docs)."""

    def __init__(self, options: Iterable[str]) -> None:
        self.values = tuple(dict.fromkeys(options))
        self.options = set(self.values)

    def is_satisfied_by(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "a str among {" + ", ".join(repr(o) for o in sorted(self.options)) + "}"


_RANDOM_STATE = Interval(Integral, 0, 2**32 - 1, closed="both")


def _satisfied(constraint: Any, value: Any) -> bool:
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, bool | np.bool_)
    if constraint == "random_state":
        return (value is None or isinstance(value, np.random.RandomState)
                or _RANDOM_STATE.is_satisfied_by(value))
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint.is_satisfied_by(value)


def _describe(constraint: Any) -> str:
    if constraint is None:
        return "None"
    if constraint == "boolean":
        return "an instance of 'bool' or an instance of 'numpy.bool'"
    if constraint == "random_state":
        return f"None, {_RANDOM_STATE} or an instance of 'numpy.random.RandomState'"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__module__ + '.' + constraint.__qualname__!r}"
    return str(constraint)


def check_param(owner: str, name: str, value: Any, constraints: list[Any]) -> None:
    """InvalidParameterError unless ``value`` satisfies one of ``constraints``."""
    if any(_satisfied(c, value) for c in constraints):
        return
    described = [_describe(c) for c in constraints]
    expected = (described[0] if len(described) == 1
                else f"{', '.join(described[:-1])} or {described[-1]}")
    raise InvalidParameterError(
        f"The {name!r} parameter of {owner} must be {expected}. Got {value!r} instead.")


def check_estimator_param(cls: type, name: str, value: Any) -> None:
    """InvalidParameterError unless ``value`` is valid for the hyper-parameter ``name`` of the
    estimator class ``cls`` (a parameter without constraints takes anything)."""
    constraints = cls._parameter_constraints
    if name in constraints:
        check_param(cls.__name__, name, value, constraints[name])


@dataclass(frozen=True)
class Param:
    """One hyper-parameter's declaration: the values it takes (``constraints``, as above) and
    what it means (``doc``: the text of the estimator's docstring and of the service's
    request field). ``knob``: an implementation choice (how the same model is computed, or
    within what memory) rather than a hyper-parameter of the method."""

    constraints: list[Any]
    doc: str
    knob: bool = False


def constraints_of(declared: dict[str, Param]) -> dict[str, list[Any]]:
    """``_parameter_constraints`` of a declaration."""
    return {name: p.constraints for name, p in declared.items()}


def parameters_section(declared: dict[str, Param], defaults: dict[str, Any]) -> str:
    """The numpydoc Parameters section of a declaration (the estimator's docstring)."""
    lines = ["Parameters", "----------"]
    for name, p in declared.items():
        kinds = " or ".join(_describe(c) for c in p.constraints)
        lines.append(f"{name} : {kinds}, default {defaults[name]!r}")
        lines.extend(textwrap.wrap(p.doc + ".", 92, initial_indent="    ",
                                   subsequent_indent="    "))
    return "\n".join(lines)


def validate_params(estimator: Any) -> None:
    """Check every hyper-parameter of ``estimator`` against its class's constraints."""
    constraints = type(estimator)._parameter_constraints
    for name, value in estimator.get_params(deep=False).items():
        if name in constraints:
            check_param(type(estimator).__name__, name, value, constraints[name])


__all__ = ["Interval", "InvalidParameterError", "Param", "StrOptions", "check_estimator_param",
           "check_param", "constraints_of", "parameters_section", "validate_params"]
