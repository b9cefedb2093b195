"""Strata as an MCP server at /mcp, driven by the `mcp` SDK's own Streamable HTTP client
against a real uvicorn on a loopback port: its tools, its keys and tenants, its pages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from app.main import create_app
from tests.support.memory import Transcript
from tests.support.uvicorn_server import served

T0 = datetime(2026, 4, 16, 9, 0, tzinfo=UTC)
KEYS = "acme:key-a,globex:key-b"
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}
READ_TOOLS = {"memory_search", "memory_timeline", "memory_detail", "tasks_list", "task_get"}


@pytest.fixture
async def base_url(make_settings: Any) -> AsyncIterator[str]:
    """A keyed server (acme: key-a, globex: key-b) on a loopback port."""
    async with served(create_app(make_settings(api_keys=KEYS))) as url:
        yield url


@asynccontextmanager
async def mcp_client(base_url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client,
    ):
        yield client


async def call(base_url: str, headers: dict[str, str], tool: str, **arguments: Any) -> str:
    """The text a tool answers; fails when the call is an error."""
    async with mcp_client(base_url, headers) as client:
        result = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if block.type == "text")
    assert not result.is_error, text
    return text


async def call_error(base_url: str, headers: dict[str, str], tool: str, **arguments: Any) -> str:
    async with mcp_client(base_url, headers) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    return "\n".join(block.text for block in result.content if block.type == "text")


async def import_turns(
    base_url: str,
    headers: dict[str, str],
    cc_id: str,
    turns: list[tuple[str, str]],
    *,
    cwd: str = "/work/project",
    tool_output: str | None = None,
) -> str:
    """Mirror a Claude Code session of these turns (a minute apart from T0) through the
    Stop hook; the first turn runs Bash with `tool_output` when given."""
    transcript = Transcript(cc_id, cwd=cwd)
    for n, (user, assistant) in enumerate(turns):
        tool = ("Bash", {"command": "ls"}, tool_output) if n == 0 and tool_output else None
        transcript.turn(T0 + timedelta(minutes=n), user, assistant, tool=tool)
    payload = {
        "session_id": cc_id,
        "transcript_path": f"/tmp/{cc_id}.jsonl",
        "cwd": cwd,
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "transcript": transcript.text(),
    }
    async with httpx.AsyncClient(base_url=base_url, headers=headers) as http:
        response = await http.post("/hooks/claude-code", json=payload)
    assert response.status_code == 200, response.text
    return response.headers["Strata-Session"]


async def test_the_read_tools_are_listed_and_no_write_tool(base_url: str) -> None:
    async with mcp_client(base_url, ACME) as client:
        tools = await client.list_tools()

    assert {tool.name for tool in tools.tools} == READ_TOOLS
    assert all(tool.annotations and tool.annotations.read_only_hint for tool in tools.tools)


async def test_a_client_of_the_initialize_handshake_lists_the_tools(base_url: str) -> None:
    """Claude Code speaks the protocol's handshake era (`initialize` first)."""
    async with (
        httpx2.AsyncClient(headers=ACME) as http,
        Client(
            streamable_http_client(f"{base_url}/mcp", http_client=http), mode="legacy"
        ) as client,
    ):
        tools = await client.list_tools()

    assert {tool.name for tool in tools.tools} == READ_TOOLS


async def test_memory_search_answers_the_hits_of_the_callers_project(base_url: str) -> None:
    session = await import_turns(
        base_url, ACME, "cc-1", [("which queue?", "We chose PostgreSQL."), ("hi", "hello")]
    )

    text = await call(base_url, ACME, "memory_search", query="postgresql", project="/work/project")

    assert text.splitlines() == [
        f"[2026-04-16 09:00:00] {session} turn 1 L2 [assistant]: We chose PostgreSQL.",
        "(page 1 of 1: the end)",
    ]


async def test_memory_search_leaves_out_a_turn_a_rewind_reverted(base_url: str) -> None:
    session = await import_turns(
        base_url, ACME, "cc-1", [("which queue?", "We chose PostgreSQL."), ("hi", "PostgreSQL")]
    )
    async with httpx.AsyncClient(base_url=base_url, headers=ACME) as http:
        rewound = await http.post(f"/sessions/{session}/rewind", json={"to_turn": 1})
    assert rewound.status_code == 200, rewound.text

    text = await call(base_url, ACME, "memory_search", query="postgresql", project="/work/project")

    assert text.splitlines() == [
        f"[2026-04-16 09:00:00] {session} turn 1 L2 [assistant]: We chose PostgreSQL.",
        "(page 1 of 1: the end)",
    ]


