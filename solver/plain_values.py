"""numpy values as plain Python ones, for the estimators' ``to_dict`` and the experiments'
results: arrays and tuples as lists, numpy scalars as Python numbers, dict keys as text. Numbers
are kept as they are (NaN stays NaN): how a non-finite number is written out (strict JSON has
none) is the service's policy (``app.core.jsonable``), not the library's."""

from __future__ import annotations

from typing import Any

import numpy as np


def plain(value: Any) -> Any:
    """``value`` with every numpy array, scalar and tuple inside it as plain Python values."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    return value
