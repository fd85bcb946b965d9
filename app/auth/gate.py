"""Whether a request needs a key, and whose key it carries.

``MSVMAV_AUTH``: ``off`` never requires a key; ``on`` always does (but on the open paths);
``auto`` does once MSVMAV_ADMIN_KEY is set or any key row exists. Key rows are revoked, never
deleted, so revoking every key cannot reopen the service; and once a process has seen a key it
keeps requiring one even if the table were emptied behind its back. ``msvmav serve`` on a
non-loopback address turns ``auto`` into ``on`` (``app.auth.serving``).

A key found usable is trusted without reading its row again for app.core.recheck's window
(MSVMAV_SERVE_RECHECK_SECONDS: 1 s by default, on either database): a key revoked by
another process (``msvmav keys revoke``, another API process) stops working here within that
time; one revoked over this process's ``DELETE /keys/{id}`` at once. An unknown or revoked key
is never remembered: each such request reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import anyio

from app.auth import service
from app.auth.keys import MAX_TOKEN_CHARS, Principal, Scope, hash_key
from app.core import recheck
from app.core.config import Settings
from app.core.db import with_retries
from app.core.problems import TYPE_BASE, Problem
from app.core.runtime import Runtime

# How long "no key exists yet" is trusted before the database is asked again (auth=auto).
OPEN_RECHECK_SECONDS = 1.0
# Most keys an API process remembers as usable (see AuthGate.authenticate); beyond it the memory
# starts again empty.
REMEMBERED_KEYS = 1024
# How long the background write of a key's last_used_at is retried while the database is busy
# or away (seconds).
STAMP_PATIENCE = 15.0

log = logging.getLogger("app.auth")

CHALLENGE = "Bearer"
SCHEME = "bearer"


def unauthorized(detail: str, error: str | None = None) -> Problem:
    challenge = f'{CHALLENGE} error="{error}"' if error else CHALLENGE
    return Problem(
        401,
        detail,
        type=TYPE_BASE + "unauthorized",
        title="Unauthorized",
        headers={"WWW-Authenticate": challenge},
    )


def forbidden(principal: Principal, needed: Scope, method: str, path: str) -> Problem:
    return Problem(
        403,
        f"{method} {path} needs a key with scope {needed.value}; this key's scope is "
        f"{principal.scope.value}",
        type=TYPE_BASE + "forbidden",
        title="Forbidden",
        required_scope=needed.value,
        scope=principal.scope.value,
    )


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != SCHEME:
        return None
    return token.strip() or None


# Threads for the key checks, apart from the thread pool of the routes: a check never waits
# for a thread that a route holds (while that route waits for a database connection, say).
AUTH_THREADS = 8


class AuthGate:
    """The app's key checks and what they remember (app.main makes one per app, on its
    runtime)."""

    def __init__(self, settings: Settings, runtime: Runtime) -> None:
        self.mode = settings.auth
        self.reader = runtime.reader  # fetch_one's pool: never one the requests' sessions use
        # a local file database: its key reads may run on the event loop (security.check_async)
        self.local = runtime.local
        self.session_factory = runtime.sessions
        # the key checks' threads (security.check_async); anyio's asyncio limiter binds to no
        # event loop, so one per gate serves whichever loop runs the app
        self.threads = anyio.CapacityLimiter(AUTH_THREADS)
        secret = settings.admin_key.get_secret_value() if settings.admin_key else None
        self.admin_hash = hash_key(secret) if secret else None
        self._lock = threading.Lock()
        self._required = self.mode == "on" or (self.mode == "auto" and self.admin_hash is not None)
        self._open_until = 0.0  # monotonic time until which "no key exists" is trusted
        self._stamped: dict[int, float] = {}  # key id -> monotonic time of its last stamp
        self._stamp_every = service.LAST_USED_RESOLUTION.total_seconds()
        self._stamper: ThreadPoolExecutor | None = None  # writes last_used_at (stamp_later)
        self._renewer: ThreadPoolExecutor | None = None  # renews the open state (known_open)
        self._renewing: set[tuple[str, ...]] = set()  # checks being renewed (``_submit``)
        self._closed = False
        self._generation = 0  # forget_keys' count: a renewal begun before one is dropped
        # Keys found usable, by hash: (owner, recheck.now() before the read), trusted for
        # ``window`` seconds (app.core.recheck; 1 s by default; 0: every request reads).
        self.window = settings.serve_recheck_seconds
        self._keys: dict[str, tuple[Principal, float]] = {}

    def known_open(self) -> bool:
        """True when no key is needed and that was checked less than OPEN_RECHECK_SECONDS ago:
        the request needs neither a database query nor a thread (the quick start's hot path).
        Past half that time the check is made again in the background (``_renew_open``), so
        that requests in steady state never make it themselves: without it every request in
        flight when the time ran out made the read, each in a thread (bench/serve.py on
        PostgreSQL: hops of up to a second under load)."""
        if self.mode == "off":
            return True
        if self._required:
            return False
        now = time.monotonic()
        if now >= self._open_until:
            return False
        if now >= self._open_until - OPEN_RECHECK_SECONDS / 2:
            self._renew_open_ahead()
        return True

    def _renew_open_ahead(self) -> None:
        self._submit(("open",), self._renew_open)

    def _renew_open(self) -> None:
        """Ask whether a key exists; still none: open for OPEN_RECHECK_SECONDS from before
        the read (so the bound of ``required`` holds)."""
        started = time.monotonic()
        if service.any_key_exists_now(self.reader):
            self.key_created()
        else:
            self._open_until = max(self._open_until, started + OPEN_RECHECK_SECONDS)

    def _submit(self, what: tuple[str, ...], renew: Callable[[], None]) -> None:
        """Run ``renew`` on the gate's one renewal thread unless ``what`` is under way. A
        failed read is the requests' to make again when the check's time runs out."""
        with self._lock:
            if what in self._renewing or self._closed:
                return
            self._renewing.add(what)
            if self._renewer is None:
                self._renewer = ThreadPoolExecutor(1, thread_name_prefix="msvmav-key-check")
            renewer = self._renewer

        def run() -> None:
            try:
                renew()
            except Exception as exc:  # (a database away: the next request past the time reads)
                # one line, no traceback: a database blip is no program error (as app.core.db)
                log.info("key check not renewed ahead: %s", type(exc).__name__)
            finally:
                with self._lock:
                    self._renewing.discard(what)

        renewer.submit(run)

    def required(self) -> bool:
        """Does a request need a key now? Once true, true for the life of the process. While
        open, the database is asked at most every OPEN_RECHECK_SECONDS: a key created by
        another process (``msvmav keys create``) closes the service within that time, one
        created over this process's /keys at once."""
        if self.mode == "off":
            return False
        if not self._required and time.monotonic() >= self._open_until:
            # On the key lookups' own pool (fetch_one), never one the requests' sessions use.
            if service.any_key_exists_now(self.reader):
                self.key_created()
            else:
                self._open_until = time.monotonic() + OPEN_RECHECK_SECONDS
        return self._required

    def key_created(self) -> None:
        if self.mode != "off":
            with self._lock:
                self._required = True

    def authenticate(self, authorization: str | None) -> Principal:
        """The key's owner; 401 problem when the header is missing, malformed, or names an
        unknown, revoked or expired key (an expired one's answer names its expiry)."""
        token = bearer_token(authorization)
        if token is None:
            raise unauthorized(
                "an API key is required: send `Authorization: Bearer <key>` "
                "(create one with `msvmav keys create --scope read --name <name>`)"
            )
        principal = self._recalled(token)
        if principal is not None:
            return principal
        checked_at = recheck.now()
        try:
            principal = service.lookup(self.reader, token, self.admin_hash)
        except service.KeyExpiredError as exc:
            raise unauthorized(str(exc), error="invalid_token") from None
        if principal is None:
            raise unauthorized("invalid or revoked API key", error="invalid_token")
        if self.window > 0:
            if len(self._keys) >= REMEMBERED_KEYS:
                self._keys.clear()
            self._keys[hash_key(token)] = (principal, checked_at)
        return principal

    def _recalled(self, token: str) -> Principal | None:
        """The owner of ``token`` when a read found it usable less than ``window`` seconds
        ago; else None. No I/O."""
        if self.window <= 0 or len(token) > MAX_TOKEN_CHARS:
            return None
        entry = self._keys.get(hash_key(token))
        if entry is None or not recheck.fresh(entry[1], self.window):
            return None
        expires_at = entry[0].expires_at
        if expires_at is not None and expires_at <= service.utcnow():
            return None  # looked up again: the read answers 401 naming the expiry
        if recheck.now() - entry[1] >= self.window / 2:  # read again in the background
            self._submit(("key", hash_key(token)), lambda: self._renew_key(token))
        return entry[0]

    def _renew_key(self, token: str) -> None:
        """Look the key up again off the request path (``_recalled``): found usable, it is
        trusted for ``window`` from before this read; otherwise it is forgotten, and the next
        request reads (and answers 401). Age counted as ``authenticate`` counts it."""
        generation, checked_at = self._generation, recheck.now()
        try:
            principal = service.lookup(self.reader, token, self.admin_hash)
        except service.KeyExpiredError:
            principal = None
        digest = hash_key(token)
        with self._lock:
            if principal is None:
                self._keys.pop(digest, None)
            elif generation == self._generation:  # no key revoked here since the read began
                self._keys[digest] = (principal, checked_at)

    def held(self, authorization: str | None) -> Principal | None:
        """The key's owner when keys are required and this request's key was found usable
        less than ``window`` seconds ago (no I/O: it may run on the event loop); else None."""
        if not self._required:
            return None
        token = bearer_token(authorization)
        return None if token is None else self._recalled(token)

    def forget_keys(self) -> None:
        """Trust no remembered key any more (one was revoked in this process), nor what a
        renewal under way reads."""
        with self._lock:
            self._generation += 1
            self._keys.clear()

    def known_required(self) -> bool:
        """True when keys are required and that is settled (it never changes back): deciding
        costs no database query."""
        return self._required

    def stamp_due(self, principal: Principal) -> bool:
        """Is the key's ``last_used_at`` to be written now (at most once per
        LAST_USED_RESOLUTION per key in this process)? Claims the stamp if so."""
        if principal.key_id is None:
            return False
        now = time.monotonic()
        with self._lock:
            last = self._stamped.get(principal.key_id)
            if last is not None and now - last < self._stamp_every:
                return False
            self._stamped[principal.key_id] = now
            return True

    def stamp_later(self, principal: Principal) -> None:
        """Write the key's ``last_used_at`` in the background: a write transaction may wait for
        SQLite's write lock (or the row's lock), and no request waits for it."""
        with self._lock:
            if self._stamper is None:
                self._stamper = ThreadPoolExecutor(1, thread_name_prefix="msvmav-key-stamp")
            stamper = self._stamper
        stamper.submit(self._stamp, principal.key_id)

    def settle(self) -> None:
        """Until the renewals asked so far have ended (tests)."""
        renewer = self._renewer
        if renewer is not None:
            renewer.submit(lambda: None).result()

    def close(self) -> None:
        """Finish the stamps and the renewal under way (at shutdown)."""
        with self._lock:
            self._closed = True
            stamper, self._stamper = self._stamper, None
            renewer, self._renewer = self._renewer, None
        for executor in (stamper, renewer):
            if executor is not None:
                executor.shutdown(wait=True)

    def _stamp(self, key_id: int) -> None:
        def write() -> None:
            with self.session_factory() as session:
                service.mark_used(session, key_id)

        try:
            # A writer holding the key's row (or SQLite's write lock) longer than the API's
            # lock timeout, or a database blip, delays the stamp; it is not lost.
            with_retries(write, f"last use of API key {key_id}", STAMP_PATIENCE)
        except Exception:  # a missed stamp is not worth a request; the log says why
            log.exception("could not record the use of API key %s", key_id)
