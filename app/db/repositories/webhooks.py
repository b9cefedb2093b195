"""Webhook subscriptions, the delivery outbox and its attempts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import and_, bindparam, func, insert, or_, true, update
from sqlalchemy import select as core_select
from sqlmodel import col, select

from app.db.models import WebhookAttempt, WebhookDelivery, WebhookSubscription
from app.db.prepared import Peeks, Prepared
from app.db.repositories.rows import RowRepository
from app.db.rows import columns_of
from app.db.types import utcnow

# what a job's end and a task write run, prepared (a statement unit may run them)
_SUB = WebhookSubscription.__table__  # type: ignore[attr-defined]
_DELIVERY = WebhookDelivery.__table__  # type: ignore[attr-defined]
_TARGETS = Prepared(
    core_select(_SUB.c.id, _SUB.c.events)
    .where(_SUB.c.tenant == bindparam("w_tenant"), _SUB.c.enabled == true())
    .order_by(_SUB.c.id)
)
_DELIVERY_COLUMNS = columns_of(WebhookDelivery)
_ADD_DELIVERY = Prepared(insert(_DELIVERY), column_keys=_DELIVERY_COLUMNS)


class WebhookRepository(RowRepository):
    # --- subscriptions --------------------------------------------------------

    async def get(self, tenant: str, subscription_id: str) -> WebhookSubscription | None:
        row = await self.db.get(WebhookSubscription, subscription_id)
        if row is None or row.tenant != tenant:
            return None
        return row

    async def list_page(
        self, tenant: str, *, limit: int, before_id: str | None
    ) -> list[WebhookSubscription]:
        """Newest first (ids are time-ordered)."""
        query = select(WebhookSubscription).where(WebhookSubscription.tenant == tenant)
        if before_id is not None:
            query = query.where(col(WebhookSubscription.id) < before_id)
        query = query.order_by(col(WebhookSubscription.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def enabled_for_tenant(self, tenant: str) -> list[tuple[str, list[str]]]:
        """The id and events of each enabled subscription of `tenant`, by id."""
        rows = (await _TARGETS.execute(self.db, {"w_tenant": tenant})).rows
        return [(subscription_id, list(events)) for subscription_id, events in rows]

    async def remove(self, row: WebhookSubscription) -> None:
        """Its deliveries and their attempts go with it (ON DELETE CASCADE)."""
        await self.db.delete(row)
        await self.db.flush()

    async def mark_failing(self, subscription_id: str, now: datetime) -> None:
        """Start the failing clock unless it runs already."""
        await self.db.exec(
            update(WebhookSubscription)
            .where(col(WebhookSubscription.id) == subscription_id)
            .values(failing_since=func.coalesce(col(WebhookSubscription.failing_since), now))
        )

    async def mark_healthy(self, subscription_id: str) -> None:
        await self.db.exec(
            update(WebhookSubscription)
            .where(col(WebhookSubscription.id) == subscription_id)
            .where(col(WebhookSubscription.failing_since).is_not(None))
            .values(failing_since=None)
        )

    async def disable_for_tenant(self, tenant: str, reason: str) -> int:
        """Disable every enabled subscription of `tenant`; how many were."""
        result = await self.db.exec(
            update(WebhookSubscription)
            .where(col(WebhookSubscription.tenant) == tenant)
            .where(col(WebhookSubscription.enabled).is_(True))
            .values(enabled=False, disabled_reason=reason, updated_at=utcnow())
        )
        return int(result.rowcount)

    async def disable_if_failing_since(
        self, subscription_id: str, cutoff: datetime, reason: str
    ) -> bool:
        """Disable the subscription if it has been failing since `cutoff` or earlier."""
        result = await self.db.exec(
            update(WebhookSubscription)
            .where(col(WebhookSubscription.id) == subscription_id)
            .where(col(WebhookSubscription.enabled).is_(True))
            .where(col(WebhookSubscription.failing_since) <= cutoff)
            .values(enabled=False, disabled_reason=reason, updated_at=utcnow())
        )
        return bool(result.rowcount)

    # --- deliveries -----------------------------------------------------------
    async def add_delivery(self, row: WebhookDelivery) -> WebhookDelivery:
        """Insert `row` (left out of the ORM session), by one prepared statement."""
        values = dict(
            zip(_DELIVERY_COLUMNS, (getattr(row, key) for key in _DELIVERY_COLUMNS), strict=True)
        )
        await _ADD_DELIVERY.execute(self.db, values)
        return row

    async def get_delivery(self, delivery_id: str) -> WebhookDelivery | None:
        return await self.db.get(WebhookDelivery, delivery_id)

    async def deliveries_page(
        self, subscription_id: str, *, limit: int, before_id: str | None
    ) -> list[WebhookDelivery]:
        """Newest first (ids are time-ordered)."""
        query = select(WebhookDelivery).where(WebhookDelivery.subscription_id == subscription_id)
        if before_id is not None:
            query = query.where(col(WebhookDelivery.id) < before_id)
        query = query.order_by(col(WebhookDelivery.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def attempts_of(self, delivery_ids: Sequence[str]) -> list[WebhookAttempt]:
        if not delivery_ids:
            return []
        query = (
            select(WebhookAttempt)
            .where(col(WebhookAttempt.delivery_id).in_(delivery_ids))
            .order_by(col(WebhookAttempt.id))
        )
        return list((await self.db.exec(query)).all())

    async def claim_due(
        self, now: datetime, first_due: datetime, lease_until: datetime, limit: int
    ) -> list[tuple[WebhookDelivery, WebhookSubscription]]:
        """Lease up to `limit` due deliveries of enabled subscriptions, oldest first.

        Due: pending, no live lease, and `next_attempt_at` passed (`first_due` for a
        delivery never tried, which holds the schedule's first delay). On PostgreSQL the rows
        are locked `FOR UPDATE SKIP LOCKED`, so two dispatchers never take the same
        delivery; SQLite renders no lock clause, its writing transaction (`BEGIN
        IMMEDIATE`) is exclusive already. Each claim counts as an attempt started."""
        query = (
            self._due(select(WebhookDelivery, WebhookSubscription), now, first_due)
            .order_by(col(WebhookDelivery.next_attempt_at), col(WebhookDelivery.id))
            .limit(limit)
            .with_for_update(skip_locked=True, of=WebhookDelivery)
        )
        rows = list((await self.db.exec(query)).all())
        for delivery, _ in rows:
            delivery.lease_until = lease_until
            delivery.attempts += 1
            self.db.add(delivery)
        await self.db.flush()
        return [(delivery, subscription) for delivery, subscription in rows]

    @staticmethod
    def _due(query: Any, now: Any, first_due: Any) -> Any:
        """`query` narrowed to the deliveries due at `now` (datetimes, or bound parameters
        for a prepared statement)."""
        return query.join(
            WebhookSubscription,
            col(WebhookSubscription.id) == col(WebhookDelivery.subscription_id),
        ).where(
            col(WebhookDelivery.status) == "pending",
            or_(
                and_(
                    col(WebhookDelivery.attempts) == 0,
                    col(WebhookDelivery.next_attempt_at) <= first_due,
                ),
                and_(
                    col(WebhookDelivery.attempts) > 0,
                    col(WebhookDelivery.next_attempt_at) <= now,
                ),
            ),
            or_(
                col(WebhookDelivery.lease_until).is_(None),
                col(WebhookDelivery.lease_until) < now,
            ),
            col(WebhookSubscription.enabled).is_(True),
        )


_WHEN = WebhookDelivery.__table__.c.next_attempt_at.type  # type: ignore[attr-defined]
ANY_DUE = Prepared(
    WebhookRepository._due(
        core_select(WebhookDelivery.__table__.c.id),  # type: ignore[attr-defined]
        bindparam("now", type_=_WHEN),
        bindparam("first_due", type_=_WHEN),
    ).limit(1)
)
"""Whether a delivery is due (`{"now": …, "first_due": …}`, as `claim_due` decides): what
the webhook dispatcher asks, through `Database.peek`, every poll before it queues a claim
for the writer."""


async def any_due(units: Peeks, now: datetime, first_due: datetime) -> bool:
    """`ANY_DUE` outside any unit of work."""
    return bool(await units.peek(ANY_DUE, {"now": now, "first_due": first_due}))
