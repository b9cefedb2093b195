"""API keys: the tenant's keys, a new one (shown once), revoking one."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.console.live import q
from app.console.web import Api, Form, Templates, settings_of, text

router = APIRouter(prefix="/console/keys")


async def _page(
    request: Request, api: Api, templates: Templates, created: Any = None, status_code: int = 200
) -> Response:
    keys = (await api.get("/api-keys"))["data"]
    return templates.page(request, "keys.html", status_code=status_code, keys=keys, created=created)


@router.get("")
async def keys(request: Request, api: Api, templates: Templates) -> Response:
    return await _page(request, api, templates)


def _expiry(request: Request, value: str) -> str | None:
    """The form's local date and time (a `datetime-local` field: no zone) as an instant
    in the console's display zone; a value that is no such time goes to the API as it is,
    which says what is wrong with it."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=settings_of(request).zone)
    return moment.isoformat()


@router.post("")
async def create_key(request: Request, api: Api, templates: Templates, form: Form) -> Response:
    body = {"expires_at": _expiry(request, text(form, "expires_at"))}
    created = await api.send("POST", "/api-keys", body)
    # the key is in this answer only: shown on this page, never again
    return await _page(request, api, templates, created=created, status_code=201)


@router.post("/{key_id}/revoke")
async def revoke_key(key_id: str, api: Api, form: Form) -> Response:
    await api.send("POST", f"/api-keys/{q(key_id)}/revoke")
    return RedirectResponse("/console/keys", status_code=303)
