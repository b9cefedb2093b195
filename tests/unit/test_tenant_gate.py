"""The per-tenant gate on its own: slots taken, refused past the cap, always given back."""

from __future__ import annotations

import pytest

from app.domain.errors import TooManyRequests
from app.services.limits import TenantGate


def gate(limit: int) -> TenantGate:
    return TenantGate(limit, retry_after_seconds=3, setting="STRATA_X")


def test_a_slot_past_the_cap_is_refused_with_its_retry_after() -> None:
    two = gate(2)

    with two.slot("acme"), two.slot("acme"), pytest.raises(TooManyRequests) as refused:
        with two.slot("acme"):
            pass

    assert refused.value.retry_after == 3
    assert two.in_flight("acme") == 0


def test_tenants_are_counted_apart() -> None:
    one = gate(1)

    with one.slot("acme"), one.slot("globex"):
        assert (one.in_flight("acme"), one.in_flight("globex")) == (1, 1)


def test_a_slot_is_given_back_when_its_block_raises() -> None:
    one = gate(1)

    with pytest.raises(RuntimeError), one.slot("acme"):
        raise RuntimeError("boom")

    with one.slot("acme"):
        assert one.in_flight("acme") == 1


def test_a_cap_of_zero_admits_everything() -> None:
    unlimited = gate(0)

    with unlimited.slot("acme"), unlimited.slot("acme"), unlimited.slot("acme"):
        assert unlimited.in_flight("acme") == 3
