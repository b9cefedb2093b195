"""What every console route shares: the API as the signed-in user, the renderer, checked
forms, and how an answer leaves (a page, an htmx fragment, a redirect, an error)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from starlette.datastructures import FormData, UploadFile

from app.console import auth
from app.console.api import ApiError, PublicApi
from app.console.live import LastWord
from app.console.render import SECURITY_HEADERS, Renderer, oob
from app.settings import Settings


class Forbidden(Exception):
    """A form without a valid CSRF token."""


# dependencies are `async def` so that FastAPI does not run them in its thread pool
async def renderer_of(request: Request) -> Renderer:
    renderer: Renderer = request.app.state.console_renderer
    return renderer


async def api_of(request: Request) -> PublicApi:
    return api_as(request, auth.key_of(request))


def api_as(request: Request, key: str | None) -> PublicApi:
    """The public API as the holder of `key`, for the browser of `request`."""
    buffer = settings_of(request).console_stream_buffer
    return PublicApi(request.app, key, client_of(request), buffer=buffer)


def client_of(request: Request) -> tuple[str, int] | None:
    return (request.client.host, request.client.port) if request.client else None


def settings_of(request: Request) -> Settings:
    """The settings of the application the console is part of."""
    settings: Settings = request.app.state.settings
    return settings


async def page_size_of(request: Request) -> int:
    return settings_of(request).console_page_size


async def last_word_of(request: Request) -> LastWord:
    return LastWord.of(settings_of(request))


Api = Annotated[PublicApi, Depends(api_of)]
Templates = Annotated[Renderer, Depends(renderer_of)]
PageSize = Annotated[int, Depends(page_size_of)]
LastWords = Annotated[LastWord, Depends(last_word_of)]


async def checked_form(request: Request) -> FormData:
    """The posted form, once its CSRF token (field or htmx header) proved it ours."""
    form = await request.form()
    sent = request.headers.get(auth.CSRF_HEADER) or form.get(auth.CSRF_FIELD)
    if not auth.csrf_valid(request, sent if isinstance(sent, str) else None):
        raise Forbidden
    return form


Form = Annotated[FormData, Depends(checked_form)]


def text(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def upload(form: FormData, name: str) -> UploadFile | None:
    value = form.get(name)
    return value if isinstance(value, UploadFile) else None


def is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def fragment(html: str, **headers: str) -> HTMLResponse:
    return HTMLResponse(html, headers={**SECURITY_HEADERS, **headers})


def done(request: Request, to: str, html: str = "") -> Response:
    """After a change: htmx gets `html` (fragments for the page); a plain form post is
    sent on to `to` (post, redirect, get)."""
    if is_htmx(request):
        return fragment(html)
    return RedirectResponse(to, status_code=303)


def flash(message: str, level: str = "error") -> str:
    return oob("flash", Markup('<p class="{}">{}</p>').format(level, message), "innerHTML")


def sign_in_url(request: Request) -> str:
    return "/console/sign-in?next=" + _next_of(request)


def _next_of(request: Request) -> str:
    path = request.url.path if request.method == "GET" else "/console/sessions"
    if request.url.path.endswith("/live"):
        path = request.url.path.removesuffix("/live")
    return quote(path, safe="/")


def _api_error(request: Request, exc: ApiError) -> Response:
    if exc.status == 401:
        if is_htmx(request):
            return fragment("", **{"HX-Redirect": sign_in_url(request)})
        return RedirectResponse(sign_in_url(request), status_code=303)
    if is_htmx(request):  # htmx swaps only 2xx answers; the message goes to the alert line
        return fragment(flash(exc.detail), **{"HX-Reswap": "none"})
    return _error_page(request, exc.status, exc.detail, exc.problem)


def _forbidden(request: Request, _exc: Forbidden) -> Response:
    message = "This form has expired (or came from another site): reload the page and try again."
    if is_htmx(request):
        return fragment(flash(message), **{"HX-Reswap": "none"})
    return _error_page(request, 403, message, {})


def _error_page(
    request: Request, status: int, message: str, problem: Mapping[str, Any]
) -> Response:
    renderer: Renderer = request.app.state.console_renderer
    return renderer.page(
        request, "error.html", status_code=status, status=status, message=message, problem=problem
    )


def install_error_pages(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(Forbidden, _forbidden)  # type: ignore[arg-type]
