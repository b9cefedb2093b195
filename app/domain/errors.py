"""Business errors, each with a stable problem type.

Services and pure code raise these; `app.api.errors` maps each to its HTTP status and
renders it as an RFC 9457 problem document, so no layer below the API knows HTTP.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

PROBLEM_PREFIX: Final = "urn:strata:problem:"
"""Every problem type is this prefix and a slug: the problem documents the API answers
and the `error` a job ends with (which the API passes on) alike."""


class DomainError(Exception):
    slug: ClassVar[str] = "bad-request"
    title: ClassVar[str] = "Bad request"

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions


class Forbidden(DomainError):
    slug = "forbidden"
    title = "Forbidden"


class NotFound(DomainError):
    slug = "not-found"
    title = "Not found"


class Conflict(DomainError):
    slug = "conflict"
    title = "Conflict"


class SubtaskLimit(Conflict):
    """A job may start no more subtasks: it has as many as one job may, or it is as deep
    below its tree's root as a job that starts subtasks may be."""

    slug = "subtask-limit"
    title = "Subtask limit reached"


class UpstreamFailed(DomainError):
    """A server Strata called on the client's behalf did not answer as it must."""

    slug = "bad-gateway"
    title = "Bad gateway"


class McpUnreachableError(UpstreamFailed):
    """An MCP server could not be reached, or did not answer as MCP in time."""

    slug = "mcp-unreachable"
    title = "MCP server unreachable"


class McpAuthFailedError(UpstreamFailed):
    """An MCP server refused the credentials its `headers` carry (HTTP 401 or 403)."""

    slug = "mcp-auth-failed"
    title = "MCP server refused the credentials"


class InvalidInput(DomainError):
    slug = "validation-error"
    title = "Invalid input"


class ContentTooLarge(DomainError):
    """A body larger than its endpoint takes."""

    slug = "payload-too-large"
    title = "Content too large"


class StorageQuota(ContentTooLarge):
    """A tenant keeps as many files, or as many bytes of them, as it may."""

    slug = "storage-quota"
    title = "Storage quota reached"


class UnsupportedMediaType(DomainError):
    """Content of a type the endpoint does not take."""

    slug = "unsupported-media-type"
    title = "Unsupported media type"


class Unauthorized(DomainError):
    slug = "unauthorized"
    title = "Unauthorized"


class TooManyRequests(DomainError):
    """Refused for now; the client may try again after `retry_after` seconds."""

    slug = "too-many-requests"
    title = "Too many requests"

    def __init__(self, detail: str, *, retry_after: int, **extensions: Any) -> None:
        super().__init__(detail, **extensions)
        self.retry_after = retry_after


class ServerBusy(TooManyRequests):
    """The server has no room for this now, whoever asks; try again after `retry_after`."""

    slug = "server-busy"
    title = "Server busy"
