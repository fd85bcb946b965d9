"""One chunk of a batch job: its rows encoded with the model's encoder (bad rows found, with
their line, column and reason), scaled and scored as /predict scores them, and laid out as the
output table: the id column, ``label``, the decision value(s), the probabilities when the model
has them, and the pass-through columns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from app.ingest import Encoder
from app.ingest.column_specs import BadValueError, assemble
from app.serving.model import ServedModel
from app.serving.scoring import Scores
from app.serving.scoring import score as core_score

ROW_COLUMN = "row"


@dataclass
class RowErrors:
    """Bad rows of a chunk: positions in the chunk, with (column, reason) of their first bad
    cell (one entry per bad row)."""

    positions: list[int] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def add(self, position: int, column: str, reason: str) -> None:
        self.positions.append(position)
        self.columns.append(column)
        self.reasons.append(reason)


def _numeric_cells(values: np.ndarray, name: str, bad: np.ndarray, errors: RowErrors,
                   fill: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A numeric feature read as numbers: NaN (unless the column imputes it: its ``fill``) and
    infinities are the bad cells."""
    vals = values.astype(np.float64, copy=True)
    if fill is not None:
        vals[np.isnan(vals)] = fill
    wrong = ~np.isfinite(vals)
    for i in np.flatnonzero(wrong & ~bad).tolist():
        errors.add(i, name, "missing value" if math.isnan(vals[i]) else "infinite value")
    bad |= wrong
    vals[wrong] = 0.0
    return np.zeros(len(vals), dtype=np.int64), vals


def _token(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value if isinstance(value, str) else str(value)


def _token_cells(coder: Any, series: pd.Series, name: str, bad: np.ndarray, errors: RowErrors
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Cells coded as the training file's were (``ColumnCoder``), vectorised when every cell
    codes, else one by one, each bad cell named."""
    tokens = [_token(v) for v in series.tolist()]
    fast = coder.code_column(tokens)
    if fast is not None:
        return fast
    n = len(tokens)
    offs = np.zeros(n, dtype=np.int64)
    vals = np.zeros(n, dtype=np.float64)
    for i, tok in enumerate(tokens):
        try:
            offs[i], vals[i] = coder.code_token(tok)
        except BadValueError as exc:
            if not bad[i]:
                errors.add(i, name, str(exc))
            bad[i] = True
    return offs, vals


def encode_chunk(encoder: Encoder, frame: pd.DataFrame) -> tuple[np.ndarray, RowErrors]:
    """The chunk's feature matrix (n, width) and its bad rows (a bad row's cells are zeros)."""
    n = len(frame)
    bad = np.zeros(n, dtype=bool)
    errors = RowErrors()
    parts = []
    for coder, base, name in zip(encoder.coders, encoder.bases, encoder.names, strict=False):
        series = frame[name]
        if not coder.discrete and series.dtype.kind in "fiub":
            fill = coder.fill_code[1] if coder.impute else None
            offs, vals = _numeric_cells(series.to_numpy(), name, bad, errors, fill)
        else:
            offs, vals = _token_cells(coder, series, name, bad, errors)
        parts.append((base, offs, vals))
    X = assemble(n, encoder.width, parts, False)
    order = np.argsort(errors.positions, kind="stable")
    if len(order):
        errors = RowErrors([errors.positions[k] for k in order],
                           [errors.columns[k] for k in order],
                           [errors.reasons[k] for k in order])
    return X, errors  # type: ignore[return-value]


def output_columns(loaded: ServedModel, id_column: str | None, passthrough: list[str]
                   ) -> list[str]:
    """The output's column names, in order."""
    classes = [str(c) for c in class_values(loaded)]
    est = loaded.estimator
    names = [id_column or ROW_COLUMN, "label"]
    names += ["decision_value"] if len(classes) == 2 else [f"decision_{c}" for c in classes]
    names += ["margin"]
    if est.calibrated:
        names += [f"probability_{c}" for c in classes]
    return names + passthrough


def class_values(loaded: ServedModel) -> list[Any]:
    return loaded.class_values


def score(loaded: ServedModel, X: np.ndarray) -> Scores:
    """The encoded rows' answers from the scoring core every door uses
    (``app.serving.scoring.score``), so a batch's numbers are /predict's."""
    return core_score(loaded, X)


def output_frame(loaded: ServedModel, ids: Any, scored: Scores, columns: list[str],
                 extra: pd.DataFrame | None) -> pd.DataFrame:
    """The scored rows as the output table (``columns`` from ``output_columns``)."""
    scores, idx, proba = scored.decision, scored.index, scored.probabilities
    data: dict[str, Any] = {columns[0]: ids, "label": loaded.estimator.classes_[idx]}
    k = 2
    if scores.ndim == 1:
        data["decision_value"] = scores
        k += 1
    else:
        for j in range(scores.shape[1]):
            data[columns[k + j]] = scores[:, j]
        k += scores.shape[1]
    data["margin"] = scored.margin()
    k += 1
    if proba is not None:
        for j in range(proba.shape[1]):
            data[columns[k + j]] = proba[:, j]
    frame = pd.DataFrame(data)
    if extra is not None:
        for name in extra.columns:
            frame[name] = extra[name].to_numpy()
    return frame
