"""The one served model: what every door scores with — raw rows -> encoding -> imputation ->
scaling -> estimator — and what the protocols say about it (its features, classes, algorithm).

A ``ServedModel`` is frozen: made once by ``app.serving.acquire`` from the stored model (or by
``app.export.bundle.load_bundle`` from a bundle file: the same type, the same pipeline, so a
bundle predicts as /predict does, labels by the exported rule included), cached per database,
shared by every request. ``decide`` is the pipeline's end every door's core
(app.serving.scoring) and a bundle's ``predict`` / ``decision_function`` / ``predict_proba``
(raw rows, records or a DataFrame) share. What is
derived from its fields (the row encoder, the classes as JSON, the feature specs) is computed
on first use and kept (``functools.cached_property``, which a frozen dataclass allows); other
rooms keep their own derived values in ``extras`` (e.g. monitoring's training reference), never
a field of the model itself. When its existence was last checked is the cache's to know
(app.models.service.ModelCache.checked_at), not the model's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from app.core.jsonable import jsonable
from app.ingest import Encoder
from app.ingest.column_specs import feature_specs
from app.ingest.imputation import apply_fills
from app.models.decisions import Decision, choose
from solver import MinMaxScaling

# A stored model's stamp (app.models.service.model_stamp): its identity beyond its id.
Stamp = tuple[Any, ...]


@dataclass(frozen=True, eq=False)
class ServedModel:
    """A model ready to score (see the module's docstring)."""

    id: int
    n_features: int
    encoding: dict[str, Any]
    estimator: Any
    scaling: MinMaxScaling | None
    # The stored model's decision rule (app.models.decisions; None: the default)
    rule: dict[str, Any] | None = None
    # Identity of the stored row beyond its id (a database rebuilt under the same URL)
    stamp: Stamp | None = None
    nbytes: int = 0
    algorithm: str = ""
    # The encoded columns' names (the stored model's, or a bundle's model.json)
    feature_names: tuple[str, ...] = ()
    # Derived values other rooms keep with the model (built on first use, never a field's value)
    extras: dict[str, Any] = field(default_factory=dict, repr=False)

    @cached_property
    def encoder(self) -> Encoder:
        """The row encoder of the training data's stored encoding."""
        return Encoder.from_dict(self.encoding)

    @cached_property
    def class_values(self) -> list[Any]:
        """The model's classes as JSON values."""
        return jsonable(self.estimator.classes_.tolist())

    @cached_property
    def features(self) -> list[dict[str, Any]]:
        """The stored encoding's feature specs, in column order."""
        return list(feature_specs(self.encoding))

    @property
    def calibrated(self) -> bool:
        """Does it answer class probabilities (fitted with a calibrator)?"""
        return bool(self.estimator.calibrated)

    @property
    def numeric_only(self) -> bool:
        return all(spec["kind"] != "categorical" for spec in self.features)

    def impute(self, X: Any, *, copy: bool = True) -> Any:
        """An encoded X (a stored dataset's rows) with its missing cells (NaN) filled as the
        model's imputation says (``copy=False``: a dense X in place); X itself when the model
        imputes nothing."""
        if not any("impute" in c for c in self.encoding.get("columns") or ()):
            return X
        if not sp.issparse(X) and copy:
            X = np.array(X, dtype=np.float64)
        return apply_fills(X, self.encoding)

    def transform(self, X: Any, *, copy: bool = True) -> Any:
        """X (imputed, ``impute``) scaled like the training data (``copy=False``: a dense
        float64 X in place)."""
        X = self.impute(X, copy=copy)
        return self.scaling.transform(X, copy=copy) if self.scaling is not None else X

    @cached_property
    def decision_rule(self) -> Decision:
        """The model's own rule (or the default), for a request that names no other."""
        est = self.estimator
        return choose(est.calibrated, len(est.classes_), self.rule)

    @property
    def classes_(self) -> np.ndarray:
        return self.estimator.classes_

    def scale(self, X: Any) -> tuple[Any, np.ndarray]:
        """Encoded X scaled like the training data (in place when dense) and clipped to it,
        and per row whether any feature fell outside [0, 1] before the clip (outside the
        training range)."""
        scaling = self.scaling
        if scaling is None:
            return X, np.zeros(X.shape[0], dtype=bool)
        Xs = scaling.transform(X, clip=False, copy=False)
        if sp.issparse(Xs):
            data = Xs.data
            outside = (data < 0.0) | (data > 1.0)
            rows = np.repeat(np.arange(Xs.shape[0]), np.diff(Xs.indptr))
            clipped = np.bincount(rows[outside], minlength=Xs.shape[0]) > 0
            np.clip(data, 0.0, 1.0, out=data)
            Xs.eliminate_zeros()
            return Xs, clipped
        # (the ufuncs' reductions and ndarray.clip without NumPy's Python wrappers around them,
        # which cost a one-row request more than the arithmetic)
        clipped = (np.minimum.reduce(Xs, axis=1) < 0.0) | (np.maximum.reduce(Xs, axis=1) > 1.0)
        return Xs.clip(0.0, 1.0, out=Xs), clipped

    def decide(self, X: Any, rule: Decision | None = None) -> Decided:
        """Encoded, checked rows X (scaled in place) through the estimator: decision values,
        probabilities (a calibrated model's), labels by ``rule`` (default: the model's own)
        applied to the probabilities, so label and probabilities never contradict each other."""
        est = self.estimator
        Xs, clipped = self.scale(X)
        # ``decision_values``: X passed the caller's checks, so without scikit-learn's input
        # validation again, which for one row costs more than the prediction itself.
        decision = np.asarray(est.decision_values(Xs), dtype=np.float64)
        proba = (np.asarray(est.probabilities(decision), dtype=np.float64)
                 if est.calibrated else None)
        rule = self.decision_rule if rule is None else rule
        return Decided(Xs, clipped, decision, proba, rule.labels(proba, decision), rule)

    # -- raw rows, as a bundle's user gives them (app.export.bundle.load_bundle) -------------
    def encode(self, rows: Any) -> np.ndarray:
        """Raw rows -> the encoded float64 matrix, exactly as /predict encodes its
        ``instances``: lists (the feature columns in training order, or every input column) or
        records keyed by column name, a 2-D numpy array, or a pandas DataFrame with the
        training columns. IngestError names a bad cell."""
        if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # a DataFrame: by column name
            rows = rows.to_dict("records")
        elif isinstance(rows, np.ndarray):
            rows = rows.tolist()
        X = self.encoder.transform_rows(list(rows))
        bad = ~np.isfinite(X)
        if bad.any():  # (what /predict refuses with a 422: app.serving.codec.check_matrix)
            row = int(np.argwhere(bad)[0][0])
            raise ValueError(f"row {row} has a missing, NaN or infinite value")
        return X

    def decision_function(self, rows: Any) -> np.ndarray:
        """Decision values of raw rows ((n,) for two classes, (n, k) one-vs-rest)."""
        return self.decide(self.encode(rows)).decision

    def predict(self, rows: Any) -> np.ndarray:
        """The labels of raw rows, by the model's decision rule (as /predict labels them)."""
        return self.classes_[self.decide(self.encode(rows)).index]

    def predict_proba(self, rows: Any) -> np.ndarray:
        """(n, k) class probabilities in the order of ``classes_`` (a calibrated model's,
        equal to /predict's ``probabilities``); ValueError for a model without calibration."""
        proba = self.decide(self.encode(rows)).probabilities
        if proba is None:
            raise ValueError(f"model {self.id} was fitted without calibration: no probabilities")
        return proba


@dataclass(frozen=True)
class Decided:
    """Rows through the estimator (``ServedModel.decide``), as arrays aligned with them."""

    scaled: Any  # the rows as the estimator saw them (scaled, clipped)
    clipped: np.ndarray  # (n,) bool: a feature fell outside the training range
    decision: np.ndarray  # (n,) binary f(x), positive for classes[1]; (n, k) one-vs-rest
    probabilities: np.ndarray | None  # (n, k) per class, when the model is calibrated
    index: np.ndarray  # (n,) the label's index into the classes
    rule: Decision  # the rule that made the labels
