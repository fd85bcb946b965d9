"""The algorithms the service trains (``solver.algorithms.TABLE``) and the checks of their
hyper-parameters and grids that can be made before any fit (answered as 422 naming the field).

Hyper-parameter names are the estimators' ``get_params()`` keys; values are checked with the
estimators' own parameter constraints (``solver.params``), one parameter at a time so that the error
names the one at fault. ``kernel`` and ``random_state`` are never given per algorithm: the
request's ``kernel`` and ``seed`` fields set them.
"""

from __future__ import annotations

from typing import Any

from app.core.problems import invalid
from solver import (
    ALGORITHMS,
    PAPER_ORDER,
    InvalidParameterError,
    check_estimator_param,
    param_names,
)

# The request schemas' algorithm names, in the table's (the paper's) order.
RESERVED = {
    "kernel": "set by the request's `kernel` field",
    "random_state": "set by the request's `seed` field",
    "calibration": "set by the request's `calibration` field",
    "class_weight": "set by the request's `class_weight` field",
}
Loc = list[str | int]

# A real hyper-parameter (alpha, beta, gamma, C, ...) that is not 0 must lie within these
# magnitudes: below, a subnormal such as 5e-324 under- or overflows the fit; above, nothing
# finite comes out either (see docs/hardening.md).
MIN_MAGNITUDE = 1e-12
MAX_MAGNITUDE = 1e12


def tunable_names(algorithm: str) -> list[str]:
    return [k for k in param_names(algorithm) if k not in RESERVED]


def check_name(algorithm: str, loc: Loc) -> None:
    """Algorithm names are already checked by the request schemas' Literal; this covers
    names that arrive inside a dict (an experiment's per-algorithm grid)."""
    if algorithm not in ALGORITHMS:
        raise invalid(loc, f"unknown algorithm {algorithm!r}; use one of {list(PAPER_ORDER)}")


def check_value(algorithm: str, name: str, value: Any, loc: Loc) -> None:
    """422 at ``loc`` when the estimator's constraints reject ``value`` for ``name``."""
    if isinstance(value, dict | list):
        raise invalid(loc, f"{name} takes a single value, got {type(value).__name__}")
    default = ALGORITHMS[algorithm]().get_params().get(name)
    if isinstance(value, bool) and not isinstance(default, bool):  # JSON true is no number
        raise invalid(loc, f"{name} takes a number, not {str(value).lower()}")
    if isinstance(value, float) and value != 0 and not MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE:
        raise invalid(loc, f"{name}={value!r}: |value| must be 0 or in [1e-12, 1e12]")
    try:
        check_estimator_param(ALGORITHMS[algorithm], name, value)
    except InvalidParameterError as exc:
        raise invalid(loc, str(exc)) from None


def _check_name(algorithm: str, names: set[str], key: str, loc: Loc, reserved_use: str) -> None:
    """``key`` names a settable parameter of the estimator (not one the request fixes)."""
    if key in RESERVED:
        raise invalid(loc, f"{key} is {RESERVED[key]}, {reserved_use}")
    if key not in names:
        raise invalid(
            loc, f"unknown parameter of {algorithm}; its parameters are {tunable_names(algorithm)}"
        )


def check_params(algorithm: str, params: dict[str, Any], loc: Loc) -> dict[str, Any]:
    """Fixed hyper-parameters: every key a parameter of the estimator, every value valid."""
    names = set(param_names(algorithm))
    for key, value in params.items():
        _check_name(algorithm, names, key, [*loc, key], "not given here")
        check_value(algorithm, key, value, [*loc, key])
    return dict(params)


def check_grid(algorithm: str, grid: dict[str, Any], loc: Loc) -> dict[str, list[Any]]:
    """An explicit grid {parameter: non-empty list of values}."""
    if not grid:
        raise invalid(loc, "an explicit grid needs at least one parameter")
    names = set(param_names(algorithm))
    out: dict[str, list[Any]] = {}
    for key, values in grid.items():
        _check_name(algorithm, names, key, [*loc, key], "not searched over")
        if not isinstance(values, list) or not values:
            raise invalid([*loc, key], "give a non-empty list of values")
        for i, value in enumerate(values):
            check_value(algorithm, key, value, [*loc, key, i])
        out[key] = list(values)
    return out
