"""Problem documents are the API's: the domain names errors, `app.api.errors` maps them."""

from __future__ import annotations

from pathlib import Path

import pytest

import app
from app.api.errors import TYPE_PREFIX, headers_of, status_of
from app.domain.errors import (
    PROBLEM_PREFIX,
    Conflict,
    DomainError,
    Forbidden,
    InvalidInput,
    NotFound,
    ServerBusy,
    TooManyRequests,
    Unauthorized,
)
from app.services.webhook_targets import TargetRefused


def test_the_problem_type_prefix_is_spelled_only_in_the_domain() -> None:
    root = Path(app.__file__).parent
    spelling = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if PROBLEM_PREFIX in path.read_text(encoding="utf-8")
    }

    assert spelling == {"domain/errors.py"}
    assert TYPE_PREFIX is PROBLEM_PREFIX


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (DomainError("x"), 400),
        (Unauthorized("x"), 401),
        (Forbidden("x"), 403),
        (NotFound("x"), 404),
        (Conflict("x"), 409),
        (InvalidInput("x"), 422),
        (TargetRefused("x"), 422),
        (TooManyRequests("x", retry_after=3), 429),
        (ServerBusy("x", retry_after=3), 503),
    ],
)
def test_a_domain_error_answers_with_the_status_of_its_class(
    error: DomainError, status: int
) -> None:
    assert status_of(error) == status


def test_a_refusal_for_now_says_when_to_retry() -> None:
    assert headers_of(TooManyRequests("x", retry_after=3)) == {"Retry-After": "3"}


def test_a_refused_key_names_the_scheme_to_authenticate_with() -> None:
    assert headers_of(Unauthorized("x")) == {"WWW-Authenticate": "Bearer"}
