"""Shared by the Claude Code kit's end-to-end tests: waiting for a hook's delivery."""

from __future__ import annotations

import time

import httpx

from tests.e2e.conftest import StrataServer

DELIVERED_WITHIN = 60.0  # seconds; a detached delivery takes well under one


def wait_for_turns(
    server: StrataServer, external_id: str, answers: int, key: str | None = None
) -> str:
    """Poll until the session mirroring Claude Code session `external_id` holds `answers`
    assistant messages (its Stop hook's detached delivery has arrived); its Strata id.
    `key`: the server's API key, if it has keys."""
    deadline = time.monotonic() + DELIVERED_WITHIN
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with httpx.Client(base_url=server.url, timeout=5.0, headers=headers) as client:
        while True:
            sessions = client.get("/sessions", params={"limit": 200}).json()["data"]
            found = [s for s in sessions if s["external_id"] == external_id]
            if found:
                log = client.get(f"/sessions/{found[0]['id']}/items").json()["data"]
                if sum(i["kind"] == "assistant_message" for i in log) >= answers:
                    return str(found[0]["id"])
            assert time.monotonic() < deadline, f"{external_id} never reached Strata"
            time.sleep(0.1)
