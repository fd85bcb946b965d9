"""Export a stored model (ONNX graph or bundle) and import a bundle as a new stored model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.orm import Session

from app.core import storage
from app.core.jsonable import jsonable
from app.core.problems import Problem, conflict, invalid, too_large
from app.core.runtime import runtime_of
from app.export.bundle import BundleError, BundleTooLargeError, read_bundle, write_bundle
from app.export.expansion import UnsupportedModelError, expansion
from app.ingest.column_specs import feature_specs
from app.models import service as models
from app.models.decisions import RuleError, rule_text, set_model_rule
from app.models.orm import Model, ModelArray
from app.predict.thresholds import rule_evaluation, with_rule_evaluation
from app.serving.acquire import acquire
from app.serving.codec import decision_for
from app.serving.model import ServedModel
from app.serving.target import Target, reference_fields
from solver import check_rule

ONNX_MISSING = (
    "format=onnx needs the onnx package, which this installation lacks: "
    "pip install 'msvmav[export]' (format=bundle works without it)"
)
_FILE = ["body", "file"]


class ImportedMeta(BaseModel):
    """model.json's fields a stored model needs (the rest is kept under params/summary)."""

    algorithm: str = Field(min_length=1, max_length=64)
    params: dict[str, Any]
    scaling: str = Field(max_length=16)
    classes: list[Any]
    n_features: int = Field(ge=1)
    feature_names: list[str]
    summary: dict[str, Any] = Field(default_factory=dict)
    n_train: int = Field(0, ge=0)
    n_test: int = Field(0, ge=0)
    holdout_accuracy: float | None = None
    fit_seconds: float = Field(0.0, ge=0)
    n_iter: int = Field(0, ge=0)


_REF: list[str | int] = ["path", "model_ref"]


@dataclass(frozen=True)
class Exported:
    """What a reference exports: the stored model, loaded, and the rule that labels its
    answers (the alias's, else the model's, else the default: None)."""

    row: Model
    loaded: ServedModel
    target: Target
    rule: dict[str, Any] | None
    source: str


def _stored(session: Session, ref: str) -> Exported:
    """The model a reference names (a stored model's id, ``name@alias``, ``name/version``,
    ``name``; 404 when unknown) and the rule its answers are labelled by, as /predict's
    (``decision_for``: the alias's rule, else the model's)."""
    loaded, target = acquire(runtime_of(session), Target(reference=ref), 0.0, None,
                             ref_loc=_REF, session=session)
    canary = target.resolved.canary if target.resolved is not None else None
    if canary is not None:  # a file answers by one version: it cannot split traffic
        raise conflict(
            f"alias {target.resolved.alias!r} of registered model {target.resolved.name!r} has a "
            f"canary (version {canary.version} answers {canary.percent:g} % of its requests, "
            f"version {target.resolved.version} the rest): a file cannot split traffic; export "
            f"'{target.resolved.name}/{target.resolved.version}' or "
            f"'{target.resolved.name}/{canary.version}', or end the canary first")
    row = models.get_or_raise(session, loaded.id)
    decision = decision_for(loaded, target)
    rule = None if decision.source == "default" else decision.rule
    return Exported(row, loaded, target, rule, decision.source)


def _origin(exported: Exported) -> dict[str, Any]:
    """Which reference the file was exported by, and where its rule came from."""
    return {**reference_fields(exported.target), "decision_rule_source": exported.source}


def _metadata(row: Model) -> dict[str, Any]:
    """model.json: everything GET /models/{id} shows, and where the model came from."""
    return jsonable(
        {
            "algorithm": row.algorithm,
            "params": row.params,
            "scaling": row.scaling,
            "classes": row.classes,
            "n_features": row.n_features,
            "feature_names": row.feature_names,
            "summary": row.summary,
            "n_train": row.n_train,
            "n_test": row.n_test,
            "holdout_accuracy": row.holdout_accuracy,
            "fit_seconds": row.fit_seconds,
            "n_iter": row.n_iter,
            "source": {
                "model_id": row.id,
                "job_id": row.job_id,
                "dataset_id": row.dataset_id,
                "created_at": row.created_at.isoformat() if row.created_at else None,
            },
        }
    )


