"""A Python client generated from openapi/openapi.json works against a live server.

`openapi-python-client` generates `strata_client` into a temporary directory (generated code is
never committed) with clients/python/config.yaml, failing on any warning: a schema it cannot
represent is an error here, not a silently missing model. Then clients/python/smoke.py, the
usage example, runs its steps with that client against a real `strata serve` subprocess whose
LLM is the fake Messages API, and every answer is checked: an undeclared status, a body that
does not parse into its model or a wrong field fails the test. A wrong key must fail the
script with the server's 401 problem document, as a user running it would see it.

Marked `sqlite_only`: the client speaks only HTTP to a separate server process, so the
PostgreSQL run of the suite would repeat the same HTTP exchange on another store and prove
nothing more about the document or the client (the API itself is tested on both backends).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import StrataProcesses
from tests.fakes.messages_api import FakeMessagesAPI, reply, tool_use
from tests.support.chat import held

REPO_ROOT = Path(__file__).resolve().parents[2]
OPENAPI = REPO_ROOT / "openapi" / "openapi.json"
CLIENT_DIR = REPO_ROOT / "clients" / "python"
GENERATE_WITHIN = 120.0  # seconds; about 2 s on an idle machine

pytestmark = [pytest.mark.e2e, pytest.mark.sqlite_only]

ASSISTANT_TEXT = "Hello from the fake model."
QUESTION = "Plain text or Markdown?"
RESULT = "The report is one line of Markdown."


@pytest.fixture(scope="module")
def generated_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory holding the freshly generated `strata_client` package."""
    out = tmp_path_factory.mktemp("python-client")
    command = [
        sys.executable,
        "-m",
        "openapi_python_client",
        "generate",
        "--path",
        str(OPENAPI),
        "--config",
        str(CLIENT_DIR / "config.yaml"),
        "--meta",
        "none",
        "--output-path",
        str(out / "strata_client"),
        "--fail-on-warning",
    ]
    done = subprocess.run(
        command, cwd=out, capture_output=True, text=True, timeout=GENERATE_WITHIN, check=False
    )
    assert done.returncode == 0, (
        f"openapi-python-client failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    )
    assert (out / "strata_client" / "__init__.py").is_file(), done.stdout
    return out


@pytest.fixture
def smoke(generated_client: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """clients/python/smoke.py, importing the generated client; both are unloaded afterwards
    so that nothing else in the run imports a stale copy."""
    monkeypatch.syspath_prepend(str(generated_client))
    spec = importlib.util.spec_from_file_location("strata_client_smoke", CLIENT_DIR / "smoke.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for name in list(sys.modules):
            if name.partition(".")[0] in {spec.name, "strata_client"}:
                del sys.modules[name]


def test_the_generated_client_types_a_streams_events(
    smoke: ModuleType, generated_client: Path
) -> None:
    """The stream's response is the union of its event models, not `Any`: what a client's
    SSE parser hands each `data:` line to."""
    stream = importlib.import_module("strata_client.api.events.events_session_stream")
    models = importlib.import_module("strata_client.models")

    returned = str(inspect.signature(stream.sync).return_annotation)
    delta = models.TextDelta.from_dict(
        {"type": "text.delta", "session_id": "ses_x", "job_id": "job_x", "index": 0, "text": "Hi"}
    )

    for event in ("ItemAppended", "JobStatusEvent", "TextDelta", "ToolFinished", "UsageEvent"):
        assert event in returned, returned
    assert (delta.type_, delta.text) == ("text.delta", "Hi")


def transition(next_step: str, summary: str) -> Any:
    return tool_use("transition", {"next_step": next_step, "summary": summary})


def test_generated_python_client_runs_the_smoke_script(
    smoke: ModuleType, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    token = f"sk_smoke_{secrets.token_hex(16)}"
    server = strata_procs.serve(STRATA_API_KEYS=f"smoke:{token}")
    # what the model answers, in the order the script causes the requests: the chat turn,
    # then the job's default piece (plan asks, the comment answers, plan → work → review)
    fake_llm.reply(ASSISTANT_TEXT)
    fake_llm.enqueue(
        reply(transition("ASK", QUESTION)),
        reply(transition("work", "One line, Markdown.")),
        reply(transition("review", "Wrote output/report.md.")),
        reply(transition("COMPLETE", RESULT)),
    )
    outcome = smoke.run(server.url, token, wait_seconds=30.0, poll_seconds=0.05)

    assert outcome.session.id.startswith("ses_")
    assert outcome.session.title == "Generated client smoke test"

    assert outcome.reply.text == ASSISTANT_TEXT
    assert outcome.reply.job.status == "succeeded"
    assert outcome.reply.job.session_id == outcome.session.id
    assert outcome.reply.turn == 1
    assert smoke.MESSAGE in json.dumps(fake_llm.requests[0].messages[-1])

    assert outcome.task.subject == smoke.TASK_SUBJECT
    assert outcome.task.status == "pending"
    assert outcome.updated_task.taskid == outcome.task.taskid
    assert outcome.updated_task.status == "inprogress"

    assert outcome.continuation.continues_from == outcome.session.id
    assert outcome.memory.session_id == outcome.continuation.id
    assert outcome.memory.chain == [outcome.session.id]
    assert outcome.memory.counts.total_turns == 1
    assert smoke.MESSAGE in outcome.memory.text
    assert ASSISTANT_TEXT in outcome.memory.text

    assert outcome.submitted.status == "queued"
    assert outcome.submitted.piece == "default"
    assert outcome.submitted.instruction == smoke.JOB_INSTRUCTION
    assert outcome.settled.id == outcome.submitted.id
    assert outcome.settled.status == "waiting_human"
    assert outcome.comment.job_id == outcome.submitted.id
    assert outcome.comment.author == "user"
    assert outcome.comment.body == smoke.ANSWER
    assert outcome.job.status == "succeeded", outcome.job.error
    assert outcome.job.result_text == RESULT
    # the answer reached the model when the job resumed at the movement that asked
    assert smoke.ANSWER in json.dumps(fake_llm.requests[2].body)
    assert len(fake_llm.requests) == 5

    # a wrong key fails the first step with the status and the problem document, which is
    # what someone running smoke.py against their own server sees
    with pytest.raises(smoke.SmokeError) as refused:
        smoke.run(server.url, "sk_smoke_wrong", wait_seconds=5.0)
    assert str(refused.value).startswith("create a session: expected SessionPublic, got HTTP 401")
    assert "urn:strata:problem:unauthorized" in str(refused.value)


@pytest.fixture
def stream(
    smoke: ModuleType, generated_client: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """clients/python/stream.py (it imports `smoke` beside it)."""
    monkeypatch.syspath_prepend(str(CLIENT_DIR))
    spec = importlib.util.spec_from_file_location("strata_client_stream", CLIENT_DIR / "stream.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        for name in ("strata_client_stream", "smoke", "events"):
            sys.modules.pop(name, None)


@pytest.fixture
def events(stream: ModuleType) -> ModuleType:
    """clients/python/events.py, as stream.py imported it."""
    return sys.modules["events"]


def test_the_streaming_example_follows_a_turn_on_a_keyless_server(
    stream: ModuleType, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()  # no key at all: a plain Client, no AuthenticatedClient
    fake_llm.reply(ASSISTANT_TEXT, delay_between_chunks=0.02)

    followed = stream.stream_reply(server.url, None, "hello", timeout=30.0)

    assert followed.text == ASSISTANT_TEXT
    assert followed.status == "succeeded"
    types = [e["type"] for e in followed.events]
    assert types[-1] == "job.status"  # the stream ended with the job
    assert "item.appended" in types
    assert all(e["job_id"] == followed.job_id for e in followed.events)


def test_a_cut_stream_resumes_after_the_last_event_it_saw(
    events: ModuleType, smoke: ModuleType, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    fake_llm.reply(ASSISTANT_TEXT)
    session = httpx.post(f"{server.url}/sessions", json={}, timeout=10).json()["id"]
    turn = httpx.post(
        f"{server.url}/sessions/{session}/messages",
        params={"wait": "true"},
        json={"text": "hello"},
        timeout=30,
    ).json()
    path = f"/jobs/{turn['job_id']}/events"

    with smoke.connect(server.url, None, timeout=30.0) as client:
        whole = list(events.stream(client, path))
        cut = events.stream(client, path)
        before = [next(cut), next(cut)]
        cut.close()  # the connection is gone: resume after the last id seen
        after = list(events.stream(client, path, last_event_id=before[-1].id))

    assert [r.id for r in before + after] == [r.id for r in whole]
    assert any(isinstance(r.event, events.ItemAppended) for r in whole)
    assert isinstance(whole[-1].event, events.JobStatusEvent)
    assert whole[-1].event.status == "succeeded"


def test_a_stream_answered_with_a_problem_raises_it(
    events: ModuleType, smoke: ModuleType, strata_procs: StrataProcesses
) -> None:
    server = strata_procs.serve()

    with smoke.connect(server.url, None, timeout=30.0) as client:
        with pytest.raises(events.StreamProblem) as raised:
            next(events.stream(client, "/jobs/job_00000000000000000000000000/events"))

    problem = raised.value.problem
    assert (problem.status, problem.type_) == (404, "urn:strata:problem:not-found")


@pytest.fixture
def people(stream: ModuleType) -> Iterator[ModuleType]:
    """clients/python/people.py (it imports `smoke` and `events` beside it)."""
    spec = importlib.util.spec_from_file_location("strata_client_people", CLIENT_DIR / "people.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_the_people_example_allows_an_asked_call_and_streams_to_the_answer(
    people: ModuleType, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    call = tool_use("TaskList", {})
    fake_llm.reply(call)
    fake_llm.reply("The list is empty.")

    approved = people.ask_and_allow(
        server.url, None, "What is on the list?", tool="TaskList", timeout=30.0, poll=0.05
    )

    [action] = approved.waiting.required_action
    assert (action.tool, action.tool_use_id, action.rule.layer) == ("TaskList", call.id, "session")
    assert [(a.id, a.status, a.decision) for a in approved.resolved] == [
        (action.id, "resolved", "allow")
    ]
    assert (approved.status, approved.text) == ("succeeded", "The list is empty.")
    assert {"action.required", "action.resolved"} <= set(approved.events)
    last = fake_llm.requests[-1].body["messages"][-1]["content"][0]
    assert (last["type"], last["tool_use_id"]) == ("tool_result", call.id)


def test_the_people_example_interrupts_a_running_turn(
    people: ModuleType, strata_procs: StrataProcesses, fake_llm: FakeMessagesAPI
) -> None:
    server = strata_procs.serve()
    gate = threading.Event()
    fake_llm.enqueue(held(gate, reply("Never shown.")))

    try:
        job = people.interrupt_turn(server.url, None, "Take your time.", timeout=30.0, poll=0.05)
    finally:
        gate.set()
        # the interrupt may land before the turn's request: either way it is interrupted
        fake_llm.discard_pending()

    assert job.status == "cancelled"
    assert job.error.type_ == "urn:strata:problem:interrupted"


def test_the_examples_type_check_against_the_generated_client(generated_client: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
            "--no-incremental", "--cache-dir=/dev/null",
            str(CLIENT_DIR / "smoke.py"), str(CLIENT_DIR / "stream.py"),
            str(CLIENT_DIR / "events.py"), str(CLIENT_DIR / "people.py"),
        ],
        cwd=CLIENT_DIR,
        env={**os.environ, "MYPYPATH": f"{generated_client}{os.pathsep}{CLIENT_DIR}"},
        capture_output=True,
        text=True,
        timeout=GENERATE_WITHIN,
        check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stdout + done.stderr
