"""A tenant manages its own API keys over REST: list, create (shown once), revoke."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI

from app.services.auth import create_key
from tests.support.apps import serve
from tests.support.settings import MakeSettings

PROBLEM = "application/problem+json"


@dataclass
class Keyed:
    app: FastAPI
    client: httpx.AsyncClient
    acme: dict[str, str]  # the headers of acme's first key, made by the operator
    globex: dict[str, str]

    async def operator_key(self, tenant: str) -> dict[str, str]:
        _, key = await self.app.state.database.write(lambda db: create_key(db, tenant))
        return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def keyed(make_settings: MakeSettings) -> AsyncIterator[Keyed]:
    async with serve(make_settings(run_worker_in_server=False)) as (app, client):
        server = Keyed(app, client, {}, {})
        server.acme = await server.operator_key("acme")
        server.globex = await server.operator_key("globex")
        yield server


async def test_a_new_key_is_shown_once_and_works_at_once(keyed: Keyed) -> None:
    created = await keyed.client.post("/api-keys", json={}, headers=keyed.acme)

    assert created.status_code == 201
    key = created.json()["key"]
    assert key.startswith(created.json()["prefix"])
    listed = await keyed.client.get("/api-keys", headers={"Authorization": f"Bearer {key}"})
    assert listed.status_code == 200
    assert listed.json()["data"][0]["id"] == created.json()["id"]
    assert all("key" not in k for k in listed.json()["data"])


async def test_a_tenant_sees_and_revokes_only_its_own_keys(keyed: Keyed) -> None:
    globex_keys = (await keyed.client.get("/api-keys", headers=keyed.globex)).json()["data"]
    acme_keys = (await keyed.client.get("/api-keys", headers=keyed.acme)).json()["data"]

    revoked = await keyed.client.post(
        f"/api-keys/{globex_keys[0]['id']}/revoke", headers=keyed.acme
    )

    assert not {k["id"] for k in globex_keys} & {k["id"] for k in acme_keys}
    assert (revoked.status_code, revoked.headers["content-type"]) == (404, PROBLEM)


async def test_a_revoked_key_is_refused_at_once(keyed: Keyed) -> None:
    spare = (await keyed.client.post("/api-keys", json={}, headers=keyed.acme)).json()
    spare_headers = {"Authorization": f"Bearer {spare['key']}"}

    revoked = await keyed.client.post(f"/api-keys/{spare['id']}/revoke", headers=keyed.acme)
    after = await keyed.client.get("/api-keys", headers=spare_headers)

    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
    assert after.status_code == 401


async def test_the_tenants_last_valid_key_is_not_revoked_over_the_api(keyed: Keyed) -> None:
    [only] = (await keyed.client.get("/api-keys", headers=keyed.acme)).json()["data"]

    refused = await keyed.client.post(f"/api-keys/{only['id']}/revoke", headers=keyed.acme)

    assert (refused.status_code, refused.headers["content-type"]) == (409, PROBLEM)
    assert (await keyed.client.get("/api-keys", headers=keyed.acme)).status_code == 200


async def test_an_expiry_in_the_past_is_refused(keyed: Keyed) -> None:
    refused = await keyed.client.post(
        "/api-keys", json={"expires_at": "2020-01-01T00:00:00Z"}, headers=keyed.acme
    )

    assert refused.status_code == 422


async def test_a_keyless_server_leaves_its_first_key_to_the_operator(
    make_settings: MakeSettings,
) -> None:
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        refused = await client.post("/api-keys", json={})
        still_open = await client.get("/api-keys")

    assert (refused.status_code, refused.headers["content-type"]) == (409, PROBLEM)
    assert (still_open.status_code, still_open.json()["data"]) == (200, [])


async def test_an_expiry_without_a_zone_is_refused(keyed: Keyed) -> None:
    refused = await keyed.client.post(
        "/api-keys", json={"expires_at": "2099-01-01T00:00:00"}, headers=keyed.acme
    )

    assert (refused.status_code, refused.headers["content-type"]) == (422, PROBLEM)
