"""The Open Inference Protocol's model metadata and inference, on top of /predict's service.

A model takes raw features in training column order: one numeric tensor ``[n, d]``
(``input``), or one tensor per column named for it (``[n]`` or ``[n, 1]``; BYTES for a
categorical column), and optionally the rows' prediction ids as the input ``ids`` (BYTES or
INT32/INT64, ``[n]``: /predict's ``ids``). It answers ``label`` (``[n]``), ``decision`` (``[n]``
for two classes, ``[n, k]`` one-vs-rest for k classes), ``margin`` (``[n]``: the predicted
label's margin, app.serving.scoring.Scores.margin) and ``id`` (BYTES ``[n]``: the given ids
as text, else ``"{X-Request-ID}:{row}"``), and for a calibrated model ``probability``
(``[n, k]``, aligned with the classes). A numeric tensor goes to the scoring core as the array it
is (app.serving.serve: the one template, ``V2Door`` its codec); the outputs are the core's arrays.
So labels, decision values, probabilities, the prediction log and a running shadow are exactly
/predict's, and an infer by a name read less than app.core.recheck's window ago reads nothing
from the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.problems import Problem
from app.core.runtime import Runtime, runtime_of
from app.protocols.errors import as_client_error, v2_error
from app.protocols.ids import check_ids
from app.protocols.rules import request_rule
from app.protocols.tensors import BYTES, NUMERIC, InferRequest, OutputTensor, Tensor
from app.registry import service as registry
from app.registry.references import ResolvedModel, UnknownReference, is_name, resolve_path
from app.serving import codec, lanes
from app.serving.acquire import acquire
from app.serving.model import ServedModel as Served
from app.serving.scoring import Scores, check_rows
from app.serving.serve import Batch, serve
from app.serving.sinks import Scored
from app.serving.target import Target, route_key

MATRIX_INPUT = "input"
IDS = "ids"  # the input tensor of the rows' prediction ids
OUTPUTS = ("label", "decision", "margin", "id")
PROBABILITY = "probability"  # the output of a calibrated model
PLATFORM = "msvmav"
_LOC: list[str | int] = ["body", "instances"]  # where /predict's errors name the rows
R = TypeVar("R")


@dataclass(frozen=True)
class Described:
    """What the protocol says about a model: its name as the path gave it, the served model,
    the registered model's versions (metadata only), ascending."""

    name: str
    resolved: ResolvedModel
    served: Served
    versions: tuple[int, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return outputs_of(self.served)


def outputs_of(model: Served) -> tuple[str, ...]:
    """The output tensors ``model`` answers."""
    return (*OUTPUTS, PROBABILITY) if model.calibrated else OUTPUTS


def reference_text(name: str, version: str | None) -> str:
    """The registry reference ``/v2/models/{name}[/versions/{version}]`` names: ``{name}`` a
    reference (a bare name as everywhere, ``name@alias`` or a stored model's id), ``{version}``
    a version number of a registered name; UnknownReference when it names none."""
    if version is None:
        return name
    if not (version.isascii() and version.isdigit() and len(version) <= 12):
        raise UnknownReference(f"model version {version[:40]!r} is not a version number")
    if name.isdigit():
        raise UnknownReference(
            f"model {name} is a stored model's id; it has no versions (use a registered name)"
        )
    if not is_name(name):
        raise UnknownReference(f"{name[:120]!r} is not a registered model's name")
    return f"{name}/{int(version)}"


def described(session: Session, name: str, version: str | None) -> Described:
    """The model ``/v2/models/{name}[/versions/{version}]`` names with every version of its
    registered model (what the metadata lists), read in ``session``; 404 when there is none."""
    try:
        resolved = resolve_path(session, name, version)
    except UnknownReference as exc:
        raise v2_error(404, str(exc)) from None
    try:
        served = acquire(runtime_of(session), Target(resolved.model_id), 0.0, None,
                         session=session).model
    except Problem:  # deleted since it was resolved
        raise v2_error(404, f"model {name!r} not found") from None
    versions = _versions(session, resolved.name)
    if session.in_transaction():
        session.commit()
    return Described(name, resolved, served, versions)


def _versions(session: Session, registered_name: str | None) -> tuple[int, ...]:
    """Every version of the registered model, ascending: each one a client may request at
    ``/versions/{v}`` (none for a stored model's id)."""
    registered = registry.get(session, registered_name) if registered_name else None
    if registered is None:
        return ()
    return tuple(sorted(v["version"] for v in registry.versions_of(session, registered)))


def _label_datatype(classes: list[Any]) -> str:
    if all(type(c) is int for c in classes):
        return "INT64"
    if all(type(c) in (int, float) for c in classes):
        return "FP64"
    return BYTES


def metadata(described: Described) -> dict[str, Any]:
    """The model metadata response: name, versions (every version of the registered model,
    as the protocol's text), platform, inputs, outputs."""
    model = described.served
    if model.numeric_only:
        inputs = [{"name": MATRIX_INPUT, "datatype": "FP64", "shape": [-1, len(model.features)]}]
    else:
        inputs = [
            {
                "name": spec["name"],
                "datatype": BYTES if spec["kind"] == "categorical" else "FP64",
                "shape": [-1, 1],
            }
            for spec in model.features
        ]
    classes = model.class_values
    k = len(classes)
    return {
        "name": described.name,
        "versions": [str(v) for v in described.versions],
        "platform": f"{PLATFORM}/{model.algorithm}",
        "inputs": inputs,
        "outputs": [
            {"name": "label", "datatype": _label_datatype(classes), "shape": [-1]},
            {"name": "decision", "datatype": "FP64", "shape": [-1] if k <= 2 else [-1, k]},
            {"name": "margin", "datatype": "FP64", "shape": [-1]},
            {"name": "id", "datatype": BYTES, "shape": [-1]},
        ]
        + (
            [{"name": PROBABILITY, "datatype": "FP64", "shape": [-1, k]}]
            if PROBABILITY in described.outputs
            else []
        ),
    }


def _matrix(tensor: Tensor, model: Served) -> Any:
    """A ``[n, d]`` tensor as the model's encoded rows (a numeric tensor stays one array)."""
    if len(tensor.shape) != 2:
        shape = list(tensor.shape)
        raise v2_error(400, f"input {tensor.name!r} must have shape [n, d]; got {shape}")
    n, d = tensor.shape
    if tensor.datatype == BYTES:
        rows = [tensor.values[i * d : (i + 1) * d] for i in range(n)]
        return codec.encode_rows(model, rows, _LOC)
    return codec.encode_matrix(model, tensor.values.reshape(n, d), _LOC)


def _columns(inputs: list[Tensor], model: Served, name: str) -> Any:
    """One tensor per column as the model's encoded rows (in training column order)."""
    names = [spec["name"] for spec in model.features]
    given = {t.name: t for t in inputs}
    unknown = [t.name for t in inputs if t.name not in set(names)]
    if unknown:
        raise v2_error(400, f"inputs {unknown} are not columns of model {name!r}")
    missing = [n for n in names if n not in given]
    if missing:
        raise v2_error(400, f"inputs lack the columns {missing} of model {name!r}")
    columns = []
    for name in names:
        t = given[name]
        if len(t.shape) > 2 or (len(t.shape) == 2 and t.shape[1] != 1):
            shape = list(t.shape)
            raise v2_error(400, f"input {name!r} must have shape [n] or [n, 1]; got {shape}")
        columns.append(t.values if t.datatype == BYTES else t.values.reshape(-1).tolist())
    lengths = {len(c) for c in columns}
    if len(lengths) != 1:
        raise v2_error(400, f"the column inputs have different lengths {sorted(lengths)}")
    rows = [list(row) for row in zip(*columns, strict=True)]
    return codec.encode_rows(model, rows, _LOC)


def _split_ids(request: InferRequest, model: Served) -> tuple[list[Tensor], Any]:
    """The feature inputs, and the ids given as the input tensor ``ids`` (BYTES, INT32 or
    INT64, ``[n]`` or ``[n, 1]``; None when absent, or when the model has a column ``ids``).
    A tensor, not a request parameter: the protocol's parameters are scalars."""
    inputs = request.inputs
    tensor = next((t for t in inputs if t.name == IDS), None)
    if tensor is None or any(spec["name"] == IDS for spec in model.features):
        return inputs, None
    if len(tensor.shape) > 2 or (len(tensor.shape) == 2 and tensor.shape[1] != 1):
        raise v2_error(400, f"input 'ids' must have shape [n] or [n, 1]; got {list(tensor.shape)}")
    if tensor.datatype not in (BYTES, "INT32", "INT64"):
        raise v2_error(400, f"input 'ids' must be BYTES, INT32 or INT64; got {tensor.datatype}")
    values = tensor.values if tensor.datatype == BYTES else tensor.values.reshape(-1).tolist()
    return [t for t in inputs if t is not tensor], list(values)


def _check_inputs(inputs: list[Tensor], settings: Settings) -> int:
    """The inputs' row count, the row limit checked before anything is read from them."""
    if not inputs:
        raise v2_error(400, "inputs hold only ids; give the model's features too")
    n = inputs[0].shape[0]
    check_rows(n, settings, _LOC[-1])
    if n == 0:
        raise v2_error(400, "the inputs hold no rows")
    return n


def _features(inputs: list[Tensor], model: Served, name: str) -> Any:
    """The inputs as the model's encoded rows."""
    single = inputs[0] if len(inputs) == 1 else None
    names = {spec["name"] for spec in model.features}
    if single is not None and (
        single.name not in names or (len(single.shape) == 2 and single.shape[1] != 1)
    ):
        return _matrix(single, model)
    return _columns(inputs, model, name)


def _outputs(scores: Scores, ids: list[Any]) -> dict[str, OutputTensor]:
    """The core's arrays as output tensors."""
    n = scores.n
    datatype = _label_datatype(scores.classes)
    labels = scores.labels()
    label_values = labels if datatype == BYTES else np.asarray(labels, dtype=NUMERIC[datatype])
    decision = scores.decision
    tensors = {
        "label": OutputTensor("label", datatype, [n], label_values),
        "decision": OutputTensor("decision", "FP64", list(decision.shape), decision.reshape(-1)),
        "margin": OutputTensor("margin", "FP64", [n], scores.margin()),
        "id": OutputTensor("id", BYTES, [n], [str(i) for i in ids]),
    }
    if scores.probabilities is not None:
        P = scores.probabilities
        tensors[PROBABILITY] = OutputTensor(PROBABILITY, "FP64", list(P.shape), P.reshape(-1))
    return tensors


@dataclass(frozen=True)
class InferCall:
    """An infer request and the model name its path gave (the answer's ``model_name``)."""

    name: str
    request: InferRequest


Outputs = tuple[dict[str, Any], list[tuple[OutputTensor, bool]]]


class V2Door:
    """The Open Inference Protocol's codec: tensors in, output tensors out (each with whether
    it goes binary), and the response's JSON members."""

    def admit(self, call: InferCall, settings: Settings) -> None:
        return None  # the body's bounds were checked as it was parsed (app.protocols.tensors)

    def decode(
        self, call: InferCall, model: Served, target: Target, settings: Settings
    ) -> Batch:
        request = call.request
        wanted, outputs = request.outputs, outputs_of(model)
        if wanted is not None:
            unknown = [name for name in wanted if name not in outputs]
            if unknown:
                raise v2_error(400, f"unknown outputs {unknown}; this model has {list(outputs)}")
        inputs, ids = _split_ids(request, model)
        n = _check_inputs(inputs, settings)
        if ids is not None:
            ids = check_ids(ids, n, [IDS], v2=True)
        X = _features(inputs, model, call.name)
        # the request's own rule (parameters), else the reference's (an alias's), the model's
        rule = codec.decision_for(model, target, *request_rule(request.parameters, v2_error),
                                  ["parameters"])
        return Batch(X, ids, (IDS,), rule)

    def encode(self, call: InferCall, batch: Batch, scored: Scored) -> Outputs:
        request, scores = call.request, scored.scores
        tensors = _outputs(scores, scored.ids)
        wanted = request.outputs
        if wanted is None:
            chosen = [(tensors[name], request.binary_default) for name in outputs_of(scored.model)]
        else:
            chosen = [
                (tensors[name], request.binary_default if binary is None else binary)
                for name, binary in wanted.items()
            ]
        head: dict[str, Any] = {"model_name": call.name}
        resolved = scored.target.resolved
        if resolved is not None and resolved.version is not None:
            head["model_version"] = str(resolved.version)
        if request.id is not None:
            head["id"] = request.id
        head["parameters"] = {"decision_rule": scores.rule.name(scores.classes),
                              "n_clipped": scores.n_clipped}
        if resolved is not None and resolved.arm is not None:  # the alias has a canary
            head["parameters"]["arm"] = resolved.arm
        return head, chosen

    def refused(self, call: InferCall, problem: Problem, stage: str) -> Exception:
        if stage == "acquire":  # the path's model: not found (a malformed reference too)
            errors = problem.errors or []
            return v2_error(404, str(errors[0]["message"]) if errors else problem.detail)
        return as_client_error(problem, "inputs", v2=True)


V2 = V2Door()


def _reference(name: str, version: str | None, request: InferRequest,
               key: str | None) -> Target:
    """The path's model; an alias's canary arm chosen by ``key`` (the ``X-Msvmav-Route-Key``
    header), else by the request's ``id``."""
    try:
        text = reference_text(name, version)
    except UnknownReference as exc:
        raise v2_error(404, str(exc)) from None
    ids = None if request.id is None else [request.id]
    return Target(reference=text, routed=True, route_key=route_key(key, ids))


def infer(runtime: Runtime, name: str, version: str | None, request: InferRequest,
          key: str | None = None) -> Outputs:
    """The response's JSON members and its output tensors, each with whether it goes binary:
    app.serving.serve with ``V2Door``, the model named by its path."""
    return serve(runtime, V2, InferCall(name, request), _reference(name, version, request, key),
                 loc=None)


async def infer_soon(
    runtime: Runtime,
    name: str,
    version: str | None,
    request: InferRequest,
    render: Callable[[Outputs], R],
    key: str | None = None,
) -> R:
    """``render(infer(...))`` in the cheapest lane the request may take (app.serving.lanes:
    a few rows for a model this process holds, on the loop)."""
    first = request.inputs[0].shape if request.inputs else ()
    rows = first[0] if first else None
    return await lanes.serve_soon(runtime, V2, InferCall(name, request),
                                  _reference(name, version, request, key), rows=rows, loc=None,
                                  render=render)
