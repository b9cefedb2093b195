"""A job in the console, as a person runs one: a draft takes a file, starts, asks, and goes
on to the end after the answer typed in its comment box."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import FilePayload, Page, expect

from tests.console.conftest import Console
from tests.console.pages import assert_labelled, assert_not_reloaded, mark_page, sign_in, wait_live
from tests.fakes.messages_api import FakeMessagesAPI, ToolUse, tool_use

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

QUESTION = "Should the answer be a memo or slides?"


def _transition(next_step: str, summary: str) -> ToolUse:
    return tool_use("transition", {"next_step": next_step, "summary": summary})


def _requests_text(fake_llm: FakeMessagesAPI) -> str:
    return "\n".join(str(r.body["messages"]) for r in fake_llm.requests)


def test_a_draft_job_takes_an_uploaded_file_starts_asks_and_completes_after_the_answer(
    page: Page, console: Console, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(tool_use("Read", {"path": "input/notes.txt"}))
    fake_llm.reply(_transition("ASK", QUESTION))
    fake_llm.reply(tool_use("Write", {"path": "output/answer.md", "content": "# Memo\n"}))
    fake_llm.reply(_transition("COMPLETE", "Wrote the memo"))
    sign_in(page, then="/console/jobs")
    assert_labelled(page)
    page.get_by_label("Instruction").fill("Turn the notes into what I ask for.")
    page.get_by_label("Piece").select_option("ask-once")
    page.get_by_label(re.compile("as a draft")).check()
    page.get_by_role("button", name="Create job").click()

    expect(page.locator("#job-status")).to_have_text("draft")
    wait_live(page)
    mark_page(page)
    assert_labelled(page)
    page.get_by_label("File for input/").set_input_files(
        files=[FilePayload(name="notes.txt", mimeType="text/plain", buffer=b"quarterly numbers\n")]
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#files")).to_contain_text("notes.txt")
    page.get_by_role("button", name="Start the job").click()
    expect(page.get_by_label("File for input/")).to_have_count(0)  # files went in before

    expect(page.locator("#job-summary .ask")).to_contain_text(QUESTION)
    expect(page.locator("#job-status")).to_have_text("waiting human")
    page.get_by_label(re.compile("Your comment")).fill("A memo, please.")
    page.get_by_role("button", name="Send comment").click()

    expect(page.locator("#job-status")).to_have_text("succeeded")
    expect(page.locator("#comment-list")).to_contain_text("A memo, please.")
    expect(page.get_by_label(re.compile("Your comment"))).to_have_value("")
    expect(page.locator("#timeline")).to_contain_text("Wrote the memo")
    download = page.locator("#files a", has_text="answer.md")
    expect(download).to_be_visible()
    assert_not_reloaded(page)
    fetched = page.request.get(download.get_attribute("href") or "")
    assert fetched.status == 200
    assert fetched.body() == b"# Memo\n"
    sent = _requests_text(fake_llm)
    assert "quarterly numbers" in sent  # the model read the uploaded file
    assert "A memo, please." in sent  # and got the answer


def test_a_list_the_live_stream_read_before_an_upload_never_replaces_the_uploads_answer(
    page: Page, console: Console
) -> None:
    """The stream's refresh of the list, read before the upload committed, may arrive
    after the upload's answer: the older list is not shown (`#files` would be empty)."""
    sign_in(page, then="/console/jobs")
    page.get_by_label("Instruction").fill("Keep the notes.")
    page.get_by_label(re.compile("as a draft")).check()
    page.get_by_role("button", name="Create job").click()
    wait_live(page)
    page.get_by_label("File for input/").set_input_files(
        files=[FilePayload(name="notes.txt", mimeType="text/plain", buffer=b"numbers\n")]
    )
    page.get_by_role("button", name="Upload").click()
    expect(page.locator("#files")).to_contain_text("notes.txt")

    def live_list(as_of: int, text: str) -> None:  # as the stream sends a refreshed list
        page.evaluate(
            """([asOf, text]) => htmx.swap(document.querySelector("[data-live]"),
                `<template><div hx-swap-oob="innerHTML:#files"><div class="listed"
                  data-as-of="${asOf}"><p>${text}</p></div></div></template>`,
                { swapStyle: "none" })""",
            [str(as_of), text],
        )

    live_list(1, "stale: read before the upload")
    expect(page.locator("#files")).to_contain_text("notes.txt")
    live_list(2**62, "read after it")
    expect(page.locator("#files")).to_have_text("read after it")
