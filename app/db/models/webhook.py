from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, ForeignKey, Index, String, Text
from sqlmodel import Field, SQLModel

from app.db.types import BigIntPK, JSONType, UTCDateTime, utcnow


class WebhookSubscription(SQLModel, table=True):
    """Where a tenant wants events sent. The secret signs every delivery (Standard Webhooks)."""

    __tablename__ = "webhook_subscriptions"

    id: str = Field(primary_key=True, max_length=40)
    tenant: str = Field(index=True, max_length=100)
    url: str = Field(sa_column=Column(Text, nullable=False))
    events: list[str] = Field(default_factory=list, sa_column=Column(JSONType, nullable=False))
    description: str | None = Field(default=None, max_length=500)
    secret: str = Field(max_length=200)
    # after a rotation: the secret before it, which signs too until `previous_secret_until`
    previous_secret: str | None = Field(default=None, max_length=200)
    previous_secret_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    enabled: bool = True
    disabled_reason: str | None = Field(default=None, max_length=500)
    failing_since: datetime | None = Field(default=None, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


class WebhookDelivery(SQLModel, table=True):
    """The outbox: one event for one subscription, written in the transaction of the change.

    Its id is the `webhook-id` a receiver deduplicates by; it never changes across retries.
    """

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_due", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_subscription", "subscription_id", "created_at"),
    )

    id: str = Field(primary_key=True, max_length=40)
    subscription_id: str = Field(
        sa_column=Column(
            String(40),
            ForeignKey("webhook_subscriptions.id", ondelete="CASCADE"),
            nullable=False,
        )
    )
    event_type: str = Field(max_length=100)
    payload: dict[str, Any] = Field(sa_column=Column(JSONType, nullable=False))
    status: str = Field(default="pending", max_length=20)  # pending | succeeded | failed
    attempts: int = 0
    next_attempt_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    lease_until: datetime | None = Field(default=None, sa_type=UTCDateTime)
    last_status_code: int | None = None
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    delivered_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class WebhookAttempt(SQLModel, table=True):
    """One try of a delivery: what the receiver answered and how long it took."""

    __tablename__ = "webhook_attempts"
    __table_args__ = (Index("ix_webhook_attempts_delivery", "delivery_id", "id"),)

    id: int | None = Field(default=None, sa_type=BigIntPK, primary_key=True)
    delivery_id: str = Field(
        sa_column=Column(
            String(40), ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), nullable=False
        )
    )
    attempted_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    status_code: int | None = None
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    duration_ms: int = 0


class IdempotencyKey(SQLModel, table=True):
    """A write's first answer, replayed for a retry with the same key and body."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (Index("ix_idempotency_keys_expires", "expires_at"),)

    tenant: str = Field(primary_key=True, max_length=100)
    key: str = Field(primary_key=True, max_length=255)
    method: str = Field(max_length=10)
    path: str = Field(max_length=1000)
    body_hash: str = Field(max_length=64)
    status_code: int
    response: dict[str, Any] = Field(sa_column=Column(JSONType, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)
    expires_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
