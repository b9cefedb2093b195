"""The process's byte budget for hook bodies on its own: held, refused past it, given back."""

from __future__ import annotations

import pytest

from app.api.errors import headers_of, status_of
from app.domain.errors import ServerBusy
from app.services.limits import ByteBudget


def budget(limit: int) -> ByteBudget:
    return ByteBudget(limit, retry_after_seconds=3)


def test_a_claim_past_the_budget_is_refused_with_503_and_its_retry_after() -> None:
    ten = budget(10)

    with ten.claim() as first, ten.claim() as second:
        first.grow_to(6)
        with pytest.raises(ServerBusy) as refused:
            second.grow_to(5)
        second.grow_to(4)
        assert ten.in_flight == 10

    assert status_of(refused.value) == 503
    assert headers_of(refused.value) == {"Retry-After": "3"}
    assert "STRATA_HOOK_BODY_BUDGET_BYTES" in refused.value.detail
    assert ten.in_flight == 0


def test_a_claim_grows_by_what_it_does_not_hold_yet() -> None:
    ten = budget(10)

    with ten.claim() as claim:
        claim.grow_to(8)  # a declared length
        claim.grow_to(5)  # what has arrived of it so far
        claim.grow_to(10)
        assert (claim.held, ten.in_flight) == (10, 10)


def test_a_claim_is_given_back_when_its_block_raises() -> None:
    ten = budget(10)

    with pytest.raises(RuntimeError), ten.claim() as claim:
        claim.grow_to(10)
        raise RuntimeError("boom")

    assert ten.in_flight == 0


def test_a_budget_of_zero_admits_everything() -> None:
    unlimited = budget(0)

    with unlimited.claim() as claim:
        claim.grow_to(10**12)
