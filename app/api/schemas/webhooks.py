from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.db.models import WebhookAttempt, WebhookSubscription
from app.services.webhooks import DeliveryView, EventType

EventName = Literal["*", EventType]

EVENTS_DESCRIPTION = (
    "Event types to receive; `*` receives every type, including ones added later. "
    "(`webhook.test` is sent only by `POST /webhooks/{id}/test`.)"
)


# what `check_target` takes apart without refusing it: http(s), a host name, an IPv4 address
# or a bracketed IPv6 one, a port in range, then any path and query
_H = "[0-9A-Fa-f]{1,4}"
_IPV4 = r"(25[0-5]|(2[0-4]|1?[0-9])?[0-9])(\.(25[0-5]|(2[0-4]|1?[0-9])?[0-9])){3}"
_IPV6 = "|".join(
    [
        f"({_H}:){{7}}{_H}",
        f"({_H}:){{1,7}}:",
        *(f"({_H}:){{1,{7 - n}}}(:{_H}){{1,{n}}}" for n in range(1, 7)),
        f":((:{_H}){{1,7}}|:)",
        f"::ffff:{_IPV4}",
    ]
)
URL_PATTERN = (
    rf"^https?://([A-Za-z0-9._~%!$&'()*+,;=-]+|\[({_IPV6})\])"
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?"
    r"([/?#][^\s]*)?$"
)


class WebhookCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "url": "https://example.com/hooks/strata",
                    "events": ["job.succeeded", "job.failed"],
                    "description": "CI notifications",
                }
            ]
        },
    )

    url: str = Field(
        min_length=1,
        max_length=2000,
        pattern=URL_PATTERN,
        description="An http(s) URL. Hosts resolving to private, loopback, link-local, "
        "multicast or reserved addresses are refused unless STRATA_WEBHOOK_ALLOW_PRIVATE=true.",
    )
    events: list[EventName] = Field(min_length=1, max_length=20, description=EVENTS_DESCRIPTION)
    description: str | None = Field(default=None, max_length=500)


class WebhookUpdate(BaseModel):
    """Only the fields sent change. `enabled: true` also clears `disabled_reason`."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": False}]})

    url: str | None = Field(default=None, min_length=1, max_length=2000, pattern=URL_PATTERN)
    events: list[EventName] | None = Field(default=None, min_length=1, max_length=20)
    description: str | None = Field(default=None, max_length=500)
    enabled: StrictBool | None = None


class WebhookPublic(BaseModel):
    id: str
    url: str
    events: list[str]
    description: str | None
    enabled: bool
    disabled_reason: str | None = Field(description="Why Strata disabled it, if it did.")
    failing_since: datetime | None = Field(
        description="Since when its deliveries fail without a success (null: healthy)."
    )
    previous_secret_until: datetime | None = Field(
        default=None,
        description="After a secret rotation: until when deliveries also carry a signature "
        "with the secret before it.",
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: WebhookSubscription) -> WebhookPublic:
        return cls.model_validate(row, from_attributes=True)


class WebhookCreated(WebhookPublic):
    secret: str = Field(
        description="The signing secret (`whsec_…`, Standard Webhooks). Shown only in this "
        "response: store it now."
    )

    @classmethod
    def of(cls, row: WebhookSubscription) -> WebhookCreated:
        return cls.model_validate(row, from_attributes=True)


class WebhookList(BaseModel):
    data: list[WebhookPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )


class AttemptPublic(BaseModel):
    attempted_at: datetime
    status_code: int | None = Field(description="The receiver's HTTP status, if it answered.")
    error: str | None = Field(description="Why the attempt failed without an answer.")
    duration_ms: int


class DeliveryPublic(BaseModel):
    id: str = Field(description="The `webhook-id` header: the same on every retry.")
    subscription_id: str = Field(description="The webhook subscription (`wh_…`).")
    event_type: str
    payload: dict[str, Any] = Field(description="The JSON body sent: `{type, timestamp, data}`.")
    status: Literal["pending", "succeeded", "failed"]
    next_attempt_at: datetime | None = Field(description="When the next try is due (pending).")
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    attempts: list[AttemptPublic] = Field(description="Every try, oldest first.")

    @classmethod
    def of(cls, view: DeliveryView) -> DeliveryPublic:
        row = view.delivery
        return cls(
            id=row.id,
            subscription_id=row.subscription_id,
            event_type=row.event_type,
            payload=row.payload,
            status=row.status,
            next_attempt_at=row.next_attempt_at if row.status == "pending" else None,
            last_status_code=row.last_status_code,
            last_error=row.last_error,
            created_at=row.created_at,
            delivered_at=row.delivered_at,
            attempts=[_attempt(a) for a in view.attempts],
        )


def _attempt(row: WebhookAttempt) -> AttemptPublic:
    return AttemptPublic.model_validate(row, from_attributes=True)


class DeliveryList(BaseModel):
    data: list[DeliveryPublic]
    next_cursor: str | None = Field(
        description="Pass as `after` to get the next (older) page; null on the last page."
    )
