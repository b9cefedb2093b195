"""The API documentation pages, Swagger UI at `/docs` and ReDoc at `/redoc`, with their
JavaScript and CSS served from the package (`app/static/`, vendored with their licences) so
that they load without reaching any CDN.

Each page also carries a Content-Security-Policy that lets it load from the server only
(its own inline start-up script allowed by hash), so a remote URL a future copy of the
assets names is refused by the browser rather than fetched."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
ASSETS = "/docs/assets"
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.DOTALL)


def _local_only(page: HTMLResponse) -> HTMLResponse:
    """`page` with a policy that allows the server's own resources and its inline scripts
    (styles inline too: both viewers set them at run time; workers from `blob:`, as ReDoc
    starts its search)."""
    html = bytes(page.body).decode()
    hashes = "".join(
        f" 'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
        for script in _INLINE_SCRIPT.findall(html)
    )
    page.headers["Content-Security-Policy"] = (
        f"default-src 'self'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    )
    return page


def install_docs(app: FastAPI) -> None:
    """For an app made with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS, StaticFiles(directory=STATIC_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False, tags=["docs"])
    async def swagger_ui() -> HTMLResponse:
        return _local_only(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{app.title} - Swagger UI",
                swagger_js_url=f"{ASSETS}/swagger-ui/swagger-ui-bundle.js",
                swagger_css_url=f"{ASSETS}/swagger-ui/swagger-ui.css",
                swagger_favicon_url=f"{ASSETS}/swagger-ui/favicon-32x32.png",
                # no badge from validator.swagger.io, which would also learn the spec's URL
                swagger_ui_parameters={"validatorUrl": None},
            )
        )

    @app.get("/redoc", include_in_schema=False, tags=["docs"])
    async def redoc() -> HTMLResponse:
        return _local_only(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{ASSETS}/redoc/redoc.standalone.js",
                redoc_favicon_url=f"{ASSETS}/swagger-ui/favicon-32x32.png",
                with_google_fonts=False,
            )
        )
