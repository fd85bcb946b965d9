"""What the serving tests share (test_predict_serving, test_predict_numeric_rows): an independent
cold load's decision values."""

from __future__ import annotations

import numpy as np

from app.serving.acquire import cold


def _reference_decisions(app, model_id: int, X: np.ndarray) -> np.ndarray:
    """An independent cold load (no cache), through the estimator's public, validating
    decision_function."""
    with app.state.session_factory() as session:
        loaded = cold(session, model_id)
    return np.asarray(loaded.estimator.decision_function(loaded.transform(X)))