async def test_memory_timeline_shows_the_turns_around_a_point(base_url: str) -> None:
    session = await import_turns(
        base_url, ACME, "cc-1", [("one?", "first"), ("two?", "second"), ("three?", "third")]
    )

    text = await call(
        base_url, ACME, "memory_timeline", session_id=session, turn=2, before=1, after=1
    )

    assert text.splitlines() == [
        f" [2026-04-16 09:00:00] {session} turn 1: one? → first",
        f">[2026-04-16 09:01:00] {session} turn 2: two? → second",
        f" [2026-04-16 09:02:00] {session} turn 3: three? → third",
        "(page 1 of 1: the end)",
    ]


async def test_memory_detail_answers_a_turns_tool_output(base_url: str) -> None:
    await import_turns(base_url, ACME, "cc-1", [("list", "done")], tool_output="zanzibar.txt")

    text = await call(
        base_url, ACME, "memory_detail", time="2026-04-16 09:00:00", project="/work/project"
    )

    assert "zanzibar.txt" in text
    assert text.splitlines()[-1] == "(page 1 of 1: the end)"


async def test_a_capped_answer_says_how_to_read_on_and_its_next_page_does(
    make_settings: Any,
) -> None:
    long_output = "\n".join(f"line {n:05d} of a long tool output" for n in range(400))
    settings = make_settings(api_keys=KEYS, mcp_answer_max_chars=2_000)
    async with served(create_app(settings)) as url:
        await import_turns(url, ACME, "cc-1", [("list", "done")], tool_output=long_output)
        first = await call(url, ACME, "memory_detail", time="09:00:00")
        second = await call(url, ACME, "memory_detail", time="09:00:00", page=2)

    assert all(len(text) <= 2_000 for text in (first, second))
    pages = int(first.splitlines()[-1].split(" of ")[1].split(";")[0])
    assert first.splitlines()[-1] == (
        f"(page 1 of {pages}; call memory_detail again with page=2 to read on)"
    )
    assert second.splitlines()[-1].startswith(f"(page 2 of {pages}")
    assert "line 00000" in first and "line 00000" not in second


async def test_tasks_list_and_task_get_read_a_sessions_tasks(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=ACME) as http:
        session = (await http.post("/sessions", json={})).json()["id"]
        created = await http.post(
            f"/sessions/{session}/tasks", json={"subject": "Ship it", "description": "by Friday"}
        )
        assert created.status_code == 201, created.text

    listed = await call(base_url, ACME, "tasks_list", session_id=session)
    one = await call(base_url, ACME, "task_get", session_id=session, taskid=1)

    assert listed.splitlines() == ["#1 [pending] Ship it", "(page 1 of 1: the end)"]
    assert one.splitlines() == ["#1 [pending] Ship it", "by Friday", "(page 1 of 1: the end)"]


async def test_another_tenants_memory_never_appears(base_url: str) -> None:
    session = await import_turns(base_url, ACME, "cc-a", [("plan?", "the acme plan")])

    found = await call(base_url, GLOBEX, "memory_search", query="plan")
    detail = await call_error(
        base_url, GLOBEX, "memory_detail", time="09:00:00", session_id=session
    )
    timeline = await call_error(base_url, GLOBEX, "memory_timeline")

    assert found.splitlines()[0] == "(no turn holds these words)"
    assert "does not exist" in detail
    assert "acme" not in detail and "acme" not in timeline


async def test_without_a_key_mcp_is_401_problem_with_a_bearer_challenge(base_url: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    async with httpx.AsyncClient(base_url=base_url) as http:
        response = await http.post(
            "/mcp", json=body, headers={"Accept": "application/json, text/event-stream"}
        )

    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["www-authenticate"] == "Bearer"


async def test_mcp_refuses_a_host_this_server_does_not_answer_under(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=ACME) as http:
        response = await http.post("/mcp", json={}, headers={"Host": "evil.example"})

    assert response.status_code == 403
    assert response.json()["type"].endswith("host-not-allowed")


async def test_mcp_refuses_a_post_from_a_page_of_another_site(base_url: str) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=ACME) as http:
        response = await http.post("/mcp", json={}, headers={"Origin": "https://evil.example"})

    assert response.status_code == 403
    assert response.json()["type"].endswith("cross-site-request")


