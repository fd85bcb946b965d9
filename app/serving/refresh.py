"""Checks renewed ahead of their window, off the request path (PostgreSQL's one-row /predict).

A request whose checks are younger than app.core.recheck's window is answered with no read
(``app.serving.acquire.held``). Without more, the first requests after the window
passes each make the reads themselves — a thread hop and a network round trip on the request
path, for every request in flight at that moment (bench/serve.py: the tail of a one-row
/predict on PostgreSQL). Here a request that finds a check older than half the window asks
for it to be made again in the background, once (one thread; a check already asked for is not
asked twice), and is answered from what it holds. The renewed check starts its age from before
its read, as every check does, so the bound of app.core.recheck is unchanged: nothing is ever
served from a check older than the window; a check the background could not make in time is
made by the request, as before.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy.exc import SQLAlchemyError

from app.core import recheck
from app.core.runtime import Part, Runtime
from app.models import service as models
from app.serving.target import Target, resolve_target

log = logging.getLogger("app.serving.refresh")
_LOC: list[str | int] = ["body", "model"]


class Refresher:
    """The background renewal of one runtime's serving checks (see the module's docstring)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.renewed = 0  # checks made again here (for tests and curiosity)
        self._asked: set[object] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="msvmav-recheck")
        self._closed = False

    def ahead(self, target: Target) -> None:
        """Renew ``target``'s checks in the background unless that is asked already."""
        key: object = target.reference if target.reference is not None else target.model_id
        with self._lock:
            if self._closed or key in self._asked:
                return
            self._asked.add(key)
        self._pool.submit(self._renew, key, target)

    def _renew(self, key: object, target: Target) -> None:
        try:
            if target.reference is not None:  # the resolution and the model's stamp: one read
                resolve_target(self.runtime, Target(reference=target.reference), _LOC)
            else:
                assert target.model_id is not None
                self._renew_model(target.model_id)
            self.renewed += 1
        except SQLAlchemyError as exc:  # the request makes the check itself when it is due
            log.info("serving check not renewed ahead: %s", type(exc).__name__)
        except Exception:  # a reference gone (404) or any other answer: the request's to give
            log.debug("serving check not renewed ahead", exc_info=True)
        finally:
            with self._lock:
                self._asked.discard(key)

    def _renew_model(self, model_id: int) -> None:
        checked_at = recheck.now()
        stamp = models.model_stamp(self.runtime, model_id)
        # A model gone (or changed) is left as it is: the request that finds its check due
        # reads and refuses it, as without renewals (a request already holding it is answered).
        cache = self.runtime.get(models.MODEL_CACHE)
        if cache.current(model_id, stamp) is not None:
            cache.checked(model_id, checked_at)

    def wait(self) -> None:
        """Until every renewal asked so far has ended (tests)."""
        self._pool.submit(lambda: None).result()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=True)


#: The runtime's refresher (its thread started on first use).
REFRESHER: Part[Refresher] = Part("serving checks renewed ahead", Refresher, Refresher.close)


def due(checked_at: float | None, seconds: float) -> bool:
    """Is a check made at ``checked_at`` older than half the window (renew it ahead)?"""
    return checked_at is not None and recheck.now() - checked_at >= seconds / 2
