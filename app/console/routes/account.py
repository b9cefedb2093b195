"""Signing in with an API key, and out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response

from app.console import auth
from app.console.web import Form, Templates, api_as, text

router = APIRouter(prefix="/console")


def _next(request: Request, value: str | None) -> str:
    """Only a console path: a sign-in link can never send the browser elsewhere."""
    if value and value.startswith("/console/") and not value.startswith("/console//"):
        return value
    return "/console/sessions"


async def _works(request: Request, key: str | None) -> bool:
    """Whether the API takes this key (or, with None, needs none)."""
    answer = await api_as(request, key).request("GET", "/sessions", params={"limit": 1})
    return answer.status == 200


@router.get("")
async def home() -> Response:
    return RedirectResponse("/console/sessions", status_code=303)


@router.get("/sign-in")
async def sign_in_page(request: Request, templates: Templates) -> Response:
    return templates.page(
        request,
        "sign_in.html",
        next=_next(request, request.query_params.get("next")),
        keyless=await _works(request, None),
        error=None,
    )


@router.post("/sign-in")
async def sign_in(request: Request, templates: Templates, form: Form) -> Response:
    key = text(form, "key")
    target = _next(request, text(form, "next"))
    if not key or not await _works(request, key):
        return templates.page(
            request,
            "sign_in.html",
            status_code=401,
            next=target,
            keyless=False,
            error="This key is not valid here.",
        )
    response = RedirectResponse(target, status_code=303)
    auth.sign_in(request, response, key)
    return response


@router.post("/sign-out")
async def sign_out(request: Request, form: Form) -> Response:
    response = RedirectResponse("/console/sign-in", status_code=303)
    auth.sign_out(request, response)
    return response
