"""Held tool calls: a decision on one (allow, deny, edit, respond) from the panel of a
session's or a job's page, and the tenant's "Waiting for you" list."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from markupsafe import Markup
from starlette.datastructures import FormData

from app.console import auth
from app.console.api import ApiError, PublicApi
from app.console.live import q, session_actions
from app.console.render import DOM_ID
from app.console.web import Api, Form, PageSize, Templates, done, fragment, is_htmx, text

router = APIRouter(prefix="/console")

DECISIONS = ("allow", "deny", "edit", "respond")
REMEMBER = ("session", "tenant")


class Refused(Exception):
    """What the form holds cannot be sent: the message says why."""


def decision_body(form: FormData) -> dict[str, Any]:
    """The API's decision body from the panel's form; `Refused` when the form cannot
    make one (an unknown decision, an input that is no JSON object)."""
    decision = text(form, "decision")
    if decision not in DECISIONS:
        raise Refused("Choose allow, deny, edit or respond.")
    body: dict[str, Any] = {"decision": decision}
    if text(form, "reason"):
        body["reason"] = text(form, "reason")
    if decision in ("allow", "deny") and text(form, "remember") in REMEMBER:
        body["remember"] = text(form, "remember")
    if decision == "edit":
        try:
            value = json.loads(text(form, "input"))
        except ValueError as exc:
            raise Refused(f"The input is not JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise Refused("The input must be a JSON object ({…}), as the tool's input is.")
        body["input"] = value
    if decision == "respond":
        body["content"] = text(form, "content")
        body["is_error"] = text(form, "is_error") == "yes"
    return body


async def _panel(api: PublicApi, job_id: str, panel: str) -> tuple[str, list[dict[str, Any]]]:
    """The page the form came from and the actions its panel shows now."""
    job = await api.get(f"/jobs/{q(job_id)}")
    if panel == "session":
        session_id = str(job["session_id"])
        return f"/console/sessions/{q(session_id)}", await session_actions(api, session_id)
    return f"/console/jobs/{q(job_id)}", list(job.get("required_action") or [])


def _refused(request: Request, action_id: str, message: str) -> Response | None:
    """An htmx form's refusal, shown in its action's card (the typed input stays)."""
    target = f"{action_id}-error"
    if not is_htmx(request) or DOM_ID.fullmatch(target) is None:
        return None
    html = Markup('<p class="error">{}</p>').format(message)
    return fragment(html, **{"HX-Retarget": f"#{target}", "HX-Reswap": "innerHTML"})


@router.post("/jobs/{job_id}/actions/{action_id}")
async def decide(
    job_id: str, action_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    """One decision (`POST /jobs/{id}/actions/{action_id}`); the panel shows what still
    waits. A decision the API refuses (a 422 naming the input's field, a 409) is shown
    in the action's card."""
    panel = "session" if text(form, "panel") == "session" else "job"
    try:
        body = decision_body(form)
        await api.send("POST", f"/jobs/{q(job_id)}/actions/{q(action_id)}", body)
    except Refused as exc:
        refused = _refused(request, action_id, str(exc))
        if refused is None:
            raise ApiError(422, {"detail": str(exc)}) from None
        return refused
    except ApiError as exc:
        refused = _refused(request, action_id, exc.detail) if exc.status != 401 else None
        if refused is None:
            raise
        return refused
    page, pending = await _panel(api, job_id, panel)
    html = templates.fragment(
        "partials/actions.html", actions=pending, panel=panel, csrf=auth.csrf_token(request)
    )
    return done(request, f"{page}#actions", html)


@router.get("/waiting")
async def waiting(request: Request, api: Api, templates: Templates, page: PageSize) -> Response:
    listed = await api.get(
        "/actions", status="pending", limit=page, after=request.query_params.get("after")
    )
    return templates.page(
        request,
        "waiting.html",
        actions=listed["data"],
        next_cursor=listed["next_cursor"],
        first_page=not request.query_params.get("after"),
    )
