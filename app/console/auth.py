"""Who the console acts for, and the checks on every form that changes something.

The API key a person signs in with is kept in an HttpOnly, SameSite=Strict cookie
scoped to `/console`: no script reads it and no other site's page sends it. On a server
without keys there is no key to keep and every page works as the local tenant.

Forms carry a CSRF token: HMAC-SHA256, keyed with the signed-in key, of a random nonce
kept in a second cookie. A page of another site can neither read the token nor make a
valid one (it would need the key), and a request without both cookies fails, so a form
posted from elsewhere changes nothing, on a keyless server too.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

KEY_COOKIE = "strata_console_key"
NONCE_COOKIE = "strata_console_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
COOKIE_PATH = "/console"


def key_of(request: Request) -> str | None:
    return request.cookies.get(KEY_COOKIE) or None


def nonce_of(request: Request) -> str:
    """The request's CSRF nonce; a new one (set by `remember_nonce`) when it has none."""
    nonce = request.cookies.get(NONCE_COOKIE)
    if nonce is None:
        nonce = getattr(request.state, "new_nonce", None) or secrets.token_urlsafe(24)
        request.state.new_nonce = nonce
    return nonce


def csrf_token(request: Request) -> str:
    """The token the page's forms send back."""
    return _token(key_of(request), nonce_of(request))


def csrf_valid(request: Request, sent: str | None) -> bool:
    nonce = request.cookies.get(NONCE_COOKIE)
    if not nonce or not sent:
        return False
    return hmac.compare_digest(_token(key_of(request), nonce), sent)


def _token(key: str | None, nonce: str) -> str:
    return hmac.new((key or "").encode(), nonce.encode(), hashlib.sha256).hexdigest()


def _cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(
        name,
        value,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def remember_nonce(request: Request, response: Response) -> None:
    """Set the nonce cookie if this request made a new nonce."""
    nonce = getattr(request.state, "new_nonce", None)
    if nonce is not None and NONCE_COOKIE not in request.cookies:
        _cookie(response, request, NONCE_COOKIE, nonce)


def sign_in(request: Request, response: Response, key: str) -> None:
    """Keep the key; a new nonce goes with it (tokens made without the key end here)."""
    _cookie(response, request, KEY_COOKIE, key)
    _cookie(response, request, NONCE_COOKIE, secrets.token_urlsafe(24))


def sign_out(request: Request, response: Response) -> None:
    response.delete_cookie(
        KEY_COOKIE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
