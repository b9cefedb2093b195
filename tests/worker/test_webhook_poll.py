"""The webhook dispatcher's poll: an idle dispatcher asks once a poll whether any delivery
is due, with one small read outside any unit of work, and queues a claim for the writer
only when one is."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.db.engine import Database
from app.services import webhooks
from app.settings import Settings
from app.worker.webhooks import WebhookDispatcher
from tests.support.settings import MakeSettings

EVENT = "task.updated"


@pytest.fixture
def settings(make_settings: MakeSettings) -> Settings:
    return make_settings(webhook_retry_schedule="0")


@pytest.fixture
async def database(settings: Settings) -> AsyncIterator[Database]:
    database = Database(settings)
    yield database
    await database.dispose()


async def queue_delivery(database: Database) -> None:
    await database.write(
        lambda db: webhooks.create_subscription(
            db, "acme", url="https://example.com/hook", events=[EVENT], description=None
        )
    )
    await database.write(lambda db: webhooks.enqueue_event(db, "acme", EVENT, {"n": 1}))


async def test_an_idle_poll_reads_one_statement_and_queues_nothing_for_the_writer(
    settings: Settings, database: Database
) -> None:
    before = database.stats.snapshot()
    claimed = await WebhookDispatcher(settings, database)._claim()
    spent = database.stats.since(before)

    assert claimed == []
    assert (spent.statements, spent.handoffs) == (1, 0)


async def test_the_poll_sees_a_queued_delivery_and_claims_it(
    settings: Settings, database: Database
) -> None:
    await queue_delivery(database)

    assert await webhooks.due_deliveries_exist(database, settings)
    claimed = await WebhookDispatcher(settings, database)._claim()

    assert [one.payload["type"] for one in claimed] == [EVENT]
    assert not await webhooks.due_deliveries_exist(database, settings)  # leased now


async def test_a_delivery_whose_first_attempt_waits_is_neither_seen_nor_claimed(
    make_settings: MakeSettings,
) -> None:
    """The schedule's first delay holds a new delivery back: the poll and the claim say
    so alike (a poll saying yes to what the claim then refuses would queue a useless
    claim for the writer every poll)."""
    settings = make_settings(webhook_retry_schedule="60")
    database = Database(settings)
    try:
        await queue_delivery(database)

        assert not await webhooks.due_deliveries_exist(database, settings)
        assert await WebhookDispatcher(settings, database)._claim() == []
    finally:
        await database.dispose()
