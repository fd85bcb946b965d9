"""A stored model rebuilt from its row and arrays: the estimator, its min-max scaling and its
decision rule. Only the serving room (app.serving.acquire) calls it for the doors, and caches
what it gives as an ``app.serving.model.ServedModel``; the models package's own margin report
on a stored dataset rebuilds one uncached (a contract of pyproject.toml keeps it so)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.core import storage
from app.models.decisions import OOF_PREFIX, model_rule_text, stored_rule
from app.models.orm import Model, ModelArray
from solver import MinMaxScaling

ESTIMATOR_PREFIX = "est."
SCALING_PREFIX = "scaling."


@dataclass(frozen=True)
class Rebuilt:
    """What a stored model's arrays and row rebuild to."""

    estimator: Any
    scaling: MinMaxScaling | None
    rule: dict[str, Any] | None  # the stored model's decision rule (None: the default)
    nbytes: int  # its arrays' and JSON's bytes (the serving cache's budget)


def rebuild(session: Session, model: Model) -> Rebuilt:
    """Read the model's arrays and rebuild its estimator (no cache)."""
    from solver import model_from_dict

    arrays = storage.read_arrays(session, ModelArray, model.id, skip=OOF_PREFIX)
    est_arrays = {
        k[len(ESTIMATOR_PREFIX) :]: v for k, v in arrays.items() if k.startswith(ESTIMATOR_PREFIX)
    }
    scaling_arrays = {
        k[len(SCALING_PREFIX) :]: v for k, v in arrays.items() if k.startswith(SCALING_PREFIX)
    }
    estimator = model_from_dict({"meta": model.estimator_meta, "arrays": est_arrays})
    scaling = MinMaxScaling.from_arrays(scaling_arrays) if scaling_arrays else None
    nbytes = sum(a.nbytes for a in arrays.values()) + len(
        json.dumps([model.encoding, model.estimator_meta], default=str)
    )
    rule = stored_rule(model_rule_text(session, model.id), estimator)
    return Rebuilt(estimator, scaling, rule, nbytes)
