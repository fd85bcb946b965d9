"""The one served model: what every door scores with — raw rows -> encoding -> imputation ->
scaling -> estimator — and what the protocols say about it (its features, classes, algorithm).

A ``ServedModel`` is frozen: made once by ``app.serving.acquire`` from the stored model (or by
``app.export.bundle`` from a bundle file), cached per database, shared by every request. What is
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
