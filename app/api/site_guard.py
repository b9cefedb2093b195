"""Refuse what a web page of another site can make a browser send: changes, and reads
under a borrowed name.

A browser sends a body-less POST from any page without asking (no CORS preflight), and
a keyless server has no credential to tell its own user from that page. So an unsafe
method (POST, PUT, PATCH, DELETE) is refused with 403 `cross-site-request` when the
browser says it came from another origin: `Sec-Fetch-Site` other than `same-origin` or
`none` or, from a browser that does not send it, an `Origin` whose host is not the
request's `Host` (the algorithm of Go's `net/http.CrossOriginProtection`). An origin
that CORS allows (`STRATA_CORS_ORIGINS`) passes, as do requests with neither header
(curl, the SDKs): only browsers send them, and a page cannot forge them.

A DNS-rebinding page points a name of its own at this server's address and reads
what it answers as same-origin; its requests carry that name in `Host`. So a request
whose `Host` is not a loopback name, the bind address (`STRATA_HOST`) or a configured
name (`STRATA_ALLOWED_HOSTS`) is refused with 403 `host-not-allowed`, whatever its method.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.errors import problem_response
from app.settings import is_loopback_host

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# what `Sec-Fetch-Site` says of a request the page's own origin (or the user) made
_OWN_FETCH_SITES = frozenset({"same-origin", "none"})
ANY = "*"


@dataclass(frozen=True)
class Refusal:
    slug: str
    detail: str


@dataclass(frozen=True)
class SitePolicy:
    """The names this server answers under and the origins CORS lets call it."""

    hosts: frozenset[str]
    trusted_origins: frozenset[str]

    @classmethod
    def of(
        cls, *, bind_host: str, allowed_hosts: Iterable[str], cors_origins: Iterable[str]
    ) -> SitePolicy:
        names = {host_name(bind_host), *(host_name(h) for h in allowed_hosts)}
        return cls(hosts=frozenset(names - {""}), trusted_origins=frozenset(cors_origins))

    def allows_host(self, name: str) -> bool:
        return ANY in self.hosts or name in self.hosts or is_loopback_host(name)

    def trusts(self, origin: str) -> bool:
        return ANY in self.trusted_origins or origin in self.trusted_origins


def host_name(host: str) -> str:
    """The name a `Host` value (or an address) gives, without port, brackets or final dot:
    `LocalHost:8000` → `localhost`, `[::1]:8000` → `::1`."""
    value = host.strip().lower()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    elif value.count(":") > 1:  # an IPv6 address as it is bound, not as a Host sends it
        name = value
    else:
        name = value.partition(":")[0]
    return name.rstrip(".")


def decide(
    policy: SitePolicy,
    *,
    method: str,
    host: str | None,
    origin: str | None,
    fetch_site: str | None,
) -> Refusal | None:
    """Why this request is refused, or None when it may go on. `host`, `origin` and
    `fetch_site` are the request's `Host`, `Origin` and `Sec-Fetch-Site` (None: absent)."""
    if host is not None and not policy.allows_host(host_name(host)):
        return Refusal(
            "host-not-allowed",
            f"this server does not answer under the name {host_name(host)!r} "
            "(a page of another site may have pointed it here); "
            "name it in STRATA_ALLOWED_HOSTS if it is this server's",
        )
    if method.upper() in SAFE_METHODS:
        return None
    if origin is not None and policy.trusts(origin):
        return None
    if fetch_site is not None:
        if fetch_site.strip().lower() in _OWN_FETCH_SITES:
            return None
        return _cross_site(method, f"Sec-Fetch-Site: {fetch_site}")
    if origin is None:
        return None  # not a browser's request, or one of a browser that sends neither
    if host is not None and urlsplit(origin).netloc.lower() == host.strip().lower():
        return None  # `Origin: null` has no host, so it never gets here
    return _cross_site(method, f"Origin: {origin}")


def _cross_site(method: str, evidence: str) -> Refusal:
    return Refusal(
        "cross-site-request",
        f"a {method.upper()} from a page of another site ({evidence}) is refused; "
        "an origin listed in STRATA_CORS_ORIGINS may make it",
    )


class SiteGuardMiddleware:
    def __init__(self, app: ASGIApp, *, policy: SitePolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        refusal = decide(
            self.policy,
            method=scope["method"],
            host=headers.get("host"),
            origin=headers.get("origin"),
            fetch_site=headers.get("sec-fetch-site"),
        )
        if refusal is None:
            await self.app(scope, receive, send)
            return
        response = problem_response(
            403, refusal.detail, slug=refusal.slug, instance=scope.get("path")
        )
        await response(scope, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    """The first value of each header (a repeated Host or Origin is the first one)."""
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        found.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return found
