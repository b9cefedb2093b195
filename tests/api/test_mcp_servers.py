"""A tenant's MCP servers over REST: the registry, its address check and its refresh
against the suite's fault server on loopback."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.mcp.fault_server import TEST_HOST
from tests.support.apps import serve
from tests.support.mcp import SECRET_HEADER, HttpServer
from tests.support.settings import MakeSettings

PROBLEM = "urn:strata:problem:"
ACME = {"Authorization": "Bearer key-a"}


@pytest.fixture
async def api(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(run_worker_in_server=False, mcp_allow_private=True)
    async with serve(settings) as (_, client):
        yield client


async def register(client: httpx.AsyncClient, name: str, url: str, **extra: Any) -> Any:
    response = await client.post("/mcp-servers", json={"name": name, "url": url, **extra})
    assert response.status_code == 201, response.text
    return response.json()


async def test_a_registered_server_is_listed_without_its_header_values(
    api: httpx.AsyncClient,
) -> None:
    await register(api, "docs", "http://127.0.0.1:1/mcp", headers={"Authorization": "x"})
    listed = (await api.get("/mcp-servers")).json()["data"]
    assert listed[0]["name"] == "docs"
    assert listed[0]["header_names"] == ["Authorization"]
    assert "x" not in str(listed)


async def test_a_name_outside_the_pattern_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post("/mcp-servers", json={"name": "Docs!", "url": "http://a/mcp"})
    assert response.status_code == 422


async def test_a_taken_name_is_409(api: httpx.AsyncClient) -> None:
    await register(api, "docs", "http://127.0.0.1:1/mcp")
    response = await api.post("/mcp-servers", json={"name": "docs", "url": "http://a/mcp"})
    assert response.status_code == 409


async def test_a_loopback_url_is_refused_unless_the_operator_allows_it(
    make_settings: MakeSettings,
) -> None:
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        response = await client.post(
            "/mcp-servers", json={"name": "local", "url": "http://127.0.0.1:8080/mcp"}
        )
    assert response.status_code == 422
    assert "STRATA_MCP_ALLOW_PRIVATE" in response.text


async def test_patch_changes_only_what_it_sends(api: httpx.AsyncClient) -> None:
    await register(api, "docs", "http://127.0.0.1:1/mcp", timeout_s=5)
    changed = (await api.patch("/mcp-servers/docs", json={"trusted": True})).json()
    assert changed["trusted"] is True
    assert changed["timeout_s"] == 5


async def test_a_timeout_over_the_operators_limit_is_422(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/mcp-servers", json={"name": "slow", "url": "http://a/mcp", "timeout_s": 10_000}
    )
    assert response.status_code == 422


async def test_delete_removes_the_server(api: httpx.AsyncClient) -> None:
    await register(api, "docs", "http://127.0.0.1:1/mcp")
    assert (await api.delete("/mcp-servers/docs")).status_code == 204
    assert (await api.get("/mcp-servers/docs")).status_code == 404


async def test_a_server_is_the_tenants_own(make_settings: MakeSettings) -> None:
    settings = make_settings(
        run_worker_in_server=False,
        mcp_allow_private=True,
        api_keys="acme:key-a,globex:key-b",
    )
    async with serve(settings) as (_, client):
        created = await client.post(
            "/mcp-servers", json={"name": "docs", "url": "http://a/mcp"}, headers=ACME
        )
        assert created.status_code == 201
        other = await client.get("/mcp-servers/docs", headers={"Authorization": "Bearer key-b"})
    assert other.status_code == 404


async def test_refresh_answers_the_tools_as_the_model_sees_them(
    api: httpx.AsyncClient, fault_http: HttpServer
) -> None:
    await register(api, "faults", fault_http.url(), tool_filter={"allow": ["*"], "deny": ["crash"]})
    response = await api.post("/mcp-servers/faults/refresh")
    assert response.status_code == 200, response.text
    tools = {tool["name"]: tool for tool in response.json()["tools"]}
    assert tools["mcp__faults__echo"]["tool"] == "echo"
    assert "mcp__faults__crash" not in tools
    assert tools["mcp__faults__read_clock"]["annotations"]["read_only_hint"] is True


async def test_refresh_of_an_unreachable_server_is_502_mcp_unreachable(
    api: httpx.AsyncClient, fault_http: HttpServer
) -> None:
    await register(api, "broken", fault_http.url("/broken/mcp"))
    response = await api.post("/mcp-servers/broken/refresh")
    assert response.status_code == 502
    assert response.json()["type"] == PROBLEM + "mcp-unreachable"
    assert (await api.get("/mcp-servers/broken")).json()["last_error"]


async def test_refresh_refused_credentials_is_502_mcp_auth_failed(
    api: httpx.AsyncClient, fault_http: HttpServer
) -> None:
    await register(api, "locked", fault_http.url("/locked/mcp"))
    response = await api.post("/mcp-servers/locked/refresh")
    assert response.status_code == 502
    assert response.json()["type"] == PROBLEM + "mcp-auth-failed"


async def test_refresh_sends_the_servers_headers(
    api: httpx.AsyncClient, fault_http: HttpServer
) -> None:
    await register(api, "locked", fault_http.url("/locked/mcp"), headers=SECRET_HEADER)
    assert (await api.post("/mcp-servers/locked/refresh")).status_code == 200


def _resolve_test_host(monkeypatch: pytest.MonkeyPatch, *answers: str) -> None:
    """The resolver answers `TEST_HOST` with each of `answers` in turn (the last one from
    then on), any other name as usual."""
    real = socket.getaddrinfo
    queue = list(answers)

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if (host.decode() if isinstance(host, bytes) else host) != TEST_HOST:  # anyio's: bytes
            return real(host, port, *args, **kwargs)
        address = queue.pop(0) if len(queue) > 1 else queue[0]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


async def test_a_name_resolving_to_loopback_after_its_check_is_not_connected_to(
    make_settings: MakeSettings, fault_http: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name answers 127.0.0.2 (counted as public here) when the server is registered,
    then 127.0.0.1, where the fault server listens: the refresh must not reach it."""
    monkeypatch.setattr(
        "app.services.webhook_targets.forbidden_kind",
        lambda address: None if str(address) == "127.0.0.2" else "loopback",
    )
    _resolve_test_host(monkeypatch, "127.0.0.2", "127.0.0.1")
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        await register(client, "rebound", f"http://{TEST_HOST}:{fault_http.port}/mcp")
        response = await client.post("/mcp-servers/rebound/refresh")

    assert response.status_code == 502
    assert response.json()["type"] == PROBLEM + "mcp-unreachable"
    assert "loopback" in response.json()["detail"]


async def test_a_connection_goes_to_the_address_its_check_passed(
    make_settings: MakeSettings, fault_http: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every address counts as public here; the name answers 127.0.0.1, where the fault
    server listens, to the registration's check and the connection's, then 127.0.0.2,
    where nothing does: the connection still reaches the server, by the name in Host."""
    monkeypatch.setattr("app.services.webhook_targets.forbidden_kind", lambda address: None)
    _resolve_test_host(monkeypatch, "127.0.0.1", "127.0.0.1", "127.0.0.2")
    async with serve(make_settings(run_worker_in_server=False)) as (_, client):
        await register(client, "pinned", f"http://{TEST_HOST}:{fault_http.port}/mcp")
        response = await client.post("/mcp-servers/pinned/refresh")

    assert response.status_code == 200, response.text
