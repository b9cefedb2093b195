"""Webhooks: subscriptions, a new one (its secret shown once), a subscription's deliveries
with every attempt, "send test", redelivery, editing, and a new secret (shown once)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.console import auth
from app.console.live import q
from app.console.web import Api, Form, PageSize, Templates, done, text

router = APIRouter(prefix="/console/webhooks")


@router.get("")
async def webhooks(request: Request, api: Api, templates: Templates, page: PageSize) -> Response:
    listed = await api.get("/webhooks", limit=page, after=request.query_params.get("after"))
    return templates.page(
        request,
        "webhooks.html",
        webhooks=listed["data"],
        next_cursor=listed["next_cursor"],
        created=None,
    )


@router.post("")
async def create_webhook(
    request: Request, api: Api, templates: Templates, form: Form, page: PageSize
) -> Response:
    events = [e.strip() for e in text(form, "events").split(",") if e.strip()]
    body = {"url": text(form, "url"), "events": events or ["*"]}
    if text(form, "description"):
        body["description"] = text(form, "description")
    created = await api.send("POST", "/webhooks", body)
    listed = await api.get("/webhooks", limit=page)
    # the secret is in this answer only: shown on this page, never again
    return templates.page(
        request,
        "webhooks.html",
        status_code=201,
        webhooks=listed["data"],
        next_cursor=listed["next_cursor"],
        created=created,
    )


@router.get("/{webhook_id}")
async def webhook_page(
    webhook_id: str, request: Request, api: Api, templates: Templates, page: PageSize
) -> Response:
    path = f"/webhooks/{q(webhook_id)}"
    return templates.page(
        request,
        "webhook.html",
        webhook=await api.get(path),
        deliveries=await api.get(
            f"{path}/deliveries", limit=page, after=request.query_params.get("after")
        ),
        rotated=None,
    )


@router.post("/{webhook_id}/test")
async def send_test(
    webhook_id: str, request: Request, api: Api, templates: Templates, form: Form, page: PageSize
) -> Response:
    path = f"/webhooks/{q(webhook_id)}"
    await api.send("POST", f"{path}/test")
    deliveries = await api.get(f"{path}/deliveries", limit=page)
    html = templates.fragment(
        "partials/deliveries.html",
        deliveries=deliveries,
        webhook_id=webhook_id,
        csrf=auth.csrf_token(request),
    )
    return done(request, f"/console/webhooks/{q(webhook_id)}", html)


@router.post("/{webhook_id}/enabled")
async def set_enabled(webhook_id: str, request: Request, api: Api, form: Form) -> Response:
    enabled = text(form, "enabled") == "true"
    await api.send("PATCH", f"/webhooks/{q(webhook_id)}", {"enabled": enabled})
    return RedirectResponse(f"/console/webhooks/{q(webhook_id)}", status_code=303)


@router.post("/{webhook_id}/edit")
async def edit(webhook_id: str, api: Api, form: Form) -> Response:
    """The URL, events and description as the form has them (an empty description clears)."""
    events = [e.strip() for e in text(form, "events").split(",") if e.strip()]
    body: dict[str, Any] = {"url": text(form, "url"), "events": events or ["*"]}
    body["description"] = text(form, "description") or None
    await api.send("PATCH", f"/webhooks/{q(webhook_id)}", body)
    return RedirectResponse(f"/console/webhooks/{q(webhook_id)}", status_code=303)


@router.post("/{webhook_id}/rotate-secret")
async def rotate_secret(
    webhook_id: str, request: Request, api: Api, templates: Templates, form: Form, page: PageSize
) -> Response:
    path = f"/webhooks/{q(webhook_id)}"
    rotated = await api.send("POST", f"{path}/rotate-secret")
    # the new secret is in this answer only: shown on this page, never again
    return templates.page(
        request,
        "webhook.html",
        webhook=rotated,
        deliveries=await api.get(f"{path}/deliveries", limit=page),
        rotated=rotated,
    )


@router.post("/{webhook_id}/deliveries/{delivery_id}/redeliver")
async def redeliver(webhook_id: str, delivery_id: str, api: Api, form: Form) -> Response:
    await api.send("POST", f"/webhooks/{q(webhook_id)}/deliveries/{q(delivery_id)}/redeliver")
    return RedirectResponse(f"/console/webhooks/{q(webhook_id)}", status_code=303)
