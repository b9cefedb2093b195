"""Templates and the filters they use; pages leave with the console's security headers.

Every page and fragment is rendered here from what the public API answered. Times come
from the API in UTC and are shown in the server's display zone, as the memory block and
the detail look-up show them.
"""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse

from app.console import auth
from app.console.markdown import render_markdown
from app.domain.jobs import TERMINAL, JobStatus
from app.domain.tool_ids import api_tool_id

# Scripts and styles only from the console's own static files: an injected tag or an
# inline handler does nothing, and shows as an error in the browser's log.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _parse(value: str | datetime | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def environment(zone: ZoneInfo) -> Environment:
    env = Environment(
        loader=PackageLoader("app.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def clock(value: str | datetime | None) -> str:
        moment = _parse(value)
        return f"{moment.astimezone(zone):%H:%M:%S}" if moment else ""

    def when(value: str | datetime | None) -> str:
        moment = _parse(value)
        return f"{moment.astimezone(zone):%Y-%m-%d %H:%M:%S}" if moment else ""

    def age(value: str | datetime | None) -> str:
        """How long ago, in its largest whole unit (`45 s`, `3 min`, `2 h`, `4 d`)."""
        moment = _parse(value)
        if moment is None:
            return ""
        seconds = max(0, int((datetime.now(UTC) - moment).total_seconds()))
        for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
            if seconds >= size:
                return f"{seconds // size} {unit}"
        return f"{seconds} s"

    def pretty(value: Any) -> str:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)

    def tokens(usage: dict[str, int] | None) -> str:
        usage = usage or {}
        parts = [
            f"{usage.get('input_tokens', 0):,} in",
            f"{usage.get('output_tokens', 0):,} out",
        ]
        cached = usage.get("cache_read_input_tokens", 0)
        if cached:
            parts.append(f"{cached:,} cached")
        return " · ".join(parts)

    def hint_name(key: str) -> str:
        """An MCP tool annotation by its protocol name (`read_only_hint` → `readOnlyHint`)."""
        first, *rest = key.split("_")
        return first + "".join(word.capitalize() for word in rest)

    env.filters.update(
        hint_name=hint_name,
        clock=clock,
        when=when,
        age=age,
        pretty=pretty,
        tokens=tokens,
        tool_id=api_tool_id,
        markdown=render_markdown,
    )
    env.globals["zone"] = str(zone)
    env.globals["JobStatus"] = JobStatus  # templates compare job statuses by their enum
    # a job in one of these has ended: it takes no more comments (the API answers 409)
    env.globals["ended_statuses"] = sorted(TERMINAL)
    return env


class Renderer:
    def __init__(self, zone: ZoneInfo) -> None:
        self.env = environment(zone)

    def fragment(self, name: str, **context: Any) -> Markup:
        """Rendered HTML, marked safe (the templates escape what they insert), so that
        joining it with other markup never escapes it a second time."""
        return Markup(self.env.get_template(name).render(**context))

    def page(
        self, request: Request, name: str, *, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        """A whole page: the CSRF token for its forms, and the nonce cookie behind it."""
        context.setdefault("signed_in", auth.key_of(request) is not None)
        html = self.fragment(name, csrf=auth.csrf_token(request), request=request, **context)
        response = HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)
        auth.remember_nonce(request, response)
        return response


def read_stamp() -> int:
    """When a list (files, comments) is about to be read from the API, in nanoseconds: the
    list carries it (`data-as-of`), and the page keeps the one read last. A list a request
    answers and the same list the live stream sends can arrive in either order; a list
    read later saw everything committed before the other's read began."""
    return time.time_ns()


DOM_ID = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
"""The element ids a fragment may name: a CSS selector `#id` of them needs no escaping."""


def oob(target: str, html: Markup | str, swap: str = "beforeend") -> Markup:
    """`html` put into the element `#target` of the page, appended (`beforeend`) or
    replacing its content (`innerHTML`); wrapped in a template so that any element parses
    in it (rows, list items). Targets are elements every page of the kind has, or ids
    the templates made with the `tool_id` filter; a plain `str` is text, escaped here."""
    if swap not in ("beforeend", "afterbegin", "innerHTML"):
        raise ValueError(f"swap {swap!r}: the wrapper would replace the target itself")
    if DOM_ID.fullmatch(target) is None:
        raise ValueError(f"target {target!r}: not an element id a selector can name as it is")
    wrapper = Markup('<template><div hx-swap-oob="{}:#{}">{}</div></template>')
    return wrapper.format(swap, target, html)
