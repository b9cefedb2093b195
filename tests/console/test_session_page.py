"""A session in the console, as a person uses it: create it, talk to the agent and watch
the answer stream in, steer its task list, look up what happened at a time."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Console
from tests.console.pages import (
    assert_labelled,
    assert_not_reloaded,
    mark_page,
    sign_in,
    tab_to,
    user_texts,
    wait_live,
)
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

ANSWER = "Here is the plan: first the outline, then the draft, then a careful review of both."


def _session_with_a_task(console: Console, fake_llm: FakeMessagesAPI, title: str) -> str:
    """A session whose first turn (through the public API) made task 1."""
    fake_llm.reply(tool_use("TaskCreate", {"subject": "Outline the memo"}))
    fake_llm.reply(text("I noted the outline as a task."))
    with console.api() as api:
        session_id: str = api.post("/sessions", json={"title": title}).json()["id"]
        answered = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "plan it"}
        )
        assert answered.status_code == 200, answered.text
    return session_id


def test_a_message_sent_from_the_console_streams_its_answer_and_the_agents_task_in_without_a_reload(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("TaskCreate", {"subject": "Outline the memo"}))
    # the answer arrives in deltas a quarter of a second apart: the page shows it growing
    fake_llm.reply(text(ANSWER), delay_between_chunks=0.25)
    sign_in(page)
    assert_labelled(page)
    page.get_by_label("Title", exact=True).fill("Memo planning")
    page.get_by_role("button", name="Create session").click()
    expect(page.get_by_role("heading", name="Memo planning")).to_be_visible()
    assert_labelled(page)
    wait_live(page)
    mark_page(page)

    tab_to(page, "#message")  # the message box is reached with the keyboard
    page.keyboard.type("Plan the memo, please")
    page.keyboard.press("Enter")  # Enter sends

    # part of the answer is on the page while the rest is still on its way
    page.wait_for_function(
        """(end) => {
            const draft = document.querySelector('#draft').textContent;
            return draft.length > 0 && !draft.includes(end);
        }""",
        arg="review of both.",
    )
    assistant = page.locator("#conversation .item.assistant_message").filter(has_text=ANSWER)
    expect(assistant).to_be_visible()
    expect(page.locator("#conversation .item.user_message")).to_contain_text(
        "Plan the memo, please"
    )
    tool_call = page.locator("#conversation details.tool").filter(has_text="TaskCreate")
    expect(tool_call).to_be_visible()  # folded: its input and result open on a click
    expect(tool_call.locator(".tool-result")).to_be_hidden()
    pending = page.locator("#task-board .board-column.pending")
    expect(pending).to_contain_text("Outline the memo")
    expect(page.locator("#usage")).to_contain_text("Total:")
    expect(page.locator("#usage tbody tr")).to_have_count(1)  # the turn's usage line
    message_box = page.get_by_label(re.compile("^Message"))
    expect(message_box).to_be_editable()  # the box is back, empty, for the next message
    expect(message_box).to_have_value("")
    assert_not_reloaded(page)
    assert_labelled(page)  # the board's new forms too


def test_a_task_moved_on_the_board_reaches_the_agents_next_request_as_a_note(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _session_with_a_task(console, fake_llm, "Board steering")
    fake_llm.reply(text("I see the outline is done."))
    sign_in(page, then=f"/console/sessions/{session_id}")
    wait_live(page)
    mark_page(page)

    card = page.locator("#task-1")
    card.get_by_label("Move task 1 to").select_option("completed")
    card.get_by_role("button", name="Move").click()

    expect(page.locator("#task-board .board-column.completed")).to_contain_text("Outline the memo")
    expect(page.locator("#task-board .board-column.pending")).not_to_contain_text(
        "Outline the memo"
    )
    page.get_by_label(re.compile("^Message")).fill("carry on")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#conversation .item.assistant_message").last).to_contain_text(
        "I see the outline is done."
    )

    sent = fake_llm.requests[-1].body
    assert "<task-note>A user updated task 1: status='completed' (via the API).</task-note>" in (
        user_texts(sent)
    )
    expect(page.locator("#conversation .item.task_event")).to_contain_text("updated task 1")
    assert_not_reloaded(page)


def _turn_time(console: Console, session_id: str) -> dict[str, Any]:
    with console.api() as api:
        (turn,) = api.get(f"/sessions/{session_id}/turns").json()["data"]
    return dict(turn)


def test_a_detail_looked_up_by_time_shows_what_was_said_and_the_tool_details(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    session_id = _session_with_a_task(console, fake_llm, "Detail lookup")
    turn = _turn_time(console, session_id)
    sign_in(page, then=f"/console/sessions/{session_id}")
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text(turn["time"])  # the memory panel's turns by time

    page.get_by_label("Time or range").fill(turn["time"])
    page.get_by_label("Time or range").press("Enter")

    found = page.locator("#detail-result article.detail-turn")
    expect(found).to_have_count(1)
    expect(found.locator(".l2")).to_contain_text("plan it")
    expect(found.locator(".l2")).to_contain_text("I noted the outline as a task.")
    expect(found.locator(".l3")).to_contain_text("TaskCreate")
    assert_labelled(page)

    page.get_by_label("Time or range").fill("25:99")
    page.get_by_role("button", name="Look up").click()
    expect(page.locator("#detail-result .error")).to_contain_text("Not a time the look-up reads")


def test_an_answer_in_markdown_reads_formatted_with_its_code_highlighted(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text('Run **this** first:\n\n```python\nprint("ready")\n```'))
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "Markdown"}).json()["id"]
        answered = api.post(
            f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "how?"}
        )
        assert answered.status_code == 200, answered.text
    sign_in(page, then=f"/console/sessions/{session_id}")

    answer = page.locator("#conversation .item.assistant_message .markdown")
    expect(answer.locator("strong")).to_have_text("this")
    expect(answer.locator("pre code")).to_have_text('print("ready")')
    expect(answer.locator("pre code span.hl-nb")).to_have_text("print")
    assert "**" not in answer.inner_text()


def test_the_sessions_badge_says_running_while_a_turn_runs_and_idle_after(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    thinking = threading.Event()
    fake_llm.reply(text("Done thinking."), held=thinking)
    with console.api() as api:
        session_id = api.post("/sessions", json={"title": "Badge"}).json()["id"]
    sign_in(page, then=f"/console/sessions/{session_id}")
    badge = page.locator("#session-status .badge")
    expect(badge).to_have_text("idle")
    wait_live(page)
    mark_page(page)

    page.get_by_label(re.compile("^Message")).fill("think")
    page.get_by_role("button", name="Send").click()
    expect(badge).to_have_text("running")
    thinking.set()

    expect(page.locator("#conversation .item.assistant_message")).to_contain_text("Done thinking.")
    expect(badge).to_have_text("idle")
    assert_not_reloaded(page)
