# ruff: noqa: N818 - named for the answer (NotFound, Conflict), as HTTP libraries name them
"""The service's RFC 9457 problem+json answers as typed exceptions."""

from __future__ import annotations

from typing import Any

import httpx


class ProblemError(Exception):
    """An error answer of the service: ``status``, ``title``, ``detail``, the field errors
    (``errors``: each with ``loc``, ``field``, ``message``, and ``row``/``column`` for a file),
    and the whole ``body``."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        errors: list[dict[str, Any]] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{status} {title}: {detail}")
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.body = body or {}

    @property
    def type(self) -> str:
        return str(self.body.get("type", "about:blank"))


class BadRequest(ProblemError):
    """400 (a malformed body) and 415 (a content type the route does not take)."""


class Unauthorized(ProblemError):
    """401: a missing, unknown or revoked API key."""


class Forbidden(ProblemError):
    """403: the key's scope does not allow the operation."""


class NotFound(ProblemError):
    """404: no such dataset, job, model or reference."""


class Conflict(ProblemError):
    """409: the resource's state forbids the operation."""


class TooLarge(ProblemError):
    """413: beyond a size limit (the body names the setting)."""


class ValidationFailed(ProblemError):
    """422: invalid input; ``errors`` names each field (and row, column)."""


class ServiceUnavailable(ProblemError):
    """503: the database is unreachable or not migrated (``Retry-After`` may say when)."""


class ServerError(ProblemError):
    """Any other 5xx."""


class JobFailed(Exception):
    """A job that ended ``failed`` or ``cancelled`` while being waited for."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(
            f"job {job.get('id')} {job.get('status')}: {job.get('error') or job.get('message')}"
        )
        self.job = job


_BY_STATUS: dict[int, type[ProblemError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    415: BadRequest,
    422: ValidationFailed,
    503: ServiceUnavailable,
}


def raise_for_problem(response: httpx.Response) -> None:
    """Raise the ProblemError subclass of an error answer; nothing for a success."""
    if response.status_code < 400:
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"detail": response.text[:2000]}
    status = response.status_code
    kind = _BY_STATUS.get(status, ServerError if status >= 500 else ProblemError)
    raise kind(
        status=status,
        title=str(body.get("title") or response.reason_phrase),
        detail=str(body.get("detail") or body.get("error") or response.reason_phrase),
        errors=body.get("errors") if isinstance(body.get("errors"), list) else None,
        body=body,
    )
