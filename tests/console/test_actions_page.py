"""People in the loop, in a real browser: a tool call a policy asks about appears live on
the session page and is allowed, denied, edited or answered there; the tenant's
"Waiting for you" list; Interrupt on a running turn; a steer from the message box."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import WAIT_MS, Console
from tests.console.pages import (
    assert_labelled,
    assert_not_reloaded,
    mark_page,
    sign_in,
    user_texts,
    wait_live,
)
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ASK_TASKS = [{"tool": "TaskCreate", "effect": "ask", "reason": "a person sees new tasks first"}]
PICK_FILE = {
    "name": "pick_file",
    "description": "Ask the user to pick a file; answers its path.",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state outside the page (the fake's requests) to be reached."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not condition():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def _new_session(console: Console, title: str, **fields: Any) -> str:
    with console.api() as api:
        created = api.post("/sessions", json={"title": title, **fields})
        assert created.status_code == 201, created.text
        return str(created.json()["id"])


def _waiting_session(
    console: Console, fake_llm: FakeMessagesAPI, title: str, call: Any, **fields: Any
) -> tuple[str, dict[str, Any]]:
    """A session whose turn holds `call` for a person (sent through the public API)."""
    fake_llm.reply(call)
    session_id = _new_session(console, title, **(fields or {"tool_policy": ASK_TASKS}))
    with console.api() as api:
        sent = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
        )
    assert sent.status_code == 202 and sent.json()["job"]["status"] == "waiting_human", sent.text
    return session_id, dict(sent.json()["job"])


def _last_results(fake_llm: FakeMessagesAPI) -> list[dict[str, Any]]:
    content = fake_llm.requests[-1].body["messages"][-1]["content"]
    return [b for b in content if b["type"] == "tool_result"]


def _result_text(result: dict[str, Any]) -> str:
    content = result["content"]
    return content if isinstance(content, str) else " ".join(b["text"] for b in content)


def test_an_asked_call_appears_live_and_allow_lets_the_agent_answer(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskCreate", {"subject": "Outline the memo"}))
    fake_llm.reply(text("I noted the outline as a task."))
    session_id = _new_session(console, "Asked tasks", tool_policy=ASK_TASKS)
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    mark_page(page)

    page.get_by_label(re.compile("^Message")).fill("Plan the memo")
    page.get_by_role("button", name="Send").click()

    card = page.locator("#actions .action-card")
    expect(card).to_have_count(1)
    expect(card.locator("h3")).to_have_text("TaskCreate")
    expect(card.locator(".action-input")).to_contain_text('"subject": "Outline the memo"')
    expect(card.locator(".action-meta")).to_contain_text("session rule 0")
    expect(card.locator(".action-meta")).to_contain_text("a person sees new tasks first")
    assert_labelled(page)
    card.get_by_role("button", name="Allow").click()

    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "I noted the outline as a task."
    )
    expect(page.locator("#task-board .board-column.pending")).to_contain_text("Outline the memo")
    expect(card).to_have_count(0)
    expect(page.locator("#session-status .badge")).to_have_text("idle")
    assert_not_reloaded(page)


def test_an_asked_call_appears_live_on_the_job_page_and_is_allowed_there(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    gate = threading.Event()
    fake_llm.reply(tool_use("TaskCreate", {"subject": "Outline the memo"}), held=gate)
    fake_llm.reply(text("Noted."))
    session_id = _new_session(console, "Asked on the job page", tool_policy=ASK_TASKS)
    with console.api() as api:
        sent = api.post(f"/sessions/{session_id}/messages", json={"text": "plan"})
    job_id = sent.json()["job_id"]
    try:
        sign_in(page, then=f"/console/jobs/{job_id}")
        wait_live(page)
        mark_page(page)
    finally:
        gate.set()

    card = page.locator("#actions .action-card")
    expect(card.locator("h3")).to_have_text("TaskCreate")
    card.get_by_role("button", name="Allow").click()

    expect(page.locator("#job-status")).to_have_text("succeeded")
    expect(card).to_have_count(0)
    assert_not_reloaded(page)


def test_the_sessions_badge_says_waiting_while_a_call_waits_for_a_person(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskCreate", {"subject": "Outline the memo"}))
    fake_llm.reply(text("Done."))
    session_id = _new_session(console, "Waiting badge", tool_policy=ASK_TASKS)
    sign_in(page, then=f"/console/sessions/{session_id}")
    badge = page.locator("#session-status .badge")
    wait_live(page)

    with console.api() as api:
        sent = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "go"}
        )
        expect(badge).to_have_text("waiting")
        job = sent.json()["job"]
        action = job["required_action"][0]
        api.post(f"/jobs/{job['id']}/actions/{action['id']}", json={"decision": "allow"})

    expect(badge).to_have_text("idle")


def test_deny_with_a_reason_tells_the_agent_why(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id, _ = _waiting_session(
        console, fake_llm, "Denied", tool_use("TaskCreate", {"subject": "Delete the memo"})
    )
    fake_llm.reply(text("Understood, no task then."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    card = page.locator("#actions .action-card")

    card.get_by_label(re.compile("^Reason")).fill("the memo stays")
    card.get_by_role("button", name="Deny").click()

    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "Understood, no task then."
    )
    [result] = _last_results(fake_llm)
    assert result["is_error"] is True and "the memo stays" in _result_text(result)
    expect(page.locator("#task-board .board-column.pending")).not_to_contain_text("Delete the memo")


def test_an_edited_input_runs_and_a_refused_one_says_why_in_its_card(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id, _ = _waiting_session(
        console, fake_llm, "Edited", tool_use("TaskCreate", {"subject": "Outline"})
    )
    fake_llm.reply(text("The task is in."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    card = page.locator("#actions .action-card")
    card.get_by_text("Edit the input").click()
    box = card.get_by_label(re.compile(r"^Input \(JSON\)"))

    box.fill('{"subject": 5}')
    card.get_by_role("button", name="Run with this input").click()
    expect(card.locator(".action-error")).to_contain_text("input.subject")
    expect(box).to_have_value('{"subject": 5}')  # what was typed stays to be corrected

    box.fill('{"subject": "Outline the memo, edited"}')
    card.get_by_role("button", name="Run with this input").click()

    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "The task is in."
    )
    expect(page.locator("#task-board .board-column.pending")).to_contain_text(
        "Outline the memo, edited"
    )


def test_a_client_tools_call_is_answered_with_respond(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id, _ = _waiting_session(
        console, fake_llm, "Client tool", tool_use("pick_file", {"prompt": "which?"}),
        client_tools=[PICK_FILE],
    )  # fmt: skip
    fake_llm.reply(text("You picked notes.txt."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    card = page.locator("#actions .action-card")
    expect(card.get_by_role("button", name="Allow")).to_have_count(0)  # Respond only
    assert_labelled(page)

    card.get_by_label("Your answer to pick_file").fill("notes.txt")
    card.get_by_role("button", name="Respond").click()

    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "You picked notes.txt."
    )
    [result] = _last_results(fake_llm)
    assert _result_text(result) == "notes.txt" and not result.get("is_error")


def test_waiting_for_you_lists_every_held_call_of_the_tenant(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    first, _ = _waiting_session(
        console, fake_llm, "First", tool_use("TaskCreate", {"subject": "Outline"})
    )
    second, _ = _waiting_session(
        console, fake_llm, "Second", tool_use("pick_file", {"prompt": "which?"}),
        client_tools=[PICK_FILE],
    )  # fmt: skip
    sign_in(page)
    page.get_by_role("link", name="Waiting for you").click()

    rows = page.locator("table.list tbody tr")
    expect(rows.filter(has_text="TaskCreate").filter(has_text=first)).to_have_count(1)
    expect(rows.filter(has_text="pick_file").filter(has_text=second)).to_have_count(1)
    assert_labelled(page)
    rows.filter(has_text=first).get_by_role("link", name=re.compile("^session")).click()
    expect(page.locator("#actions .action-card")).to_contain_text("TaskCreate")

    page.go_back()  # the list, for its picture
    expect(rows.filter(has_text=second)).to_have_count(1)
    with console.api() as api:  # nothing of this test waits on in later ones
        for session_id in (first, second):
            api.post(f"/sessions/{session_id}/interrupt")


def test_interrupt_stops_a_running_turn(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    gate = threading.Event()
    fake_llm.reply(text("This is never read."), held=gate)
    session_id = _new_session(console, "Interrupted")
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    mark_page(page)
    try:
        page.get_by_label(re.compile("^Message")).fill("think long")
        page.get_by_role("button", name="Send").click()
        _until(lambda: len(fake_llm.requests) == 1, "the turn's request reached the model")

        page.get_by_role("button", name="Interrupt").click()

        expect(page.locator("#session-status .badge")).to_have_text("idle")
        expect(page.get_by_role("button", name="Interrupt")).to_have_count(0)
        expect(page.locator("#activity")).to_contain_text("cancelled")
    finally:
        gate.set()
    with console.api() as api:
        [job] = api.get("/jobs", params={"session_id": session_id}).json()["data"]
    assert job["status"] == "cancelled" and job["error"]["type"].endswith(":interrupted")
    assert_not_reloaded(page)


def test_a_steer_from_the_message_box_reaches_the_running_turn_at_its_next_step(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    gate = threading.Event()
    fake_llm.reply(tool_use("TaskList", {}), held=gate)
    fake_llm.reply(text("Blue it is."))
    session_id = _new_session(console, "Steered")
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    mark_page(page)
    message = page.get_by_label(re.compile("^Message"))
    try:
        message.fill("Paint the fence.")
        page.get_by_role("button", name="Send").click()
        _until(lambda: len(fake_llm.requests) == 1, "the turn's request reached the model")

        page.get_by_label("If the agent is busy").select_option("steer")
        message.fill("Use the blue one instead.")
        page.get_by_role("button", name="Send").click()
        expect(message).to_have_value("")  # sent: the box is back, empty
    finally:
        gate.set()

    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "Blue it is."
    )
    expect(page.locator("#conversation .item.user_message").last).to_contain_text(
        "Use the blue one instead."
    )
    assert len(fake_llm.requests) == 2
    sent = fake_llm.requests[-1].body
    assert "Use the blue one instead." in user_texts(sent)
    assert _last_results(fake_llm)  # after the step's tool result, in the same message
    assert_not_reloaded(page)
