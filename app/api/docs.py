"""The API documentation pages, Swagger UI at `/docs` and ReDoc at `/redoc`, with their
JavaScript and CSS served from the package (`app/static/`, vendored with their licences) so
that they load without reaching any CDN."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).resolve().parents[1] / "static"
ASSETS = "/docs/assets"


def install_docs(app: FastAPI) -> None:
    """For an app made with `docs_url=None, redoc_url=None`."""
    app.mount(ASSETS, StaticFiles(directory=STATIC_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get("/docs", include_in_schema=False, tags=["docs"])
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/swagger-ui/favicon-32x32.png",
        )

    @app.get("/redoc", include_in_schema=False, tags=["docs"])
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{ASSETS}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/swagger-ui/favicon-32x32.png",
            with_google_fonts=False,
        )
