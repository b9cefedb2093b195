"""Business errors that know their HTTP status and stable problem type.

Services and pure code raise these; one handler in `app.api.errors` renders them
as RFC 9457 problem documents, so no layer below the API imports FastAPI.
"""

from __future__ import annotations

from typing import Any, ClassVar


class DomainError(Exception):
    status: ClassVar[int] = 400
    slug: ClassVar[str] = "bad-request"
    title: ClassVar[str] = "Bad request"

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions

    @property
    def headers(self) -> dict[str, str] | None:
        """Response headers the error's status calls for."""
        return None


class Forbidden(DomainError):
    status = 403
    slug = "forbidden"
    title = "Forbidden"


class NotFound(DomainError):
    status = 404
    slug = "not-found"
    title = "Not found"


class Conflict(DomainError):
    status = 409
    slug = "conflict"
    title = "Conflict"


class SubtaskLimit(Conflict):
    """A job may start no more subtasks: it has as many as one job may, or it is as deep
    below its tree's root as a job that starts subtasks may be."""

    slug = "subtask-limit"
    title = "Subtask limit reached"


class InvalidInput(DomainError):
    status = 422
    slug = "validation-error"
    title = "Invalid input"


class Unauthorized(DomainError):
    status = 401
    slug = "unauthorized"
    title = "Unauthorized"

    @property
    def headers(self) -> dict[str, str] | None:
        return {"WWW-Authenticate": "Bearer"}


class TooManyRequests(DomainError):
    """Refused for now; the client may try again after `retry_after` seconds."""

    status = 429
    slug = "too-many-requests"
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after: int, **extensions: Any) -> None:
        super().__init__(detail, **extensions)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after)}


class ServerBusy(TooManyRequests):
    """The server has no room for this now, whoever asks; try again after `retry_after`."""

    status = 503
    slug = "server-busy"
    title = "Server busy"
