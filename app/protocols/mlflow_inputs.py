"""MLflow's scoring payloads (``application/json``) as /predict's instances.

* ``dataframe_split``: ``{"columns": [...], "data": [[...], ...]}`` (pandas' ``orient="split"``;
  ``index`` is ignored); without ``columns`` the rows are in training column order;
* ``dataframe_records``: ``[{"column": value, ...}, ...]``;
* ``instances`` / ``inputs``: rows (lists in column order, or records), or one list per column
  (``{"column": [values...], ...}``).

``params`` may hold ``ids``, the rows' prediction ids, one per row (/predict's ``ids``), and
``predict_method``: ``"predict"`` (the default: each row's id, label, decision value and
probabilities, as /predict gives them) or ``"predict_proba"`` (each row's class probabilities,
in the order of the model's classes, as MLflow's pyfunc of a scikit-learn classifier logged with
``pyfunc_predict_fn="predict_proba"`` answers). ``decision_rule`` ("argmax") or ``threshold``
set the request's own decision rule (app.protocols.rules), as /predict's ``rule`` and
``threshold``.
"""

from __future__ import annotations

from typing import Any

from app.core.config import Settings
from app.core.problems import Problem
from app.protocols.errors import as_client_error, mlflow_error
from app.protocols.ids import check_ids
from app.protocols.rules import RULE_KEYS
from app.serving.scoring import check_rows

KEYS = ("dataframe_split", "dataframe_records", "instances", "inputs")
METHODS = ("predict", "predict_proba")


def _split(value: Any) -> list[Any]:
    if not isinstance(value, dict) or not isinstance(value.get("data"), list):
        raise mlflow_error(400, "dataframe_split must be an object with a `data` list of rows")
    data, columns = value["data"], value.get("columns")
    if columns is None:
        return data
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise mlflow_error(400, "dataframe_split.columns must be a list of column names")
    for i, row in enumerate(data):
        if not isinstance(row, list) or len(row) != len(columns):
            raise mlflow_error(
                400,
                f"dataframe_split.data[{i}] must be a list of {len(columns)} values, one per "
                "column",
            )
    return [dict(zip(columns, row, strict=True)) for row in data]


def _columns(value: dict[str, Any], key: str) -> list[Any]:
    """``{"column": [values...]}`` as records."""
    if not all(isinstance(v, list) for v in value.values()):
        raise mlflow_error(400, f"{key} as an object must map each column to a list of values")
    lengths = {len(v) for v in value.values()}
    if len(lengths) > 1:
        raise mlflow_error(400, f"{key}: the columns have different lengths {sorted(lengths)}")
    names = list(value)
    return [dict(zip(names, row, strict=True)) for row in zip(*value.values(), strict=True)]


def _rows(key: str, value: Any) -> list[Any]:
    if key == "dataframe_split":
        return _split(value)
    if key == "dataframe_records":
        if not isinstance(value, list):
            raise mlflow_error(400, "dataframe_records must be a list of records")
        return value
    if isinstance(value, dict):
        return _columns(value, key)
    if not isinstance(value, list):
        raise mlflow_error(400, f"{key} must be a list of rows or an object of columns")
    return value


def _count(key: str, value: Any) -> int:
    """Rows the payload holds, known before anything is built for them."""
    if key == "dataframe_split" and isinstance(value, dict):
        value = value.get("data")
    if isinstance(value, dict):
        return max((len(v) for v in value.values() if isinstance(v, list)), default=0)
    return len(value) if isinstance(value, list) else 0


def instances(
    payload: Any, settings: Settings
) -> tuple[str, list[Any], list[Any] | None, str]:
    """The payload's key, its rows as /predict's ``instances``, ``params.ids`` (checked: one
    valid id per row) and ``params.predict_method``; 400 for a payload MLflow would refuse,
    413 beyond MSVMAV_MAX_PREDICT_INSTANCES rows."""
    expected = ", ".join(f"`{k}`" for k in KEYS)
    if not isinstance(payload, dict):
        raise mlflow_error(400, f"the body must be a JSON object with one of the keys {expected}")
    given = [k for k in KEYS if k in payload]
    if len(given) != 1:
        raise mlflow_error(
            400, f"the body must have exactly one of the keys {expected}; it has {given or 'none'}"
        )
    key = given[0]
    others = sorted(set(payload) - {key, "params"})
    if others:
        raise mlflow_error(400, f"unknown keys {others}; expected one of {expected} (and params)")
    params = payload.get("params") or {}
    if not isinstance(params, dict) or set(params) - {"ids", "predict_method", *RULE_KEYS}:
        raise mlflow_error(
            400,
            "params may hold only ids (one prediction id per row), predict_method and a "
            "decision rule (decision_rule \"argmax\" or threshold); these models take no other "
            "inference parameters",
        )
    method = params.get("predict_method", "predict")
    if method not in METHODS:
        raise mlflow_error(400, f"params.predict_method must be one of {list(METHODS)}")
    try:
        check_rows(_count(key, payload[key]), settings, key)
    except Problem as problem:
        raise as_client_error(problem, key, v2=False) from None
    rows = _rows(key, payload[key])
    if not rows:
        raise mlflow_error(400, f"{key} holds no rows")
    ids = params.get("ids")
    if ids is not None:
        ids = check_ids(ids, len(rows), ["params", "ids"], v2=False)
    return key, rows, ids, method
