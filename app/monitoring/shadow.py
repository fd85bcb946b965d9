"""Shadow scoring: the rows a registered model serves through its default or ``production``
reference are scored again, off the request path, by the version its shadow's alias names (the
challenger), and both answers are stored side by side (``shadow_predictions``).

The request path calls ``sink`` once: a look-up in this process's cached set of running shadows
(no I/O), None when the request's model has none. Otherwise the request hands over its encoded
rows (a copy taken before its own scaling), ids and answers, appended to a bounded in-memory
queue. A daemon thread per process and database re-reads the running shadows when requests have
seen the set older than ``REFRESH_SECONDS`` (so a shadow started or stopped by another process
is seen within about 1.5 s; by this process's own routes, at once; a new process reads them
before its first request's rows), and every ``FLUSH_SECONDS``
scores the queued rows with the challenger the alias names then (cached like /predict's models)
and writes them, at most ``BATCH_ROWS`` per transaction, unless the shadow was stopped
meanwhile. Rows the served version itself would score as challenger (the alias moved onto it),
or whose challenger no longer fits (``mismatch``), are skipped and counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.core.db import placeholders
from app.core.runtime import Part, Runtime
from app.ingest.column_specs import feature_specs
from app.models.decisions import Decision, choose
from app.monitoring.background import BatchQueue
from app.registry.references import (
    SERVING_ALIAS,
    InvalidReference,
    Reference,
    UnknownReference,
    lookup,
    parse,
    runtime_reader,
)
from app.serving.acquire import acquire
from app.serving.model import ServedModel
from app.serving.scoring import score
from app.serving.target import Target

log = logging.getLogger("app.monitoring.shadow")

QUEUE_ROWS = 200_000
BATCH_ROWS = 20_000
FLUSH_SECONDS = 0.5
REFRESH_SECONDS = 1.0

_RUNNING = (
    "SELECT s.id, r.name, s.alias FROM shadow_runs s "
    "JOIN registered_models r ON r.id = s.registered_model_id WHERE s.stopped_at IS NULL"
)
_STILL_RUNNING = "SELECT id FROM shadow_runs WHERE id = ? AND stopped_at IS NULL"
_INSERT = (
    "INSERT INTO shadow_predictions (run_id, model_id, served_model_id, prediction_id, "
    "created_at, decision, predicted, clipped, served_decision, served_predicted, "
    "served_clipped) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


@dataclass(frozen=True)
class Run:
    """A running shadow: its id, the registered model and the challenger's alias."""

    id: int
    name: str
    alias: str


@dataclass
class Entry:
    """One request's rows: the encoded rows before scaling, their ids and the served answer."""

    run: Run
    served_model_id: int
    at: datetime
    X: Any
    ids: list[Any]
    scores: np.ndarray
    predicted: np.ndarray
    clipped: np.ndarray


# What a request hands over: (encoded rows, ids, scores, predicted indices, clipped).
Sink = Callable[[Any, list[Any], np.ndarray, np.ndarray, np.ndarray], Any]


def mismatch(served: ServedModel, challenger: ServedModel) -> tuple[str, str] | None:
    """Why ``challenger`` cannot score ``served``'s rows: ("classes" | "features", message), or
    None when both have the same classes and encode the same features alike."""
    ours = served.estimator.classes_.tolist()
    theirs = challenger.estimator.classes_.tolist()
    if ours != theirs:
        return "classes", f"model {challenger.id} has classes {theirs}; model {served.id} {ours}"
    a, b = feature_specs(served.encoding), feature_specs(challenger.encoding)
    names_a, names_b = [s.get("name") for s in a], [s.get("name") for s in b]
    if names_a != names_b:
        return (
            "features",
            f"model {challenger.id} has features {names_b[:20]}; model {served.id} {names_a[:20]}",
        )
    for spec_a, spec_b in zip(a, b, strict=True):
        if spec_a != spec_b:
            return (
                "features",
                f"model {challenger.id} encodes feature {spec_a.get('name')!r} differently from "
                f"model {served.id} (kind or categories)",
            )
    if served.n_features != challenger.n_features:
        return "features", f"model {challenger.id} takes {challenger.n_features} columns"
    return None


