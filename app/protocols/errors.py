"""Error answers of the protocol routes: problem+json like every other answer of the service,
with the members each protocol's clients read (``error`` for the Open Inference Protocol, whose
clients such as ``tritonclient`` raise its text; ``error_code`` and ``message`` for MLflow's)."""

from __future__ import annotations

from app.core.problems import TYPE_BASE, Problem

V2_TYPE = TYPE_BASE + "inference-error"
MLFLOW_TYPE = TYPE_BASE + "scoring-error"
# MLflow's scoring server: every client mistake is BAD_REQUEST, an unknown model
# RESOURCE_DOES_NOT_EXIST.
_MLFLOW_CODES = {404: "RESOURCE_DOES_NOT_EXIST", 413: "BAD_REQUEST", 415: "BAD_REQUEST"}


def v2_error(status: int, message: str) -> Problem:
    """An Open Inference Protocol error: problem+json whose ``error`` member (added to every
    answer under /v2 by app.core.problems) is ``message``."""
    return Problem(status, message, type=V2_TYPE)


def mlflow_error(status: int, message: str, **extra: object) -> Problem:
    """An MLflow scoring error: ``error_code`` and ``message`` plus problem+json members."""
    code = _MLFLOW_CODES.get(status, "BAD_REQUEST")
    return Problem(status, message, type=MLFLOW_TYPE, error_code=code, message=message, **extra)


def as_client_error(problem: Problem, field: str, *, v2: bool) -> Problem:
    """A /predict problem (a 422 naming a row, a 413 over a limit) in the protocol's terms: a
    422 becomes the protocols' 400; /predict's ``instances`` is called ``field`` (the
    request's own member), and the detail is the messages, which name the row."""
    status = 400 if problem.status == 422 else problem.status
    errors = [
        {
            **e,
            "loc": [field if p == "instances" else p for p in e.get("loc", [])],
            "field": str(e.get("field", "")).replace("instances", field, 1),
        }
        for e in problem.errors or []
    ]
    detail = "; ".join(str(e["message"]) for e in errors) or problem.detail
    out = v2_error(status, detail) if v2 else mlflow_error(status, detail)
    out.errors = errors or None
    return out
