"""How old a serving request's checks may be: that its model still exists, that its registry
reference still points there, that its API key is not revoked.

Each of those is one indexed read. On a server database (PostgreSQL) it is a network round
trip, and the thread hop it needs to keep the event loop free cost a one-row /predict more than
half its throughput (bench/serve.py). On SQLite it is a read of a local file (~20 µs alone), but
under load it cost more: the driver lets go of the GIL for the read, the prediction log's writer
takes it, and the loop waits to get it back (~85 µs a key check under ``wrk -c8``; with keys,
0.69-0.74x the bare route against 0.94-1.0x without the reads; bench/serve.py, Intel Xeon). So on
both databases a check made at most ``serve_recheck_seconds`` ago (MSVMAV_SERVE_RECHECK_SECONDS,
default 1 s) is trusted: a request needs no read while its checks are that fresh, and is
answered on the event loop.

Past half the window a request still answered from its checks asks for them to be made again in
the background (app.serving.refresh for the model and the reference, app.auth.gate.AuthGate for
the key and the open state): in steady state no request makes the reads itself.

The bound: a model deleted, an alias moved or a key revoked in **another** process stops being
served by this one at most ``serve_recheck_seconds`` after the change committed (a check's age
is counted from before its read began). The process that makes the change forgets the entries
at once. 0 makes every request read (what SQLite did by default before: a change by any
process seen by the next request).
"""

from __future__ import annotations

import time


def now() -> float:
    """The clock of the checks' ages (monotonic seconds)."""
    return time.monotonic()


def fresh(checked_at: float | None, seconds: float) -> bool:
    """Was a check made at ``checked_at`` (``now()`` before its read) less than ``seconds``
    ago? Never with a window of 0."""
    return checked_at is not None and seconds > 0 and now() - checked_at < seconds