def served_reference(reference: str | None) -> bool:
    """Does ``reference`` name a registered model's served version: its name alone (the
    default) or ``name@production``?"""
    if reference is None:
        return False
    try:
        ref = parse(reference)
    except InvalidReference:
        return False
    return ref.name is not None and ref.version is None and ref.alias in (None, SERVING_ALIAS)


def own_decision(scores: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Binary: f(x); multi-class: the predicted class's score (as the prediction log keeps)."""
    if scores.ndim == 1:
        return scores
    return scores[np.arange(len(predicted)), predicted]


class ShadowScorer(BatchQueue[Entry]):
    """The running shadows, the queue and the thread scoring it, for one database."""

    label = "shadow scoring"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        engine = self.engine = runtime.engine
        self.sqlite = engine.dialect.name == "sqlite"
        self.runs: dict[str, Run] = {}
        super().__init__()
        self.skipped = 0  # rows the challenger could not score (see the module's docstring)
        self.written = 0
        self._fresh_until = 0.0
        self._refresh_asked = True
        self._fits: dict[tuple[int, int], tuple[str, str] | None] = {}
        # The running shadows read before the first request's rows are looked up, so that a
        # new process shadows its first requests too (not only from its thread's first round)
        self._guarded(self.refresh)
        self._start()  # at once: its rounds also re-read the running shadows

    # --- the request path ---------------------------------------------------------------------

    def sink(self, model_id: int | None, name: str | None, reference: str | None) -> Sink | None:
        """Where a request's rows go when its model has a running shadow; None otherwise."""
        if time.monotonic() >= self._fresh_until:
            self._fresh_until = time.monotonic() + REFRESH_SECONDS
            self._refresh_asked = True
        run = self.runs.get(name) if name is not None and self.runs else None
        if run is None or model_id is None or not served_reference(reference):
            return None
        at = datetime.now(UTC)
        return lambda X, ids, scores, idx, clipped: self.record(
            Entry(run, model_id, at, X, ids, scores, idx, clipped)
        )

    def record(self, entry: Entry) -> bool:
        return self._put(entry)

    def _rows_of(self, entry: Entry) -> int:
        return len(entry.ids)

    def _limits(self) -> tuple[int, int, float]:
        return QUEUE_ROWS, BATCH_ROWS, FLUSH_SECONDS

    # --- the routes' and the thread's ---------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the running shadows (this process's routes call it after a change)."""
        self._refresh_asked = False
        with self.engine.connect() as conn:
            rows = conn.exec_driver_sql(_RUNNING).all()
        self.runs = {name: Run(run_id, name, alias) for run_id, name, alias in rows}

    def forget(self, run_id: int) -> None:
        """Drop the queued rows of a stopped shadow."""
        self._discard(lambda e: e.run.id == run_id)

    def flush(self) -> None:
        """Score and write every queued row now."""
        with self._write_lock:
            while True:
                batch = self._take()
                if not batch:
                    return
                try:
                    self._score_and_write(batch)
                finally:  # (written, skipped or failed: the reads waiting for it go on)
                    self._finished(sum(len(e.ids) for e in batch))

    def _score_and_write(self, batch: list[Entry]) -> None:
        by_run: dict[int, list[Entry]] = {}
        for entry in batch:
            by_run.setdefault(entry.run.id, []).append(entry)
        for entries in by_run.values():
            try:
                rows = self._score(entries)
            except Exception:  # e.g. the challenger deleted meanwhile: the next run
                self.skipped += sum(len(e.ids) for e in entries)
                log.exception("shadow scoring: run %d failed", entries[0].run.id)
                continue
            if rows:
                self._write(entries[0].run.id, rows)

    def _tick(self) -> None:
        if self._refresh_asked:
            self._guarded(self.refresh)
        self._guarded(self.flush)

    def _loaded(self, model_id: int, stamp: Any = None) -> ServedModel:
        return acquire(self.runtime, Target(model_id, stamp=stamp), 0.0, None).model

    def _challenger(self, run: Run) -> tuple[ServedModel, Decision] | None:
        """The challenger the alias names and the rule it labels with (the alias's own, else
        its model's: app.models.decisions)."""
        text = f"{run.name}@{run.alias}"
        try:
            resolved, stamp = lookup(
                runtime_reader(self.runtime), Reference(text, name=run.name, alias=run.alias)
            )
        except UnknownReference:
            return None
        loaded = self._loaded(resolved.model_id, stamp)
        est = loaded.estimator
        return loaded, choose(est.calibrated, len(est.classes_), loaded.rule, resolved.rule)

    def _score(self, entries: list[Entry]) -> list[tuple[Any, ...]]:
        """The rows to write for one shadow's entries."""
        found = self._challenger(entries[0].run)
        challenger, rule = found if found is not None else (None, None)
        rows: list[tuple[Any, ...]] = []
        for entry in entries:
            if challenger is None or not self._fits_model(entry.served_model_id, challenger):
                self.skipped += len(entry.ids)
                continue
            scores = score(challenger, entry.X, rule=rule)  # the one scoring core
            served = own_decision(entry.scores, entry.predicted)
            rows += zip(
                [entry.run.id] * len(entry.ids),
                [challenger.id] * len(entry.ids),
                [entry.served_model_id] * len(entry.ids),
                [str(i) for i in entry.ids],
                [self._when(entry.at)] * len(entry.ids),
                scores.own_decision().tolist(),
                scores.index.tolist(),
                scores.clipped.tolist(),
                served.tolist(),
                entry.predicted.tolist(),
                entry.clipped.tolist(),
                strict=True,
            )
        return rows

    def _fits_model(self, served_id: int, challenger: ServedModel) -> bool:
        if served_id == challenger.id:
            return False
        key = (served_id, challenger.id)
        if key not in self._fits:
            self._fits[key] = mismatch(self._loaded(served_id), challenger)
        return self._fits[key] is None

    def _write(self, run_id: int, rows: list[tuple[Any, ...]]) -> None:
        """The rows, BATCH_ROWS per transaction, each only while the shadow still runs."""
        insert = placeholders(self.engine, _INSERT)
        running = placeholders(self.engine, _STILL_RUNNING)
        for start in range(0, len(rows), BATCH_ROWS):
            part = rows[start : start + BATCH_ROWS]
            try:
                with self.engine.begin() as conn:
                    if conn.exec_driver_sql(running, (run_id,)).first() is None:
                        self.skipped += len(rows) - start
                        return
                    conn.exec_driver_sql(insert, part)
            except Exception:
                self.dropped += len(rows) - start
                raise
            self.written += len(part)

    def _when(self, at: datetime) -> Any:
        # As app.core.orm.UTCDateTime stores it: naive UTC text on SQLite.
        if self.sqlite:
            return at.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
        return at


#: The runtime's scorer (its thread started when made: on first use).
SHADOW_SCORER: Part[ShadowScorer] = Part("shadow scorer", ShadowScorer, ShadowScorer.close)


def scorer(runtime: Runtime) -> ShadowScorer:
    """``runtime``'s database's scorer in this process (started on first use)."""
    return runtime.get(SHADOW_SCORER)


def sink(
    runtime: Runtime, model_id: int | None, name: str | None, reference: str | None
) -> Sink | None:
    """The request path's one call: where its rows go when its registered model has a running
    shadow and the request named it by its default or ``production`` reference; else None."""
    return scorer(runtime).sink(model_id, name, reference)
