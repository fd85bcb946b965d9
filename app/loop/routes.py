"""POST /registered-models/{name}/retrain and PUT, GET, DELETE /registered-models/{name}/policy:
thin wrappers of app.loop.service and app.loop.policy_service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Request, Response, status
from fastapi.responses import JSONResponse

from app.core.deps import RuntimeDep, SessionDep
from app.core.idempotency import (
    REPLAYED_RESPONSE_HEADER,
    Created,
    IdempotencyKeyHeader,
    create_once,
)
from app.core.problems import problem_responses
from app.jobs.schemas import JobOut
from app.loop import policy_service, service
from app.loop.schemas import PolicyConfig, PolicyOut, RetrainRequest
from app.registry.paths import NamePath

router = APIRouter(prefix="/registered-models", tags=["registry"])

_RETRAIN_EXAMPLES = {
    "production": {"summary": "Production's version on its rows and every fed-back row",
                   "value": {"alias": "production"}},
    "last day": {"summary": "Only the last day's fed-back rows",
                 "value": {"alias": "production", "window_seconds": 86400}},
}
_POLICY_EXAMPLES = {
    "promote": {
        "summary": "Retrain on 500 new fed-back rows, promote on a win, roll back on a loss",
        "value": {"trigger": {"min_new_labels": 500}, "judge": {"min_rows": 200,
                  "margin": 0.01}, "action": "promote"},
    },
    "nightly": {"summary": "Retrain daily, register only",
                "value": {"trigger": {"schedule_seconds": 86400}, "action": "register"}},
}


@router.post(
    "/{name}/retrain",
    status_code=status.HTTP_202_ACCEPTED,
    summary="Retrain a registered model on its fed-back rows",
    description="Queues a `retrain` job: the parent version's training rows (its dataset) "
    "plus the fed-back logged rows of the registered model (their logged inputs and true "
    "labels, one per prediction id) since the line's first version, or within "
    "`window_seconds`; fitted with the parent's hyper-parameters warm-started from its "
    "solution (or a new `search`), and cold on the same rows to measure the saving. The fit "
    "becomes the next version, its `lineage` in the registry. 202 with `Location: /jobs/{id}`.",
    response_model=JobOut,
    responses={202: {"description": "Job queued", "headers": {
        "Location": {"description": "/jobs/{id}", "schema": {"type": "string"}},
        **REPLAYED_RESPONSE_HEADER}}, **problem_responses(404, 422)},
)
def retrain_registered_model(
    session: SessionDep,
    http_request: Request,
    name: NamePath,
    request: Annotated[RetrainRequest, Body(openapi_examples=_RETRAIN_EXAMPLES)],
    idempotency_key: IdempotencyKeyHeader = None,
) -> JSONResponse:
    def create() -> Created:
        job = service.submit_retrain(session, name, request)
        body = JobOut.model_validate(job).model_dump(mode="json")
        return Created(status.HTTP_202_ACCEPTED, body, f"/jobs/{job.id}")

    payload = {"name": name, **request.model_dump(mode="json")}
    return create_once(session, http_request, idempotency_key, payload, create)


@router.put(
    "/{name}/policy",
    summary="Set a retraining policy",
    description="When to retrain (`trigger`), how to judge the challenger (`judge`) and what "
    "to do (`action`, `rollback`); evaluated by the API processes in the alert evaluator's "
    "rounds (docs/loop.md). Replacing a policy keeps where its cycle stands.",
    response_model=PolicyOut,
    responses=problem_responses(404, 422),
)
def put_policy(
    session: SessionDep,
    runtime: RuntimeDep,
    name: NamePath,
    body: Annotated[PolicyConfig, Body(openapi_examples=_POLICY_EXAMPLES)],
) -> PolicyOut:
    policy = policy_service.put(session, name, body)
    return PolicyOut.model_validate(policy_service.view(session, runtime, name, policy))


@router.get(
    "/{name}/policy",
    summary="A retraining policy, its state and the challenger's record",
    description="The policy, where its cycle stands, its last decision with the evidence, "
    "and the challenger's record beside production's on the same live rows now.",
    response_model=PolicyOut,
    responses=problem_responses(404),
)
def get_policy(session: SessionDep, runtime: RuntimeDep, name: NamePath) -> PolicyOut:
    policy = policy_service.get_or_raise(session, name)
    return PolicyOut.model_validate(policy_service.view(session, runtime, name, policy))


@router.delete(
    "/{name}/policy",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a retraining policy",
    description="Its aliases and versions stay; a running shadow keeps running.",
    responses=problem_responses(404),
)
def delete_policy(session: SessionDep, name: NamePath) -> Response:
    policy_service.delete(session, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
