"""Webhooks survive a crash: what was committed is delivered after a restart, once per id.

A real `strata serve` without a runner (so without a dispatcher) takes changes that
enqueue events: REST task changes, a cancelled queued job and a test event. It is killed
with SIGKILL before anything was sent, and the receiver is not even listening yet. Then
the receiver starts on its port, a new server with a runner starts on the same
database, and the receiver gets every delivery exactly once, signed with the secret.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import StrataProcesses
from tests.support.chat import new_session, wait_until
from tests.support.webhooks import Receiver, closed_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]

WEBHOOK_ENV = {"STRATA_WEBHOOK_ALLOW_PRIVATE": "true", "STRATA_WEBHOOK_POLL_SECONDS": "0.05"}


async def _deliveries(client: httpx.AsyncClient, webhook_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/webhooks/{webhook_id}/deliveries")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


async def _make_changes(client: httpx.AsyncClient) -> tuple[dict[str, Any], str]:
    url = closed_url()
    created = await client.post(
        "/webhooks", json={"url": url, "events": ["task.updated", "job.cancelled"]}
    )
    assert created.status_code == 201, created.text
    hook = dict(created.json())
    session_id = await new_session(client)
    tasks = f"/sessions/{session_id}/tasks"
    assert (await client.post(tasks, json={"subject": "ship"})).status_code == 201
    assert (await client.patch(f"{tasks}/1", json={"status": "inprogress"})).status_code == 200
    message = await client.post(f"/sessions/{session_id}/messages", json={"text": "later"})
    assert message.status_code == 202, message.text
    cancelled = await client.post(f"/jobs/{message.json()['job_id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    assert (await client.post(f"/webhooks/{hook['id']}/test")).status_code == 202
    return hook, url


async def test_deliveries_committed_before_a_crash_are_sent_after_restart_once(
    strata_procs: StrataProcesses,
) -> None:
    first = strata_procs.serve(run_worker_in_server=False, **WEBHOOK_ENV)
    async with first.client() as client:
        hook, url = await _make_changes(client)
        queued = await _deliveries(client, hook["id"])
    first.kill()

    assert sorted(d["event_type"] for d in queued) == [
        "job.cancelled",
        "task.updated",
        "task.updated",
        "webhook.test",
    ]
    assert all(d["status"] == "pending" and d["attempts"] == [] for d in queued)
    port = int(url.split(":")[2].split("/")[0])
    with Receiver(port=port) as receiver:
        second = strata_procs.serve(run_worker_in_server=True, **WEBHOOK_ENV)
        async with second.client() as client:

            async def all_sent() -> bool:
                shown = await _deliveries(client, hook["id"])
                return all(d["status"] == "succeeded" for d in shown)

            await wait_until(all_sent, seconds=30)
            sent = await _deliveries(client, hook["id"])
        second.stop()
        received = receiver.received

    counts = Counter(r.webhook_id for r in received)
    assert counts == Counter(d["id"] for d in queued)  # every id, exactly once
    assert {d["id"] for d in sent} == {d["id"] for d in queued}
    for request in received:
        request.verify(hook["secret"])
    assert {r.json["type"] for r in received} == {"task.updated", "job.cancelled", "webhook.test"}
    by_id = {d["id"]: d for d in queued}
    assert all(r.json == by_id[r.webhook_id]["payload"] for r in received)
    assert all([a["status_code"] for a in d["attempts"]] == [200] for d in sent)