def test_the_mcp_route_is_not_in_the_openapi_document(make_settings: Any) -> None:
    document = create_app(make_settings()).openapi()

    assert not [path for path in document["paths"] if path == "/mcp" or path.startswith("/mcp/")]


@pytest.fixture
async def writable_url(make_settings: Any) -> AsyncIterator[str]:
    """A keyed server offering the write tools, whose jobs stay queued (no runner), at
    most one queued or running per tenant."""
    settings = make_settings(
        api_keys=KEYS, mcp_write_tools=True, run_worker_in_server=False, tenant_max_active_jobs=1
    )
    async with served(create_app(settings)) as url:
        yield url


async def test_the_write_tools_are_offered_only_when_enabled(writable_url: str) -> None:
    async with mcp_client(writable_url, ACME) as client:
        tools = await client.list_tools()

    assert {tool.name for tool in tools.tools} == READ_TOOLS | {
        "task_create",
        "task_update",
        "job_submit",
        "job_status",
        "job_comment",
    }


async def test_task_writes_are_recorded_in_the_sessions_log_as_rest_ones_are(
    writable_url: str,
) -> None:
    async with httpx.AsyncClient(base_url=writable_url, headers=ACME) as http:
        session = (await http.post("/sessions", json={})).json()["id"]

    created = await call(writable_url, ACME, "task_create", session_id=session, subject="Ship it")
    updated = await call(
        writable_url, ACME, "task_update", session_id=session, taskid=1, status="completed"
    )

    assert created.splitlines()[0] == "#1 [pending] Ship it"
    assert updated.splitlines()[0] == "#1 [completed] Ship it"
    async with httpx.AsyncClient(base_url=writable_url, headers=ACME) as http:
        tasks = (await http.get(f"/sessions/{session}/tasks")).json()["data"]
        events = (await http.get(f"/sessions/{session}/items")).json()["data"]
    assert [(t["taskid"], t["status"]) for t in tasks] == [(1, "completed")]
    assert [e["kind"] for e in events] == ["task_event", "task_event"]


async def test_a_submitted_job_is_read_and_commented_on_and_admitted_by_the_tenants_cap(
    writable_url: str,
) -> None:
    submitted = await call(writable_url, ACME, "job_submit", instruction="Write a report.")
    job_id = submitted.split()[0]

    status = await call(writable_url, ACME, "job_status", job_id=job_id)
    commented = await call(writable_url, ACME, "job_comment", job_id=job_id, body="Be brief.")
    refused = await call_error(writable_url, ACME, "job_submit", instruction="Another one.")
    foreign = await call_error(writable_url, GLOBEX, "job_status", job_id=job_id)

    assert status.splitlines()[0] == f"{job_id} [queued] piece default"
    assert commented.startswith("comment ")
    assert "STRATA_TENANT_MAX_ACTIVE_JOBS" in refused
    assert "does not exist" in foreign


async def _stored_notes(url: str) -> str:
    """The id of a text file `notes.txt` ("Be brief.") stored for ACME."""
    async with httpx.AsyncClient(base_url=url, headers=ACME) as http:
        stored = await http.post(
            "/files",
            params={"filename": "notes.txt"},
            content=b"Be brief.\n",
            headers={"Content-Type": "text/plain"},
        )
    assert stored.status_code == 201, stored.text
    file_id: str = stored.json()["id"]
    return file_id


async def test_a_job_submitted_with_files_finds_them_in_its_input_folder(
    writable_url: str,
) -> None:
    file_id = await _stored_notes(writable_url)
    async with httpx.AsyncClient(base_url=writable_url, headers=ACME) as http:
        submitted = await call(
            writable_url,
            ACME,
            "job_submit",
            instruction="Write a report.",
            files=[{"file_id": file_id, "path": "docs/notes.txt"}],
        )
        content = await http.get(f"/jobs/{submitted.split()[0]}/files/input/docs/notes.txt")

    assert content.content == b"Be brief.\n"


async def test_a_job_submitted_with_a_bad_path_is_an_error_naming_it(writable_url: str) -> None:
    file_id = await _stored_notes(writable_url)

    refused = await call_error(
        writable_url,
        ACME,
        "job_submit",
        instruction="Write a report.",
        files=[{"file_id": file_id, "path": "../escape.txt"}],
    )

    assert "files[0].path" in refused
