"""Webhook SSRF: IPv6 forms carrying a private IPv4 are refused like it, and a delivery
connects to the address that passed the check (resolved once, pinned)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest

from app.db.types import utcnow
from app.services.webhook_targets import TargetRefused, check_target, resolve_target
from app.services.webhooks import Claimed
from app.settings import Settings
from app.worker.webhooks import WebhookDispatcher
from tests.support.webhooks import Receiver


@pytest.mark.parametrize(
    "address",
    [
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (cloud metadata)
        "::ffff:127.0.0.1",  # IPv4-mapped
        "::ffff:192.168.1.1",
    ],
)
async def test_ipv6_forms_embedding_a_private_ipv4_are_refused(address: str) -> None:
    with pytest.raises(TargetRefused):
        await check_target(f"http://[{address}]/hook", allow_private=False)


@pytest.mark.parametrize("address", ["2002:808:808::", "64:ff9b::808:808"])
async def test_ipv6_forms_embedding_a_public_ipv4_are_judged_by_it(address: str) -> None:
    assert await check_target(f"http://[{address}]/hook", allow_private=False)


async def test_a_name_resolving_to_any_private_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _resolve_as(monkeypatch, ["8.8.8.8", "2002:7f00:1::"])

    with pytest.raises(TargetRefused, match="2002:7f00:1::"):
        await resolve_target("https://hooks.example/x", allow_private=False)


def _resolve_as(monkeypatch: pytest.MonkeyPatch, *answers: list[str]) -> list[str]:
    """getaddrinfo answers each look-up of a name with the next list of addresses (an
    address literal with itself); returns the names looked up."""
    asked: list[str] = []
    queue = list(answers)

    async def getaddrinfo(host: str, port: int, **_: Any) -> list[Any]:
        if host.replace(".", "").isdigit() or ":" in host:
            addresses = [host]
        else:
            asked.append(host)
            addresses = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in addresses
        ]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    return asked


async def test_a_delivery_connects_to_the_address_that_was_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """The name answers the receiver's address once (counted as public here), then another
    loopback address where nothing listens: the delivery still reaches the receiver, which
    sees the name in Host, after one look-up."""
    monkeypatch.setattr("app.services.webhook_targets.forbidden_kind", lambda address: None)
    with Receiver() as receiver:
        port = int(receiver.url.split(":")[2].split("/")[0])
        asked = _resolve_as(monkeypatch, ["127.0.0.1"], ["127.0.0.2"])
        settings = Settings(_env_file=None)
        dispatcher = WebhookDispatcher(settings, database=None)  # type: ignore[arg-type]
        claimed = Claimed(
            delivery_id="whd_1",
            subscription_id="wh_1",
            url=f"http://hooks.example:{port}/hooks/strata",
            secrets=("whsec_" + "A" * 32,),
            payload={"type": "webhook.test"},
            attempt=1,
            lease_until=utcnow(),
        )
        async with httpx.AsyncClient() as client:
            result = await dispatcher.attempt(client, claimed)
        (request,) = receiver.received

    assert result.ok, result.describe()
    assert asked == ["hooks.example"]  # checked once, never looked up again to connect
    assert request.headers["host"] == f"hooks.example:{port}"
    assert request.path == "/hooks/strata"
