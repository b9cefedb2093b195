"""The TypeScript client streams a turn from a live server, resumes a cut stream and surfaces
problem documents as typed errors.

clients/typescript/smoke.ts, compiled by the pinned `tsc` against the types openapi-typescript
generates from openapi/openapi.json, runs with the system's `node` (18+, which has `fetch`)
against a real `strata serve` whose LLM is the fake Messages API. Each of its steps prints one
JSON line, checked here: the turn followed live to its end with `stream()` (openapi-fetch
opens it, eventsource-parser reads it), a stream left after two events and resumed with
`Last-Event-ID`, a connection cut mid-event that `stream()` reopens by itself after the last
id it saw, 404 / 422 answers as `StrataError`s carrying the problem, a tool call a policy
asked about allowed through the client and its turn streamed to the answer, and a running
turn interrupted. The event streams replay from the store, so this runs on both backends.
"""

from __future__ import annotations

import json
import secrets
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.typescript import CLIENT_DIR, XDIST_GROUP, generate_schema, run, tool
from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, reply, tool_use
from tests.support.chat import held

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group(XDIST_GROUP)]

ASSISTANT_TEXT = "Hello from the fake model."
SMOKE_WITHIN = 120.0  # seconds for the whole script; a few on an idle machine


@pytest.fixture(scope="module")
def smoke_js() -> Iterator[Path]:
    """smoke.js, freshly compiled (`npm run build`) into a folder of this module's own
    inside clients/typescript (where Node.js finds its node_modules), removed after: no
    other run's build or clean-up shares it."""
    generate_schema()
    out = Path(tempfile.mkdtemp(prefix="dist-", dir=CLIENT_DIR))
    try:
        run(tool("tsc"), "-p", "tsconfig.build.json", "--outDir", out.name)
        yield out / "smoke.js"
    finally:
        shutil.rmtree(out, ignore_errors=True)


def smoke(script: Path, base_url: str, *args: str) -> dict[str, Any]:
    """Run smoke.js with `args`; its output's JSON lines by their `step`."""
    node = shutil.which("node")
    assert node is not None, "the TypeScript client's check needs Node.js 18+ (`node`)"
    output = run(node, script.relative_to(CLIENT_DIR), base_url, *args, within=SMOKE_WITHIN)
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return {line.pop("step"): line for line in lines}


def test_the_typescript_client_streams_a_turn_to_its_end(
    smoke_js: Path, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    token = f"sk_ts_{secrets.token_hex(16)}"
    server = strata_procs.serve(STRATA_API_KEYS=f"ts:{token}")  # the key rides on the stream too
    fake_llm.reply(ASSISTANT_TEXT, delay_between_chunks=0.02)

    turn = smoke(smoke_js, server.url, "--token", token, "turn")["turn"]

    assert turn["answer"] == ASSISTANT_TEXT
    assert turn["status"] == "succeeded"
    assert turn["types"][-1] == "job.status"  # the stream ended with the job
    assert "item.appended" in turn["types"]
    assert turn["job_ids"] == [turn["job_id"]]
    assert len(set(turn["ids"])) == len(turn["ids"])


def test_a_stream_left_mid_way_resumes_after_the_last_event_it_saw(
    smoke_js: Path, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    fake_llm.reply(ASSISTANT_TEXT)

    resumed = smoke(smoke_js, server.url, "resume")["resumed"]

    assert len(resumed["before"]) == 2
    assert resumed["before"] + resumed["after"] == resumed["whole"]
    assert resumed["past_the_end"] == []  # the ended job's 204: nothing more, no error


def test_a_connection_cut_mid_event_reconnects_after_the_last_event_it_saw(
    smoke_js: Path, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    fake_llm.reply(ASSISTANT_TEXT)

    reconnected = smoke(smoke_js, server.url, "reconnect")["reconnected"]

    # the first connection was cut inside the second event: the second opened after the first
    assert reconnected["last_event_ids"] == [None, reconnected["whole"][0]]
    assert reconnected["ids"] == reconnected["whole"]


def test_error_answers_are_typed_errors_carrying_the_problem(
    smoke_js: Path, strata_procs: StrataProcesses
) -> None:
    server = strata_procs.serve()

    problems = smoke(smoke_js, server.url, "problems")["problems"]

    assert problems["unknown_job_stream"]["status"] == 404
    assert problems["unknown_job_stream"]["type"] == "urn:strata:problem:not-found"
    assert problems["malformed_last_event_id"]["status"] == 422
    assert problems["malformed_last_event_id"]["type"] == "urn:strata:problem:validation-error"
    assert problems["unknown_session"]["status"] == 404
    assert problems["unknown_session"]["type"] == "urn:strata:problem:not-found"


def test_the_typescript_client_allows_an_asked_call_and_streams_to_the_answer(
    smoke_js: Path, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    call = tool_use("TaskList", {})
    fake_llm.reply(call)
    fake_llm.reply("The list is empty.")

    approved = smoke(smoke_js, server.url, "approve")["approved"]

    assert approved["actions"] == ["TaskList pending", "TaskList resolved allow"]
    assert (approved["status"], approved["answer"]) == ("succeeded", "The list is empty.")
    assert {"action.required", "action.resolved"} <= set(approved["types"])
    last = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert (last["type"], last["tool_use_id"]) == ("tool_result", call.id)


def test_the_typescript_client_interrupts_a_running_turn(
    smoke_js: Path, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    gate = threading.Event()
    fake_llm.enqueue(held(gate, reply("Never shown.")))

    try:
        interrupted = smoke(smoke_js, server.url, "interrupt")["interrupted"]
    finally:
        gate.set()
        # the interrupt may land before the turn's request: either way it is interrupted
        fake_llm.discard_pending()

    assert (interrupted["status"], interrupted["error"]) == (
        "cancelled",
        "urn:strata:problem:interrupted",
    )
    assert {"job.status", "turn.interrupted"} <= set(interrupted["types"])
