"""Webhook subscriptions over REST, and deliveries to a real receiver on loopback.

Subscriptions to a public address are only ever created in apps without a dispatcher
(`run_worker_in_server=False`) and never get an event: no test sends traffic off this
machine. Deliveries go to `Receiver`, an HTTP server on 127.0.0.1.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks import Webhook

from app.domain.webhook_signing import WebhookVerificationError
from app.settings import Settings
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import new_session, wait_until
from tests.support.settings import MakeSettings
from tests.support.webhooks import Receiver, closed_url

PUBLIC = "https://93.184.216.34/hooks/strata"  # never called: see the module docstring
PROBLEM = "application/problem+json"
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}


@pytest.fixture
async def api(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    """No runner and no dispatcher: nothing is ever sent."""
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        yield client


def delivering(make_settings: MakeSettings, **overrides: Any) -> Settings:
    """A server whose dispatcher polls fast and may call loopback."""
    values: dict[str, Any] = {
        "webhook_allow_private": True,
        "webhook_poll_seconds": 0.05,
        "webhook_timeout_seconds": 5.0,
        "worker_poll_seconds": 0.05,
        "job_heartbeat_seconds": 0.1,
        "job_lease_seconds": 5.0,
        "webhook_retry_schedule": "0,0.2,0.2",
    }
    return make_settings(**(values | overrides))


async def subscribe(client: httpx.AsyncClient, url: str, *events: str, **extra: Any) -> Any:
    headers = extra.pop("headers", None)
    body = {"url": url, "events": list(events or ["*"]), **extra}
    response = await client.post("/webhooks", json=body, headers=headers)
    assert response.status_code == 201, response.text
    return response.json()


async def deliveries(client: httpx.AsyncClient, webhook_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/webhooks/{webhook_id}/deliveries")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


async def settled(client: httpx.AsyncClient, webhook_id: str, count: int) -> list[dict[str, Any]]:
    """Wait until `count` deliveries exist and none is pending."""
    found: list[dict[str, Any]] = []

    async def done() -> bool:
        found[:] = await deliveries(client, webhook_id)
        return len(found) >= count and all(d["status"] != "pending" for d in found)

    await wait_until(done, seconds=15)
    return found


# --- subscriptions ----------------------------------------------------------------------


async def test_create_shows_the_secret_once(api: httpx.AsyncClient) -> None:
    created = await subscribe(api, PUBLIC, "job.succeeded", description="ci")

    secret = created["secret"]
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 24
    assert created["id"].startswith("wh_")
    assert (created["url"], created["events"], created["description"]) == (
        PUBLIC,
        ["job.succeeded"],
        "ci",
    )
    assert created["enabled"] is True and created["disabled_reason"] is None
    one = (await api.get(f"/webhooks/{created['id']}")).json()
    listed = (await api.get("/webhooks")).json()["data"]
    assert "secret" not in one
    assert [w["id"] for w in listed] == [created["id"]]
    assert all("secret" not in w for w in listed)
    assert secret not in (await api.get("/webhooks")).text


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://172.16.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]:8000/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://[fe80::1]/hook",
        "http://224.0.0.1/hook",
        "http://0.0.0.0/hook",
        "http://100.64.0.1/hook",
        "http://240.0.0.1/hook",
    ],
)
async def test_private_and_loopback_targets_are_refused(api: httpx.AsyncClient, url: str) -> None:
    response = await api.post("/webhooks", json={"url": url, "events": ["*"]})

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "urn:strata:problem:validation-error"
    assert "STRATA_WEBHOOK_ALLOW_PRIVATE" in response.json()["detail"]
    assert (await api.get("/webhooks")).json()["data"] == []


async def test_private_targets_are_allowed_by_the_setting(make_settings: MakeSettings) -> None:
    settings = make_settings(run_worker_in_server=False, webhook_allow_private=True)
    async with serve(settings) as (_, client):
        created = await subscribe(client, "http://127.0.0.1:9/hook", "task.updated")

    assert created["url"] == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    "url", ["ftp://93.184.216.34/x", "file:///etc/passwd", "not a url", "http:///no-host", "//x"]
)
async def test_only_http_and_https_urls_with_a_host(api: httpx.AsyncClient, url: str) -> None:
    response = await api.post("/webhooks", json={"url": url, "events": ["*"]})

    assert response.status_code == 422, response.text
    assert response.json()["type"] == "urn:strata:problem:validation-error"


@pytest.mark.parametrize("events", [["job.exploded"], [], ["job.succeeded", "webhook.test"]])
async def test_unknown_event_types_are_refused(api: httpx.AsyncClient, events: list[str]) -> None:
    response = await api.post("/webhooks", json={"url": PUBLIC, "events": events})

    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM


async def test_patch_changes_the_fields_sent_and_validates_them(api: httpx.AsyncClient) -> None:
    created = await subscribe(api, PUBLIC, "job.failed", description="old")
    path = f"/webhooks/{created['id']}"

    patched = await api.patch(path, json={"events": ["task.updated", "task.updated"]})
    refused = await api.patch(path, json={"url": "http://10.0.0.1/"})
    unknown = await api.patch(path, json={"events": ["nope"]})
    disabled = await api.patch(path, json={"enabled": False, "description": None})

    assert patched.status_code == 200, patched.text
    assert patched.json()["events"] == ["task.updated"]
    assert patched.json()["description"] == "old"
    assert (refused.status_code, unknown.status_code) == (422, 422)
    assert disabled.json()["enabled"] is False
    assert disabled.json()["description"] is None
    assert (await api.get(path)).json()["url"] == PUBLIC
    assert (await api.post(f"{path}/test")).status_code == 409


async def test_delete_removes_the_subscription_and_its_deliveries(api: httpx.AsyncClient) -> None:
    created = await subscribe(api, PUBLIC, "*")
    path = f"/webhooks/{created['id']}"
    assert (await api.post(f"{path}/test")).status_code == 202

    deleted = await api.delete(path)

    assert deleted.status_code == 204
    assert (await api.get(path)).status_code == 404
    assert (await api.get(f"{path}/deliveries")).status_code == 404
    assert (await api.delete(path)).status_code == 404


async def test_test_event_is_queued_as_a_pending_delivery(api: httpx.AsyncClient) -> None:
    created = await subscribe(api, PUBLIC, "job.succeeded")

    response = await api.post(f"/webhooks/{created['id']}/test")

    assert response.status_code == 202, response.text
    delivery = response.json()
    assert delivery["id"].startswith("msg_")
    assert (delivery["status"], delivery["event_type"], delivery["attempts"]) == (
        "pending",
        "webhook.test",
        [],
    )
    assert delivery["payload"]["type"] == "webhook.test"
    assert delivery["payload"]["data"] == {"subscription_id": created["id"]}
    assert delivery["subscription_id"] == created["id"]
    assert [d["id"] for d in await deliveries(api, created["id"])] == [delivery["id"]]


async def test_another_tenants_webhook_does_not_exist(make_settings: MakeSettings) -> None:
    settings = make_settings(run_worker_in_server=False, api_keys="acme:key-a,globex:key-b")
    async with serve(settings) as (_, client):
        created = await subscribe(client, PUBLIC, "*", headers=ACME)
        path = f"/webhooks/{created['id']}"

        answers = [
            await client.get(path, headers=GLOBEX),
            await client.patch(path, json={"enabled": False}, headers=GLOBEX),
            await client.delete(path, headers=GLOBEX),
            await client.get(f"{path}/deliveries", headers=GLOBEX),
            await client.post(f"{path}/test", headers=GLOBEX),
        ]
        theirs = (await client.get("/webhooks", headers=GLOBEX)).json()["data"]
        mine = (await client.get(path, headers=ACME)).json()

    assert [a.status_code for a in answers] == [404] * 5
    assert theirs == []
    assert mine["enabled"] is True


async def test_lists_are_paginated_newest_first(api: httpx.AsyncClient) -> None:
    ids = [(await subscribe(api, PUBLIC, "*"))["id"] for _ in range(3)]

    first = (await api.get("/webhooks", params={"limit": 2})).json()
    second = (await api.get("/webhooks", params={"limit": 2, "after": first["next_cursor"]})).json()

    assert [w["id"] for w in first["data"] + second["data"]] == ids[::-1]
    assert second["next_cursor"] is None


# --- deliveries to a real receiver ------------------------------------------------------------


async def test_a_chat_turn_is_delivered_signed(
    make_settings: MakeSettings, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskCreate", {"subject": "greet"}))
    fake_llm.reply(text("Hello there."))
    settings = delivering(make_settings, anthropic_base_url=fake_llm.url)
    events = ("job.succeeded", "session.turn.completed", "task.updated")
    with Receiver() as receiver:
        async with serve(settings) as (_, client):
            hook = await subscribe(client, receiver.url, *events)
            session_id = await new_session(client)
            reply = await client.post(
                f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hi"}
            )
            assert reply.status_code == 200, reply.text
            got = await receiver.wait_for(3)
            shown = await settled(client, hook["id"], 3)

    by_type = {r.json["type"]: r for r in got}
    assert set(by_type) == set(events)
    for request in got:
        request.verify(hook["secret"])
        assert Webhook(hook["secret"]).verify(request.body, request.headers) == request.json
        assert request.headers["content-type"] == "application/json"
        assert request.webhook_id.startswith("msg_")
    job_id = reply.json()["job_id"]
    job = by_type["job.succeeded"].json["data"]
    turn = by_type["session.turn.completed"].json["data"]
    task = by_type["task.updated"].json["data"]
    assert (job["job_id"], job["session_id"], job["status"], job["kind"], job["piece"]) == (
        job_id,
        session_id,
        "succeeded",
        "chat",
        None,
    )
    assert (turn["session_id"], turn["job_id"], turn["turn"], turn["text"]) == (
        session_id,
        job_id,
        1,
        "Hello there.",
    )
    assert (task["taskid"], task["op"], task["origin"], task["job_id"]) == (
        1,
        "TaskCreate",
        "llm",
        job_id,
    )
    assert {d["id"] for d in shown} == {r.webhook_id for r in got}
    for delivery in shown:
        assert delivery["status"] == "succeeded" and delivery["delivered_at"] is not None
        assert [a["status_code"] for a in delivery["attempts"]] == [200]
        assert delivery["attempts"][0]["error"] is None
        assert delivery["attempts"][0]["duration_ms"] >= 0


async def test_a_failed_attempt_is_retried_with_the_same_webhook_id(
    make_settings: MakeSettings,
) -> None:
    with Receiver([500]) as receiver:
        async with serve(delivering(make_settings)) as (_, client):
            hook = await subscribe(client, receiver.url, "task.updated")
            queued = (await client.post(f"/webhooks/{hook['id']}/test")).json()
            got = await receiver.wait_for(2)
            [delivery] = await settled(client, hook["id"], 1)
            subscription = (await client.get(f"/webhooks/{hook['id']}")).json()

    assert [r.webhook_id for r in got] == [queued["id"], queued["id"]]
    assert got[0].body == got[1].body
    for request in got:
        request.verify(hook["secret"])
    assert delivery["status"] == "succeeded"
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 200]
    assert delivery["last_status_code"] == 200
    assert (subscription["enabled"], subscription["failing_since"]) == (True, None)


async def test_each_attempt_is_counted_in_the_metrics_by_its_outcome(
    make_settings: MakeSettings,
) -> None:
    with Receiver([500]) as receiver:
        async with serve(delivering(make_settings)) as (_, client):
            before = await attempts_by_outcome(client)
            hook = await subscribe(client, receiver.url, "task.updated")
            await client.post(f"/webhooks/{hook['id']}/test")
            await settled(client, hook["id"], 1)
            after = await attempts_by_outcome(client)

    assert after["failed"] - before["failed"] == 1
    assert after["delivered"] - before["delivered"] == 1


async def attempts_by_outcome(client: httpx.AsyncClient) -> dict[str, float]:
    counts = {"delivered": 0.0, "failed": 0.0}
    for family in text_string_to_metric_families((await client.get("/metrics")).text):
        for sample in family.samples:
            if sample.name == "strata_webhook_attempts_total":
                counts[sample.labels["outcome"]] += float(sample.value)
    return counts


async def test_permanent_failure_fails_the_delivery_and_disables_the_subscription(
    make_settings: MakeSettings,
) -> None:
    settings = delivering(
        make_settings, webhook_retry_schedule="0,0.1,0.1", webhook_disable_after_hours=0
    )
    with Receiver(default=500) as receiver:
        async with serve(settings) as (_, client):
            hook = await subscribe(client, receiver.url, "*")
            path = f"/webhooks/{hook['id']}"
            await client.post(f"{path}/test")
            [delivery] = await settled(client, hook["id"], 1)
            disabled = (await client.get(path)).json()
            enabled = (await client.patch(path, json={"enabled": True})).json()

    assert len({r.webhook_id for r in receiver.received}) == 1
    assert len(receiver.received) == 3
    assert delivery["status"] == "failed"
    assert delivery["next_attempt_at"] is None
    assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 500]
    assert disabled["enabled"] is False
    assert "HTTP 500" in disabled["disabled_reason"]
    assert disabled["failing_since"] is not None
    assert (enabled["enabled"], enabled["disabled_reason"], enabled["failing_since"]) == (
        True,
        None,
        None,
    )


async def test_an_unreachable_receiver_is_an_attempt_with_an_error(
    make_settings: MakeSettings,
) -> None:
    async with serve(delivering(make_settings, webhook_retry_schedule="0")) as (_, client):
        hook = await subscribe(client, closed_url(), "*")
        await client.post(f"/webhooks/{hook['id']}/test")
        [delivery] = await settled(client, hook["id"], 1)

    assert delivery["status"] == "failed"
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] is None
    assert "ConnectError" in attempt["error"]


async def test_the_target_is_checked_again_at_delivery_time(make_settings: MakeSettings) -> None:
    """Made while private targets were allowed, sent by a server that refuses them."""
    with Receiver() as receiver:
        before = make_settings(run_worker_in_server=False, webhook_allow_private=True)
        async with serve(before) as (_, client):
            hook = await subscribe(client, receiver.url, "*")
            await client.post(f"/webhooks/{hook['id']}/test")
        after = delivering(make_settings, webhook_allow_private=False, webhook_retry_schedule="0")
        async with serve(after) as (_, client):
            [delivery] = await settled(client, hook["id"], 1)

    assert receiver.received == []
    assert delivery["status"] == "failed"
    [attempt] = delivery["attempts"]
    assert attempt["status_code"] is None
    assert attempt["error"].startswith("refused: ")
    assert "loopback" in attempt["error"]


async def test_a_rest_task_change_is_delivered_and_a_failed_one_is_not(
    make_settings: MakeSettings,
) -> None:
    with Receiver() as receiver:
        async with serve(delivering(make_settings)) as (_, client):
            hook = await subscribe(client, receiver.url, "task.updated")
            session_id = await new_session(client)
            tasks = f"/sessions/{session_id}/tasks"
            assert (await client.post(tasks, json={"subject": "write"})).status_code == 201
            missing = await client.patch(f"{tasks}/9", json={"status": "completed"})
            assert missing.status_code == 404
            assert (await client.patch(f"{tasks}/1", json={"status": "completed"})).is_success
            got = await receiver.wait_for(2)
            shown = await settled(client, hook["id"], 2)

    data = sorted((r.json["data"] for r in got), key=lambda d: str(d["op"]))
    assert [(d["taskid"], d["op"], d["origin"], d["status"]) for d in data] == [
        (1, "TaskCreate", "api", "pending"),
        (1, "TaskUpdate", "api", "completed"),
    ]
    assert {d["session_id"] for d in data} == {session_id}
    assert {r.json["type"] for r in got} == {"task.updated"}
    assert len(shown) == 2  # the refused change (404) enqueued nothing
    for request in got:
        request.verify(hook["secret"])


# --- redelivery and secret rotation ------------------------------------------------------


async def test_a_failed_delivery_is_sent_again_with_its_webhook_id_and_history(
    make_settings: MakeSettings,
) -> None:
    with Receiver([500, 500, 500]) as receiver:
        async with serve(delivering(make_settings)) as (_, client):
            hook = await subscribe(client, receiver.url, "task.updated")
            queued = (await client.post(f"/webhooks/{hook['id']}/test")).json()
            [failed] = await settled(client, hook["id"], 1)
            again = await client.post(f"/webhooks/{hook['id']}/deliveries/{queued['id']}/redeliver")
            got = await receiver.wait_for(4)
            [delivered] = await settled(client, hook["id"], 1)

    assert failed["status"] == "failed"
    assert (again.status_code, again.json()["status"]) == (202, "pending")
    assert got[3].webhook_id == queued["id"] and got[3].body == got[0].body
    assert delivered["status"] == "succeeded"
    assert [a["status_code"] for a in delivered["attempts"]] == [500, 500, 500, 200]


async def test_a_delivery_still_being_tried_is_not_sent_again(api: httpx.AsyncClient) -> None:
    hook = await subscribe(api, PUBLIC, "task.updated")
    queued = (await api.post(f"/webhooks/{hook['id']}/test")).json()

    again = await api.post(f"/webhooks/{hook['id']}/deliveries/{queued['id']}/redeliver")

    assert (again.status_code, again.headers["content-type"]) == (409, PROBLEM)


async def test_redelivering_an_unknown_or_anothers_delivery_is_404(
    api: httpx.AsyncClient,
) -> None:
    first = await subscribe(api, PUBLIC, "task.updated")
    second = await subscribe(api, PUBLIC, "task.updated")
    queued = (await api.post(f"/webhooks/{first['id']}/test")).json()

    unknown = await api.post(f"/webhooks/{first['id']}/deliveries/msg_nope/redeliver")
    elsewhere = await api.post(f"/webhooks/{second['id']}/deliveries/{queued['id']}/redeliver")

    assert (unknown.status_code, elsewhere.status_code) == (404, 404)


async def test_a_rotated_secret_is_shown_once_and_both_sign_during_the_overlap(
    make_settings: MakeSettings,
) -> None:
    with Receiver() as receiver:
        async with serve(delivering(make_settings)) as (_, client):
            hook = await subscribe(client, receiver.url, "task.updated")
            rotated = await client.post(f"/webhooks/{hook['id']}/rotate-secret")
            shown = (await client.get(f"/webhooks/{hook['id']}")).json()
            await client.post(f"/webhooks/{hook['id']}/test")
            [got] = await receiver.wait_for(1)

    assert rotated.status_code == 200
    new_secret = rotated.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != hook["secret"]
    assert "secret" not in shown and shown["previous_secret_until"] is not None
    got.verify(new_secret)
    got.verify(hook["secret"])
    for secret in (new_secret, hook["secret"]):  # and as a receiver's library reads them
        Webhook(secret).verify(got.body, got.headers)
    assert len(got.headers["webhook-signature"].split(" ")) == 2


async def test_without_an_overlap_only_the_new_secret_signs(make_settings: MakeSettings) -> None:
    with Receiver() as receiver:
        settings = delivering(make_settings, webhook_secret_overlap_seconds=0)
        async with serve(settings) as (_, client):
            hook = await subscribe(client, receiver.url, "task.updated")
            rotated = (await client.post(f"/webhooks/{hook['id']}/rotate-secret")).json()
            await client.post(f"/webhooks/{hook['id']}/test")
            [got] = await receiver.wait_for(1)

    got.verify(rotated["secret"])
    with pytest.raises(WebhookVerificationError):
        got.verify(hook["secret"])
