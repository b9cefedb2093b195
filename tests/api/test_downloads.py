"""Stored files leave as downloads on every route that serves them (app/domain/downloads.py):
the API's `GET /jobs/{id}/files/…` and the console's download link, which a signed-in
browser follows on the server's own origin."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.services.piece_jobs import workspace_of
from tests.support.apps import serve

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
EVIL_HTML = b"<script>fetch('/sessions').then(r => r.text()).then(alert)</script>"
EVIL_SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
# the API's route, and the console's that a browser follows from a job's page
ROUTES = ("/jobs/{job_id}/files/input/{name}", "/console/jobs/{job_id}/files/input/{name}")


@pytest.fixture
async def api(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        yield client


async def _download(
    api: httpx.AsyncClient, route: str, name: str, content: bytes
) -> httpx.Response:
    job = await api.post("/jobs", json={"instruction": "Keep the files.", "start": False})
    job_id = job.json()["id"]
    put = await api.put(f"/jobs/{job_id}/files/input/{name}", content=content)
    assert put.status_code == 201, put.text
    got = await api.get(route.format(job_id=job_id, name=name))
    assert got.status_code == 200, got.text
    assert got.content == content
    return got


def _assert_download(got: httpx.Response, name: str, media_type: str) -> None:
    assert got.headers["content-type"] == media_type
    assert got.headers["content-disposition"] == f"attachment; filename*=UTF-8''{name}"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-security-policy"] == "sandbox"


@pytest.mark.parametrize("route", ROUTES)
async def test_an_html_file_downloads_as_an_opaque_attachment(
    api: httpx.AsyncClient, route: str
) -> None:
    got = await _download(api, route, "evil.html", EVIL_HTML)

    _assert_download(got, "evil.html", "application/octet-stream")


@pytest.mark.parametrize("route", ROUTES)
async def test_an_svg_file_downloads_as_an_opaque_attachment(
    api: httpx.AsyncClient, route: str
) -> None:
    got = await _download(api, route, "x.svg", EVIL_SVG)

    _assert_download(got, "x.svg", "application/octet-stream")


@pytest.mark.parametrize("route", ROUTES)
async def test_a_png_keeps_its_image_type_and_is_still_an_attachment(
    api: httpx.AsyncClient, route: str
) -> None:
    got = await _download(api, route, "chart.png", PNG)

    _assert_download(got, "chart.png", "image/png")


async def test_an_output_file_written_by_an_agent_downloads_as_an_attachment(
    make_settings: Any,
) -> None:
    settings = make_settings(run_worker_in_server=False)
    async with serve(settings) as (_, api):
        job_id = (await api.post("/jobs", json={"instruction": "x", "start": False})).json()["id"]
        await api.get(f"/jobs/{job_id}/files")  # creates the layout
        (workspace_of(settings, job_id).root / "output" / "page.js").write_bytes(b"alert(1)")
        got = await api.get(f"/jobs/{job_id}/files/output/page.js")

    assert got.status_code == 200
    _assert_download(got, "page.js", "application/octet-stream")
