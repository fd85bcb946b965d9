"""The service's one JSON conversion policy: numpy values become plain Python ones and NaN/inf
become null (strict JSON has no NaN, nor has PostgreSQL's JSON type). Applied to what the
service stores and answers: persisted models' metadata (``MarginClassifier.to_dict``'s, which
the solver gives as plain values, ``solver.plain_values``), experiment results, model summaries,
job results and the fields of problem+json answers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def jsonable(value: Any) -> Any:
    """``value`` as strict JSON values: dict keys as text, tuples and arrays as lists, numpy
    scalars as Python ones, non-finite floats as None, anything else not JSON as its text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
