"""Outbound webhook subscriptions and their deliveries (Standard Webhooks)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from app.api.deps import (
    CurrentTenant,
    DatabaseDep,
    DeliveryCursor,
    PageLimit,
    SessionDep,
    SettingsDep,
    WebhookCursor,
)
from app.api.errors import problem_responses
from app.api.schemas.webhooks import (
    DeliveryList,
    DeliveryPublic,
    WebhookCreate,
    WebhookCreated,
    WebhookList,
    WebhookPublic,
    WebhookUpdate,
)
from app.services import webhooks as service
from app.services.webhook_targets import check_target

router = APIRouter(prefix="/webhooks", tags=["webhooks"], responses=problem_responses(401, 503))

WebhookId = Annotated[str, Path(max_length=40, description="A webhook subscription id (`wh_…`).")]
DeliveryId = Annotated[
    str,
    Path(max_length=40, description="A delivery id (`msg_…`), its `webhook-id` header."),
]

SIGNING = (
    " Deliveries are POSTed as JSON `{type, timestamp, data}` with the Standard Webhooks "
    "headers `webhook-id`, `webhook-timestamp` and `webhook-signature` (`v1,` + base64 "
    "HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret), retried on failure "
    "(STRATA_WEBHOOK_RETRY_SCHEDULE) with the same `webhook-id`."
)


@router.post(
    "",
    status_code=201,
    name="create",
    summary="Subscribe a URL to events",
    description="The answer holds the signing `secret`, shown this once." + SIGNING,
    responses=problem_responses(413, 422),
)
async def create_webhook(
    body: WebhookCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    response: Response,
) -> WebhookCreated:
    url = await check_target(body.url, allow_private=settings.webhook_allow_private)
    row = await database.write(
        lambda db: service.create_subscription(
            db,
            tenant,
            url=url,
            events=list(body.events),
            description=body.description,
        )
    )
    response.headers["Location"] = f"/webhooks/{row.id}"
    return WebhookCreated.of(row)


@router.get(
    "",
    name="list",
    summary="List webhook subscriptions, newest first",
    description=(
        "The tenant's subscriptions, a page of `limit` after the cursor in "
        "`after`; their secrets are never listed."
    ),
    responses=problem_responses(422),
)
async def list_webhooks(
    db: SessionDep, tenant: CurrentTenant, limit: PageLimit, after: WebhookCursor = None
) -> WebhookList:
    page = await service.list_subscriptions(db, tenant, limit=limit, after=after)
    return WebhookList(data=[WebhookPublic.of(r) for r in page.data], next_cursor=page.next_cursor)


@router.get(
    "/{webhook_id}",
    name="get",
    summary="Get a webhook subscription (without its secret)",
    description=(
        "The subscription with its state: `enabled`, and when deliveries keep "
        "failing `failing_since` and `disabled_reason`."
    ),
    responses=problem_responses(404, 422),
)
async def get_webhook(
    webhook_id: WebhookId, db: SessionDep, tenant: CurrentTenant
) -> WebhookPublic:
    return WebhookPublic.of(await service.get_subscription(db, tenant, webhook_id))


@router.patch(
    "/{webhook_id}",
    name="update",
    summary="Change a subscription's url, events, description or enabled",
    description="Enabling a subscription again clears `disabled_reason` and `failing_since`; "
    "its deliveries still pending are sent again from then on.",
    responses=problem_responses(404, 413, 422),
)
async def update_webhook(
    webhook_id: WebhookId,
    body: WebhookUpdate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> WebhookPublic:
    url = body.url
    if url is not None:  # resolved before the write, never inside it
        url = await check_target(url, allow_private=settings.webhook_allow_private)
    changes = service.SubscriptionChanges(
        url=url,
        events=list(body.events) if body.events is not None else None,
        enabled=body.enabled,
        description=body.description,
        description_sent="description" in body.model_fields_set,
    )
    row = await database.write(
        lambda db: service.update_subscription(db, tenant, webhook_id, changes)
    )
    return WebhookPublic.of(row)


@router.delete(
    "/{webhook_id}",
    status_code=204,
    name="delete",
    summary="Delete a subscription and its deliveries",
    description=(
        "Nothing more is sent to its URL, deliveries still pending included; 204 with no body."
    ),
    responses=problem_responses(404, 422),
)
async def delete_webhook(
    webhook_id: WebhookId, database: DatabaseDep, tenant: CurrentTenant
) -> Response:
    await database.write(lambda db: service.delete_subscription(db, tenant, webhook_id))
    return Response(status_code=204)


@router.get(
    "/{webhook_id}/deliveries",
    name="deliveries",
    summary="A subscription's deliveries, newest first, with every attempt",
    description=(
        "Each delivery with its event, status and every attempt made (when, the "
        "answer's status or the error), a page of `limit` after the cursor in "
        "`after`."
    ),
    responses=problem_responses(404, 422),
)
async def list_deliveries(
    webhook_id: WebhookId,
    db: SessionDep,
    tenant: CurrentTenant,
    limit: PageLimit,
    after: DeliveryCursor = None,
) -> DeliveryList:
    page = await service.list_deliveries(db, tenant, webhook_id, limit=limit, after=after)
    return DeliveryList(
        data=[DeliveryPublic.of(v) for v in page.data], next_cursor=page.next_cursor
    )


@router.post(
    "/{webhook_id}/test",
    status_code=202,
    name="test",
    summary="Send a `webhook.test` event to this subscription",
    description="Queues the delivery and answers at once; follow it in `/deliveries`. "
    "409 while the subscription is disabled.",
    responses=problem_responses(404, 409, 422),
)
async def test_webhook(
    webhook_id: WebhookId, database: DatabaseDep, tenant: CurrentTenant
) -> DeliveryPublic:
    view = await database.write(lambda db: service.send_test(db, tenant, webhook_id))
    return DeliveryPublic.of(view)


@router.post(
    "/{webhook_id}/deliveries/{delivery_id}/redeliver",
    status_code=202,
    name="redeliver",
    summary="Send a delivery that ended (succeeded or failed) again",
    description="The same `webhook-id` and payload, with a fresh retry schedule; its earlier "
    "attempts stay listed. 409 while the delivery is still being tried or the subscription "
    "is disabled.",
    responses=problem_responses(404, 409, 422),
)
async def redeliver(
    webhook_id: WebhookId, delivery_id: DeliveryId, database: DatabaseDep, tenant: CurrentTenant
) -> DeliveryPublic:
    view = await database.write(lambda db: service.redeliver(db, tenant, webhook_id, delivery_id))
    return DeliveryPublic.of(view)


@router.post(
    "/{webhook_id}/rotate-secret",
    name="rotate_secret",
    summary="Replace the signing secret",
    description="The answer holds the new `secret`, shown this once. Until "
    "`previous_secret_until` (STRATA_WEBHOOK_SECRET_OVERLAP_SECONDS) every delivery carries "
    "a signature with the old secret too, so a receiver can switch without rejecting one.",
    responses=problem_responses(404, 422),
)
async def rotate_secret(
    webhook_id: WebhookId, database: DatabaseDep, tenant: CurrentTenant, settings: SettingsDep
) -> WebhookCreated:
    overlap = settings.webhook_secret_overlap_seconds
    row = await database.write(lambda db: service.rotate_secret(db, tenant, webhook_id, overlap))
    return WebhookCreated.of(row)
