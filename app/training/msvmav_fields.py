"""``TrainRequest``'s top-level hyper-parameter fields, derived from MSVMAv's declaration
(``solver.msvmav_parameters.PARAMETERS``): names, types, enums (``Literal``), bounds, defaults
and descriptions are the estimator's, so the request cannot drift from the solver.

What the service adds is said here, once: the request's rows are features (no ``precomputed``
kernel), real values lie within ``MIN_MAGNITUDE`` … ``MAX_MAGNITUDE`` (docs/hardening.md), some
integers have an upper limit, and implementation knobs (``update``, ``linear_solver``,
``kernel_memory_mb``, ``warm_start``, ``acceleration``) are reached through ``params`` only.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Annotated, Any, Literal

from pydantic import Field

from app.core.ids import Whole
from app.training.parameters import MAX_MAGNITUDE, MIN_MAGNITUDE
from solver import DEFAULT_TOL, PARAMETERS, Interval, MSVMAv, Param, StrOptions

# The request's own fields set these for every algorithm (``seed``, ``calibration``,
# ``class_weight``).
_SET_BY_REQUEST = ("random_state", "calibration", "class_weight")

#: MSVMAv's hyper-parameters that are top-level fields of /train, in the declaration's order
HYPER_PARAMETERS: tuple[str, ...] = tuple(
    name for name, p in PARAMETERS.items() if not p.knob and name not in _SET_BY_REQUEST
)

# /train's stopping rule, stated here as well as in the estimator's defaults (the same since
# issue 49: a rule fits can meet; docs/solver.md, "Convergence").
SERVICE_DEFAULTS: dict[str, Any] = {"stop": "objective", "tol": DEFAULT_TOL}

# Values a request cannot take: its rows are feature vectors (no kernel matrix is uploaded).
NOT_OFFERED = {"kernel": ("precomputed",)}

# Upper limits of integer hyper-parameters (the estimator has none): work and memory grow with
# them, and a request is checked before any fit is queued. max_iter and degree start at 1 (0
# is the estimator's MAMC start and a constant kernel, not fits a service offers).
INTEGER_LIMITS = {"degree": (1, 20), "max_iter": (1, 1_000_000), "n_components": (1, 100_000)}


def _real_bounds(interval: Interval | None) -> dict[str, float]:
    """Bounds of a real field: the interval's, within the service's magnitudes."""
    left = None if interval is None else interval.left
    right = None if interval is None else interval.right
    closed = "neither" if interval is None else interval.closed
    bounds: dict[str, float] = {}
    if left is None:
        bounds["ge"] = -MAX_MAGNITUDE
    elif left == 0 and closed in ("right", "neither"):
        bounds["ge"] = MIN_MAGNITUDE  # positive: at least the smallest magnitude
    else:
        bounds["ge" if closed in ("left", "both") else "gt"] = left
    if right is None:
        bounds["le"] = MAX_MAGNITUDE
    else:
        bounds["le" if closed in ("right", "both") else "lt"] = right
    return bounds


def _annotation_and_bounds(name: str, p: Param) -> tuple[Any, dict[str, Any]]:
    """The field's type and its pydantic bounds, from the declared constraints: one kind of
    value, or named values beside a number (``gamma``: "scale", "auto" or a width), whose
    bounds then go with the number's type."""
    nullable = None in p.constraints
    rest = [c for c in p.constraints if c is not None]
    names = [c for c in rest if isinstance(c, StrOptions)]
    if names and len(rest) == 2:
        (number,) = [c for c in rest if not isinstance(c, StrOptions)]
        annotation, bounds = _one_kind(name, Param([number], p.doc))
        named: Any = Literal[offered(name)]  # type: ignore[valid-type]
        either = named | Annotated[annotation, Field(**bounds)]
        return (either | None if nullable else either), {}
    (constraint,) = rest  # every other top-level parameter declares one kind of value
    annotation, bounds = _one_kind(name, Param([constraint], p.doc))
    return (annotation | None if nullable else annotation), bounds


def _one_kind(name: str, p: Param) -> tuple[Any, dict[str, Any]]:
    """The type and bounds of a parameter declaring one kind of value."""
    (constraint,) = p.constraints
    if isinstance(constraint, StrOptions):
        annotation: Any = Literal[offered(name)]  # type: ignore[valid-type]
        bounds: dict[str, Any] = {}
    elif constraint == "boolean":
        annotation, bounds = bool, {}
    elif isinstance(constraint, Interval) and constraint.type is Integral:
        low, high = INTEGER_LIMITS.get(name, (constraint.left, constraint.right))
        annotation, bounds = Whole, {"ge": low, "le": high}
    elif constraint is Real or (isinstance(constraint, Interval) and constraint.type is Real):
        annotation = float
        bounds = _real_bounds(constraint if isinstance(constraint, Interval) else None)
    else:
        raise TypeError(f"{name}: no request field for the constraint {constraint!r}")
    return annotation, {k: v for k, v in bounds.items() if v is not None}


def offered(name: str) -> tuple[str, ...]:
    """The values a request may give a string hyper-parameter (``kernel``, ``approximation``),
    in the declaration's order: for forms that list them (the web interface's)."""
    (options,) = [c for c in PARAMETERS[name].constraints if isinstance(c, StrOptions)]
    return tuple(v for v in options.values if v not in NOT_OFFERED.get(name, ()))


def hyper_parameter_fields() -> dict[str, tuple[Any, Any]]:
    """``{name: (type, Field)}`` for ``pydantic.create_model``: every top-level
    hyper-parameter with the estimator's default and description."""
    defaults = {**MSVMAv().get_params(), **SERVICE_DEFAULTS}
    fields = {}
    for name in HYPER_PARAMETERS:
        p = PARAMETERS[name]
        annotation, bounds = _annotation_and_bounds(name, p)
        bounds = {k: v for k, v in bounds.items() if v is not None}
        fields[name] = (annotation, Field(defaults[name], description=p.doc, **bounds))
    return fields
