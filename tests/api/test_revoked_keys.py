"""What outlives a revoked key: an event stream opened with a key revoked since ends (asked
again every STRATA_SSE_KEY_CHECK_SECONDS), and reconnecting with it is a 401; the webhook
subscriptions of a tenant left without a valid key are disabled."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.db.engine import Database
from app.db.models import ApiKey
from app.db.repositories.api_keys import ApiKeyRepository
from app.db.types import utcnow
from app.domain.ids import new_id
from app.services.auth import LAST_KEY_REVOKED, create_key, hash_key, revoke_key
from tests.support.apps import serve
from tests.support.chat import new_session, submit_job

BOUND = 20  # seconds a stream may take to end here: a bound against hanging, not a measure


@dataclass
class Stream:
    """An event stream called as a server calls the app; `ended` once the app returns."""

    app: FastAPI
    path: str
    key: str
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    body: str = ""
    status: int = 0

    async def run(self) -> None:
        async def receive() -> MutableMapping[str, Any]:
            await asyncio.Event().wait()  # the client never hangs up
            return {"type": "http.disconnect"}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
                self.opened.set()
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"").decode()

        bearer = f"Bearer {self.key}".encode()
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": self.path,
            "raw_path": self.path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"strata.test"), (b"authorization", bearer)],
            "client": ("127.0.0.1", 1), "server": ("strata.test", 80),
        }  # fmt: skip
        await self.app(scope, receive, send)


@pytest.fixture
async def keyed(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient, Database]]:
    """A server that asks about keys often and trusts what it read briefly, without a runner
    (a job stays queued); and the database as `strata keys revoke` opens it."""
    settings = make_settings(
        sse_key_check_seconds=0.05, api_key_cache_seconds=0.1, run_worker_in_server=False
    )
    other_process = Database(settings)
    try:
        async with serve(settings) as (app, client):
            yield app, client, other_process
    finally:
        await other_process.dispose()


async def _stream_path(client: httpx.AsyncClient, key: str, kind: str) -> str:
    client.headers["Authorization"] = f"Bearer {key}"
    if kind == "job":
        job = await submit_job(client)
        return f"/jobs/{job['id']}/events"
    return f"/sessions/{await new_session(client)}/events"


@pytest.mark.parametrize("kind", ["session", "job"])
async def test_an_open_stream_ends_once_its_key_is_revoked_by_another_process(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database], kind: str
) -> None:
    app, client, other_process = keyed
    row, key = await app.state.database.write(lambda db: create_key(db, "initech"))
    stream = Stream(app, await _stream_path(client, key, kind), key)
    running = asyncio.create_task(stream.run())
    await stream.opened.wait()

    await other_process.write(lambda db: revoke_key(db, row.id))

    await asyncio.wait_for(running, BOUND)
    assert stream.status == 200
    again = await client.get(stream.path)
    assert again.status_code == 401
    assert again.json()["detail"] == "the API key is not valid (unknown, revoked or expired)"


async def test_an_open_stream_ends_once_its_key_is_revoked_in_its_own_process(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database],
) -> None:
    app, client, _ = keyed
    row, key = await app.state.database.write(lambda db: create_key(db, "initech"))
    stream = Stream(app, await _stream_path(client, key, "session"), key)
    running = asyncio.create_task(stream.run())
    await stream.opened.wait()

    await app.state.database.write(lambda db: revoke_key(db, row.id))

    await asyncio.wait_for(running, BOUND)


async def test_a_stream_whose_key_stays_valid_stays_open_past_many_checks(
    make_settings: Any,
) -> None:
    settings = make_settings(
        sse_key_check_seconds=0.01, sse_keepalive_seconds=0.1, worker_poll_seconds=0.01
    )
    async with serve(settings) as (app, client):
        _, key = await app.state.database.write(lambda db: create_key(db, "initech"))
        stream = Stream(app, await _stream_path(client, key, "session"), key)
        running = asyncio.create_task(stream.run())
        try:
            await asyncio.wait_for(_keep_alives(stream, running, 3), BOUND)
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running


async def _keep_alives(stream: Stream, running: asyncio.Task[None], count: int) -> None:
    """Until the stream sent `count` keep-alives (ten key checks or more between two), each
    time seeing it still open."""
    while stream.body.count("keep-alive") < count:
        assert not running.done(), stream.body
        await asyncio.sleep(0.01)


# --- webhooks of a tenant left without a valid key ----------------------------------------

PUBLIC = "https://93.184.216.34/hooks/strata"  # never called: these apps have no dispatcher


async def _subscribed(app: FastAPI, client: httpx.AsyncClient, tenant: str) -> tuple[str, str]:
    """(key id, webhook id): a key of `tenant` and a subscription it made."""
    row, key = await app.state.database.write(lambda db: create_key(db, tenant))
    client.headers["Authorization"] = f"Bearer {key}"
    created = await client.post("/webhooks", json={"url": PUBLIC, "events": ["*"]})
    assert created.status_code == 201, created.text
    return row.id, created.json()["id"]


async def _webhook_as_new_key(app: FastAPI, client: httpx.AsyncClient, webhook_id: str) -> Any:
    _, key = await app.state.database.write(lambda db: create_key(db, "initech"))
    client.headers["Authorization"] = f"Bearer {key}"
    return (await client.get(f"/webhooks/{webhook_id}")).json()


async def test_revoking_a_tenants_last_key_disables_its_webhooks_and_says_so(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database],
) -> None:
    app, client, other_process = keyed
    key_id, webhook_id = await _subscribed(app, client, "initech")

    done = await other_process.write(lambda db: revoke_key(db, key_id))

    assert done.webhooks_disabled == 1
    shown = await _webhook_as_new_key(app, client, webhook_id)
    assert (shown["enabled"], shown["disabled_reason"]) == (False, LAST_KEY_REVOKED)
    enabled = await client.patch(f"/webhooks/{webhook_id}", json={"enabled": True})
    assert enabled.json()["enabled"] is True  # the new key takes them back


async def test_revoking_one_of_a_tenants_keys_leaves_its_webhooks_enabled(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database],
) -> None:
    app, client, other_process = keyed
    key_id, webhook_id = await _subscribed(app, client, "initech")
    await app.state.database.write(lambda db: create_key(db, "initech"))

    done = await other_process.write(lambda db: revoke_key(db, key_id))

    assert done.webhooks_disabled == 0
    assert (await _webhook_as_new_key(app, client, webhook_id))["enabled"] is True


async def test_a_tenant_with_a_key_in_the_settings_keeps_its_webhooks(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database],
) -> None:
    app, client, other_process = keyed
    key_id, webhook_id = await _subscribed(app, client, "initech")

    done = await other_process.write(
        lambda db: revoke_key(db, key_id, configured_tenants={"initech"})
    )

    assert done.webhooks_disabled == 0
    assert (await _webhook_as_new_key(app, client, webhook_id))["enabled"] is True


async def test_an_expired_key_left_is_no_valid_key(
    keyed: tuple[FastAPI, httpx.AsyncClient, Database],
) -> None:
    app, client, other_process = keyed
    key_id, _ = await _subscribed(app, client, "initech")
    expired = ApiKey(
        id=new_id("key"), tenant="initech", key_hash=hash_key("sk_strata_expired"),
        prefix="sk_strata_expi", expires_at=utcnow() - timedelta(seconds=1),
    )  # fmt: skip
    await app.state.database.write(lambda db: ApiKeyRepository(db).save(expired))

    done = await other_process.write(lambda db: revoke_key(db, key_id))

    assert done.webhooks_disabled == 1