def export_bundle(session: Session, ref: str) -> tuple[int, bytes]:
    """(the model's id, its bundle): model.json's ``decision_rule`` is the rule of the
    reference (an alias's, else the model's; null: the default), ``exported_by`` the reference
    and the rule's source."""
    exported = _stored(session, ref)
    row, loaded = exported.row, exported.loaded
    meta = _metadata(row)
    if exported.source == "alias" and exported.rule is not None:
        # the bundle's model reports the accuracy of the labels the alias's rule serves
        evaluation = rule_evaluation(session, loaded, exported.rule)
        if evaluation is not None:
            summary, accuracy = with_rule_evaluation(meta["summary"] or {}, evaluation)
            meta["summary"] = jsonable(summary)
            if accuracy is not None:
                meta["holdout_accuracy"] = accuracy
    return row.id, write_bundle(
        meta={**meta, "decision_rule": exported.rule, "exported_by": _origin(exported)},
        encoding=row.encoding,
        estimator=loaded.estimator,
        scaling=loaded.scaling,
    )


def export_onnx(session: Session, ref: str) -> tuple[int, bytes]:
    """(the model's id, its ONNX graph labelling by the reference's rule); 422 naming a model
    kind that cannot be expressed, 501 without the onnx package."""
    try:
        from app.export.onnx_graph import build_onnx
    except ImportError:
        raise Problem(501, ONNX_MISSING, type="about:blank") from None
    exported = _stored(session, ref)
    row, loaded = exported.row, exported.loaded
    origin = {f"msvmav.{k}": str(v) for k, v in _origin(exported).items() if v is not None}
    try:
        exp = expansion(loaded.estimator)
        meta = {"msvmav.model_id": str(row.id), "msvmav.algorithm": row.algorithm,
                "msvmav.decision_rule": rule_text(exported.rule) or "argmax", **origin}
        return row.id, build_onnx(
            feature_specs(row.encoding),
            loaded.scaling,
            exp,
            name=f"msvmav_model_{row.id}",
            metadata=meta,
            calibrator=loaded.estimator.calibrator_,
            rule=exported.rule,
        )
    except UnsupportedModelError as exc:
        raise invalid(_REF, str(exc)) from None


def _row_of(bundle: Any) -> Model:
    try:
        meta = ImportedMeta.model_validate(bundle.meta)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise invalid(_FILE, f"model.json: {where}: {first['msg']}", member="model.json") from None
    return Model(
        job_id=None,
        dataset_id=None,
        encoding=bundle.encoding,
        estimator_meta=bundle.estimator_meta,
        **meta.model_dump(),
    )


def _bundle_rule(meta: dict[str, Any]) -> dict[str, Any] | None:
    """model.json's decision rule (None: the default), checked; 422 naming the member."""
    rule = meta.get("decision_rule")
    if rule is None:
        return None
    try:
        checked = check_rule(rule, len(meta.get("classes") or ()))
    except RuleError as exc:
        raise invalid(_FILE, f"model.json: decision_rule: {exc}", member="model.json") from None
    if isinstance(rule.get("objective"), dict):
        checked["objective"] = rule["objective"]
    return checked


def import_bundle(session: Session, content: bytes, max_bytes: int) -> Model:
    """Check the bundle whole, then add (not commit: the caller commits, with its idempotency
    record) the model with its arrays; nothing is added for a refused bundle: 413 beyond
    ``max_bytes``, 422 naming the member at fault."""
    try:
        bundle = read_bundle(content, max_bytes)
    except BundleTooLargeError as exc:
        raise too_large(f"{exc} (MSVMAV_MAX_UPLOAD_BYTES)", field="file") from None
    except BundleError as exc:
        raise invalid(_FILE, str(exc), member=exc.member) from None
    row = _row_of(bundle)
    rule = _bundle_rule(bundle.meta)
    session.add(row)
    session.flush()
    set_model_rule(session, row.id, rule_text(rule))
    blobs = {models.ESTIMATOR_PREFIX + k: v for k, v in bundle.estimator_arrays.items()}
    blobs |= {models.SCALING_PREFIX + k: v for k, v in bundle.scaling_arrays.items()}
    session.add_all(
        ModelArray(model_id=row.id, name=k, data=storage.array_to_bytes(v))
        for k, v in blobs.items()
    )
    return row
