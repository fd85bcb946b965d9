"""What the serving tests share (test_predict_serving, test_predict_numeric_rows): an independent
cold load's decision values; (test_serving_room, test_canary) the reads a request makes."""

from __future__ import annotations

import threading

import numpy as np
from sqlalchemy import event

from app.serving.acquire import cold


def _reference_decisions(app, model_id: int, X: np.ndarray) -> np.ndarray:
    """An independent cold load (no cache), through the estimator's public, validating
    decision_function."""
    with app.state.session_factory() as session:
        loaded = cold(session, model_id)
    return np.asarray(loaded.estimator.decision_function(loaded.transform(X)))


class Reads:
    """Every statement on the app's engine and every check on its reader pool, made by a
    thread other than the app's background ones (named ``msvmav-*``: the log's writer, a
    shadow's scorer, the checks renewed ahead)."""

    def __init__(self, app) -> None:
        runtime = app.state.runtime
        self.seen: list[str] = []
        self._targets = [
            (runtime.engine, "before_cursor_execute", self._statement),
            (runtime.reader.pool, "checkout", self._checkout),
            (runtime.engine.pool, "checkout", self._checkout),
        ]

    def _request_thread(self) -> bool:
        return not threading.current_thread().name.startswith("msvmav-")

    def _statement(self, _conn, _cursor, statement, *_args) -> None:  # noqa: ANN001
        if self._request_thread():
            self.seen.append(statement)

    def _checkout(self, *_args) -> None:  # noqa: ANN002
        if self._request_thread():
            self.seen.append("(a pooled connection taken)")

    def __enter__(self) -> Reads:
        for target, name, fn in self._targets:
            event.listen(target, name, fn)
        return self

    def __exit__(self, *_exc) -> None:  # noqa: ANN002
        for target, name, fn in self._targets:
            event.remove(target, name, fn)
