"""Queueing webhook events from the subscription cache: a tenant's enabled subscriptions
are read once per STRATA_WEBHOOK_CACHE_SECONDS, and every change made in the process
(create, update, disable, delete, the dispatcher disabling a failing one) counts at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import WebhookDelivery, WebhookSubscription
from app.db.types import utcnow
from app.services import webhooks
from app.services.webhooks import signing_secrets
from app.settings import Settings
from tests.support.clock import ManualClock
from tests.support.settings import MakeSettings

T = TypeVar("T")
TTL = 5.0
EVENT = "task.updated"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def settings(make_settings: MakeSettings) -> Settings:
    """One attempt per delivery, and a subscription failing at all is disabled."""
    return make_settings(
        webhook_cache_seconds=TTL, webhook_retry_schedule="0", webhook_disable_after_hours=0
    )


@pytest.fixture
async def database(settings: Settings, clock: ManualClock) -> AsyncIterator[Database]:
    database = Database(settings, clock=clock)
    yield database
    await database.dispose()


async def event(database: Database, tenant: str = "acme") -> list[WebhookDelivery]:
    return await database.write(lambda db: webhooks.enqueue_event(db, tenant, EVENT, {"n": 1}))


async def subscribe(
    database: Database, tenant: str = "acme", events: tuple[str, ...] = (EVENT,)
) -> WebhookSubscription:
    return await database.write(
        lambda db: webhooks.create_subscription(
            db, tenant, url="https://example.com/hook", events=list(events), description=None
        )
    )


async def statements(database: Database, work: Callable[[], Awaitable[T]]) -> tuple[T, int]:
    before = database.stats.snapshot()
    result = await work()
    return result, database.stats.since(before).statements


async def nothing(_db: AsyncSession) -> None:
    return None


async def test_a_second_event_of_a_tenant_without_subscriptions_reads_nothing(
    database: Database,
) -> None:
    _, empty_unit = await statements(database, lambda: database.write(nothing))
    first, first_cost = await statements(database, lambda: event(database))

    second, second_cost = await statements(database, lambda: event(database))

    assert (first, second) == ([], [])
    assert first_cost > empty_unit
    assert second_cost == empty_unit


async def test_a_second_event_of_a_subscribed_tenant_only_writes_its_delivery(
    database: Database,
) -> None:
    await subscribe(database)
    first, first_cost = await statements(database, lambda: event(database))

    second, second_cost = await statements(database, lambda: event(database))

    assert (len(first), len(second)) == (1, 1)
    assert second_cost == first_cost - 1  # the same, but for the subscriptions' SELECT


async def test_a_new_subscription_gets_the_next_event_at_once(database: Database) -> None:
    assert await event(database) == []

    subscription = await subscribe(database)

    assert [d.subscription_id for d in await event(database)] == [subscription.id]


@pytest.mark.parametrize(
    "change",
    [
        webhooks.SubscriptionChanges(enabled=False),
        webhooks.SubscriptionChanges(events=["job.failed"]),
    ],
    ids=["disabled", "other-events"],
)
async def test_an_updated_subscription_is_seen_by_the_next_event_at_once(
    database: Database, change: webhooks.SubscriptionChanges
) -> None:
    subscription = await subscribe(database)
    assert len(await event(database)) == 1

    await database.write(
        lambda db: webhooks.update_subscription(db, "acme", subscription.id, change)
    )

    assert await event(database) == []


async def test_a_deleted_subscription_gets_no_more_events(database: Database) -> None:
    subscription = await subscribe(database)
    assert len(await event(database)) == 1

    await database.write(lambda db: webhooks.delete_subscription(db, "acme", subscription.id))

    assert await event(database) == []


async def test_a_subscription_the_dispatcher_disables_gets_no_more_events(
    database: Database, settings: Settings
) -> None:
    await subscribe(database)
    assert len(await event(database)) == 1
    [claimed] = await database.write(
        lambda db: webhooks.claim_deliveries(db, settings, lease_seconds=30, limit=10)
    )
    failed = webhooks.AttemptResult(started_at=utcnow(), duration_ms=5, status_code=500)

    await database.write(lambda db: webhooks.record_attempt(db, settings, claimed, failed))

    assert await event(database) == []


async def test_tenants_are_cached_apart(database: Database) -> None:
    await subscribe(database, "globex")
    assert await event(database, "acme") == []

    assert len(await event(database, "globex")) == 1


async def test_a_subscription_made_by_another_process_counts_once_the_ttl_passed(
    database: Database, settings: Settings, clock: ManualClock
) -> None:
    assert await event(database) == []
    other_process = Database(settings)
    try:
        await subscribe(other_process)
    finally:
        await other_process.dispose()

    unseen = await event(database)
    clock.advance(TTL)

    assert unseen == []
    assert len(await event(database)) == 1


def test_the_old_secret_signs_only_until_its_overlap_ends() -> None:
    now = utcnow()
    row = WebhookSubscription(
        id="wh_1",
        tenant="acme",
        url="https://example.com/hook",
        secret="whsec_new",
        previous_secret="whsec_old",
        previous_secret_until=now + timedelta(seconds=60),
    )

    during = signing_secrets(row, now)
    after = signing_secrets(row, now + timedelta(seconds=61))

    assert (during, after) == (("whsec_new", "whsec_old"), ("whsec_new",))
