"""`/files`: what is stored (by its bytes, within the Messages API's limits), how it is
served, deleted, and kept to its tenant."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.services.files import files_root
from tests.fakes import media
from tests.support.apps import serve

ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}


@pytest.fixture
async def api(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(api_keys="acme:key-a,globex:key-b", file_max_bytes=64 * 1024)
    async with serve(settings) as (_, client):
        client.headers.update(ACME)
        yield client


async def _upload(
    api: httpx.AsyncClient, data: bytes, content_type: str, name: str = "x"
) -> httpx.Response:
    return await api.post(
        "/files", params={"filename": name}, content=data, headers={"Content-Type": content_type}
    )


@pytest.mark.parametrize(
    ("data", "declared", "media_type", "size"),
    [
        (media.png(120, 80), "image/png", "image/png", (120, 80)),
        (media.jpeg(640, 480), "image/jpeg", "image/jpeg", (640, 480)),
        (media.gif(10, 20), "image/gif", "image/gif", (10, 20)),
        (media.webp(300, 200), "image/webp", "image/webp", (300, 200)),
        # the bytes decide, not the header
        (media.png(5, 6), "application/octet-stream", "image/png", (5, 6)),
    ],
)
async def test_an_image_is_stored_with_its_type_and_size_told_from_its_bytes(
    api: httpx.AsyncClient, data: bytes, declared: str, media_type: str, size: tuple[int, int]
) -> None:
    response = await _upload(api, data, declared, "plan.img")

    assert response.status_code == 201, response.text
    body = response.json()
    assert body["id"].startswith("fil_")
    assert response.headers["location"] == f"/files/{body['id']}"
    assert (body["media_type"], body["width"], body["height"]) == (media_type, *size)
    assert body["size"] == len(data)
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["filename"] == "plan.img"
    assert body["tokens"] == max(1, -(-size[0] * size[1] // 750))


async def test_an_image_token_estimate_is_that_of_the_image_scaled_to_1568_pixels(
    api: httpx.AsyncClient,
) -> None:
    response = await _upload(api, media.png(3136, 1568), "image/png")

    assert response.json()["tokens"] == -(-1568 * 784 // 750)


async def test_a_pdf_is_stored_with_its_pages_and_their_tokens(api: httpx.AsyncClient) -> None:
    response = await _upload(api, media.pdf(3), "application/pdf", "spec.pdf")

    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["media_type"], body["pages"], body["tokens"]) == ("application/pdf", 3, 6000)


@pytest.mark.parametrize("declared", ["text/plain", "text/markdown; charset=utf-8"])
async def test_text_declared_as_such_is_stored(api: httpx.AsyncClient, declared: str) -> None:
    response = await _upload(api, "# Notes\nré".encode(), declared, "notes.md")

    assert response.status_code == 201, response.text
    assert response.json()["media_type"] == declared.split(";")[0]


async def test_a_multipart_form_file_is_stored(api: httpx.AsyncClient) -> None:
    data = media.png(7, 7)

    response = await api.post("/files", files={"file": ("shot.png", data, "image/png")})

    assert response.status_code == 201, response.text
    assert (response.json()["filename"], response.json()["width"]) == ("shot.png", 7)


@pytest.mark.parametrize(
    ("data", "declared"),
    [
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "image/svg+xml"),
        (b"PK\x03\x04zip", "application/zip"),
        (b"just bytes", "image/png"),  # declared an image, is none
        (b"\xff\xfe\x00bad", "text/plain"),  # declared text, is not UTF-8
    ],
)
async def test_content_of_another_type_is_refused_with_415(
    api: httpx.AsyncClient, data: bytes, declared: str
) -> None:
    response = await _upload(api, data, declared)

    assert response.status_code == 415, response.text
    assert response.headers["content-type"] == "application/problem+json"


async def test_a_file_over_the_limit_is_refused_with_413(api: httpx.AsyncClient) -> None:
    response = await _upload(api, b"a" * (64 * 1024 + 1), "text/plain")

    assert response.status_code == 413, response.text


async def test_the_files_limit_is_its_own_not_the_json_bodies(make_settings: Any) -> None:
    """A file over STRATA_MAX_BODY_BYTES (JSON bodies) but within STRATA_FILE_MAX_BYTES
    is stored."""
    settings = make_settings(max_body_bytes=1024, file_max_bytes=64 * 1024)
    async with serve(settings) as (_, client):
        response = await _upload(client, b"a" * 4096, "text/plain")

    assert response.status_code == 201, response.text


async def test_a_tenant_past_its_file_count_is_refused_with_413_until_it_deletes_one(
    make_settings: Any,
) -> None:
    settings = make_settings(api_keys="acme:key-a,globex:key-b", file_tenant_max_count=2)
    async with serve(settings) as (_, client):
        client.headers.update(ACME)
        first = (await _upload(client, b"one", "text/plain")).json()
        await _upload(client, b"two", "text/plain")

        refused = await _upload(client, b"three", "text/plain")
        other = await client.post(
            "/files", content=b"three", headers={**GLOBEX, "Content-Type": "text/plain"}
        )
        await client.delete(f"/files/{first['id']}")
        after_delete = await _upload(client, b"three", "text/plain")

    assert refused.status_code == 413, refused.text
    assert refused.json()["type"].endswith("storage-quota")
    assert other.status_code == 201, other.text  # the quota is the tenant's
    assert after_delete.status_code == 201, after_delete.text


async def test_a_tenant_past_its_file_bytes_is_refused_and_the_bytes_are_not_kept(
    make_settings: Any,
) -> None:
    settings = make_settings(file_tenant_max_bytes=10)
    async with serve(settings) as (_, client):
        await _upload(client, b"12345678", "text/plain")

        refused = await _upload(client, b"abcdef", "text/plain")

    assert refused.status_code == 413, refused.text
    assert refused.json()["type"].endswith("storage-quota")
    stored = [p.name for p in files_root(settings).rglob("*") if p.is_file()]
    assert hashlib.sha256(b"12345678").hexdigest() in stored
    assert hashlib.sha256(b"abcdef").hexdigest() not in stored


@pytest.mark.parametrize(
    "data",
    [media.png(8001, 10), media.pdf(101), media.pdf(1, password="secret")],
    ids=["image-over-8000-pixels", "pdf-over-100-pages", "encrypted-pdf"],
)
async def test_a_file_the_messages_api_would_refuse_is_422(make_settings: Any, data: bytes) -> None:
    async with serve(make_settings()) as (_, client):
        response = await _upload(client, data, "application/octet-stream")

    assert response.status_code == 422, response.text
    assert response.json()["type"].endswith("file-unprocessable")


async def test_an_image_is_served_inline_with_nosniff(api: httpx.AsyncClient) -> None:
    data = media.png()
    file_id = (await _upload(api, data, "image/png", "plan.png")).json()["id"]

    got = await api.get(f"/files/{file_id}/content")

    assert got.status_code == 200
    assert got.content == data
    assert got.headers["content-type"] == "image/png"
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-disposition"].startswith("inline;")


@pytest.mark.parametrize(
    ("data", "declared", "served"),
    [
        (b"hello", "text/plain", "text/plain; charset=utf-8"),
        (media.pdf(), "application/pdf", "application/pdf"),
    ],
)
async def test_a_document_is_served_as_an_attachment_with_nosniff(
    api: httpx.AsyncClient, data: bytes, declared: str, served: str
) -> None:
    file_id = (await _upload(api, data, declared, "doc")).json()["id"]

    got = await api.get(f"/files/{file_id}/content")

    assert got.content == data
    assert got.headers["content-type"] == served
    assert got.headers["x-content-type-options"] == "nosniff"
    assert got.headers["content-disposition"] == "attachment; filename*=UTF-8''doc"


async def test_files_are_listed_newest_first_in_pages(api: httpx.AsyncClient) -> None:
    ids = [(await _upload(api, f"n{i}".encode(), "text/plain")).json()["id"] for i in range(3)]

    first = (await api.get("/files", params={"limit": 2})).json()
    second = (await api.get("/files", params={"limit": 2, "after": first["next_cursor"]})).json()

    assert [f["id"] for f in first["data"] + second["data"]] == ids[::-1]
    assert second["next_cursor"] is None


async def test_a_deleted_file_is_gone_and_its_bytes_too(
    api: httpx.AsyncClient, make_settings: Any
) -> None:
    file_id = (await _upload(api, b"bye", "text/plain")).json()["id"]

    deleted = await api.delete(f"/files/{file_id}")

    assert deleted.status_code == 204
    assert (await api.get(f"/files/{file_id}")).status_code == 404
    assert (await api.get(f"/files/{file_id}/content")).status_code == 404
    assert not [p for p in (make_settings().data_dir / "files").rglob("*") if p.is_file()]


async def test_bytes_shared_by_two_files_stay_until_the_last_goes(api: httpx.AsyncClient) -> None:
    first = (await _upload(api, b"same", "text/plain")).json()["id"]
    second = (await _upload(api, b"same", "text/plain")).json()["id"]

    await api.delete(f"/files/{first}")

    assert (await api.get(f"/files/{second}/content")).content == b"same"


async def test_another_tenants_file_is_not_found(api: httpx.AsyncClient) -> None:
    file_id = (await _upload(api, b"mine", "text/plain")).json()["id"]

    for method, path in [
        ("GET", f"/files/{file_id}"),
        ("GET", f"/files/{file_id}/content"),
        ("DELETE", f"/files/{file_id}"),
    ]:
        response = await api.request(method, path, headers=GLOBEX)
        assert response.status_code == 404, (method, path)
    assert (await api.get("/files", headers=GLOBEX)).json()["data"] == []
    assert (await api.get(f"/files/{file_id}")).status_code == 200


async def test_a_malformed_file_id_is_refused_where_it_enters(api: httpx.AsyncClient) -> None:
    response = await api.get("/files/..%2Fetc")

    assert response.status_code in (404, 422)
    assert (await api.get("/files/fil_nope")).status_code == 422
