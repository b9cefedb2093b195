"""Held tool calls in the console, as a browser posts its forms: the actions panel of a
session's and a job's page, a decision from it, the "Waiting for you" list, Interrupt
and the message box's choice for a busy session."""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.chat import new_session, wait_job, wait_status

ASK_ECHO = [{"tool": "echo", "effect": "ask", "reason": "a person reads it first"}]
PICK_FILE = {
    "name": "pick_file",
    "description": "Ask the user to pick a file; answers its path.",
    "input_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}


async def _token(client: httpx.AsyncClient, path: str) -> str:
    page = await client.get(path)
    assert page.status_code == 200, page.text[:300]
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found is not None
    return found.group(1)


async def _waiting(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI, call: Any, **session: Any
) -> tuple[str, dict[str, Any]]:
    """A session whose turn holds `call` for a person: its id and the waiting job."""
    fake_llm.reply(call)
    session_id = await new_session(client, **(session or {"tool_policy": ASK_ECHO}))
    sent = await client.post(f"/sessions/{session_id}/messages", json={"text": "go"})
    assert sent.status_code == 202, sent.text
    return session_id, await wait_status(client, sent.json()["job_id"], {"waiting_human"})


def _htmx(token: str) -> dict[str, str]:
    return {"HX-Request": "true", "X-CSRF-Token": token}


async def test_the_session_page_shows_the_held_call_its_input_and_the_rule_that_asked(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(
        agent_client, fake_llm, tool_use("echo", {"text": "<b>hi</b>"})
    )
    [action] = job["required_action"]

    page = (await agent_client.get(f"/console/sessions/{session_id}")).text

    card = page.split(f'id="{action["id"]}"', 1)[1].split("</article>", 1)[0]
    assert "<code>echo</code>" in card
    assert "&#34;text&#34;: &#34;&lt;b&gt;hi&lt;/b&gt;&#34;" in card  # pretty JSON, escaped
    assert "<b>hi</b>" not in page
    assert "<strong>session</strong> rule 0" in card and "a person reads it first" in card
    assert ">Allow</button>" in card and ">Deny</button>" in card
    assert "Edit the input" in card and ">Respond</button>" not in card


async def test_the_job_page_shows_the_held_call_too(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]

    page = (await agent_client.get(f"/console/jobs/{job['id']}")).text

    assert f'id="{action["id"]}"' in page
    assert f'action="/console/jobs/{job["id"]}/actions/{action["id"]}"' in page


async def test_allow_posted_from_the_panel_runs_the_call_and_the_turn_answers(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]
    fake_llm.reply(text("It said hi."))
    page = f"/console/sessions/{session_id}"

    sent = await agent_client.post(
        f"/console/jobs/{job['id']}/actions/{action['id']}",
        data={"csrf_token": await _token(agent_client, page), "decision": "allow",
              "panel": "session"},
    )  # fmt: skip

    assert (sent.status_code, sent.headers["location"]) == (303, f"{page}#actions")
    assert (await wait_job(agent_client, job["id"]))["result_text"] == "It said hi."


async def test_deny_sends_the_reason_and_remembers_the_rule_for_the_session(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]
    fake_llm.reply(text("Understood."))
    page = f"/console/sessions/{session_id}"

    sent = await agent_client.post(
        f"/console/jobs/{job['id']}/actions/{action['id']}",
        data={"decision": "deny", "reason": "not today", "remember": "session", "panel": "session"},
        headers=_htmx(await _token(agent_client, page)),
    )

    assert sent.status_code == 200 and "Waiting for you" not in sent.text  # the panel, empty
    [denied] = (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert (denied["decision"], denied["reason"]) == ("deny", "not today")
    rules = (await agent_client.get(f"/sessions/{session_id}")).json()["tool_policy"]
    assert (rules[-1]["tool"], rules[-1]["effect"]) == ("echo", "deny")
    await wait_job(agent_client, job["id"])


async def test_an_edit_the_tool_refuses_shows_the_apis_422_in_the_actions_card(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]
    page = f"/console/sessions/{session_id}"

    sent = await agent_client.post(
        f"/console/jobs/{job['id']}/actions/{action['id']}",
        data={"decision": "edit", "input": '{"text": 5}', "panel": "session"},
        headers=_htmx(await _token(agent_client, page)),
    )

    assert sent.status_code == 200
    assert sent.headers["HX-Retarget"] == f"#{action['id']}-error"
    assert "input.text" in sent.text and "the input schema of &#39;echo&#39;" in sent.text
    [still] = (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert still["status"] == "pending"
    await agent_client.post(f"/jobs/{job['id']}/cancel")


async def test_an_edit_that_is_no_json_object_is_refused_before_the_api(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]
    token = await _token(agent_client, f"/console/sessions/{session_id}")
    url = f"/console/jobs/{job['id']}/actions/{action['id']}"

    broken = await agent_client.post(
        url, data={"decision": "edit", "input": "{text"}, headers=_htmx(token)
    )
    listed = await agent_client.post(
        url, data={"decision": "edit", "input": "[1]"}, headers=_htmx(token)
    )

    assert "The input is not JSON" in broken.text
    assert "must be a JSON object" in listed.text
    await agent_client.post(f"/jobs/{job['id']}/cancel")


async def test_an_edit_runs_the_call_with_the_new_input(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    [action] = job["required_action"]
    fake_llm.reply(text("It said bye."))

    sent = await agent_client.post(
        f"/console/jobs/{job['id']}/actions/{action['id']}",
        data={"decision": "edit", "input": '{"text": "bye"}', "panel": "job"},
        headers=_htmx(await _token(agent_client, f"/console/jobs/{job['id']}")),
    )

    assert sent.status_code == 200 and "HX-Retarget" not in sent.headers
    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    [edited] = (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert edited["decided_input"] == {"text": "bye"}


async def test_a_client_tools_call_offers_respond_only_and_respond_answers_it(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(
        agent_client, fake_llm, tool_use("pick_file", {"prompt": "which?"}),
        client_tools=[PICK_FILE],
    )  # fmt: skip
    [action] = job["required_action"]
    page = f"/console/sessions/{session_id}"
    shown = (await agent_client.get(page)).text
    fake_llm.reply(text("You picked notes.txt."))

    sent = await agent_client.post(
        f"/console/jobs/{job['id']}/actions/{action['id']}",
        data={"decision": "respond", "content": "notes.txt", "panel": "session"},
        headers=_htmx(await _token(agent_client, page)),
    )

    assert ">Respond</button>" in shown and ">Allow</button>" not in shown
    assert sent.status_code == 200
    assert (await wait_job(agent_client, job["id"]))["status"] == "succeeded"
    [answered] = (await agent_client.get(f"/jobs/{job['id']}/actions")).json()["data"]
    assert answered["content"] == "notes.txt"


async def test_the_waiting_page_lists_every_pending_action_with_its_session_and_job(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    first_session, first = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "a"}))
    second_session, second = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "b"}))

    page = (await agent_client.get("/console/waiting")).text

    rows = re.findall(r'<tr id="waiting-(act_[0-9A-Z]+)">', page)
    assert rows == [second["required_action"][0]["id"], first["required_action"][0]["id"]]
    for session_id, job in ((first_session, first), (second_session, second)):
        assert f'href="/console/sessions/{session_id}#actions"' in page
        assert f'href="/console/jobs/{job["id"]}"' in page
    assert 'href="/console/waiting" aria-current="page"' in page


async def test_interrupt_from_the_session_page_stops_its_turn(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    page = f"/console/sessions/{session_id}"
    shown = (await agent_client.get(page)).text

    sent = await agent_client.post(
        f"{page}/interrupt", data={"csrf_token": await _token(agent_client, page)}
    )

    assert ">Interrupt</button>" in shown
    assert (sent.status_code, sent.headers["location"]) == (303, page)
    ended = await wait_job(agent_client, job["id"])
    assert ended["status"] == "cancelled"
    assert ended["error"]["type"].endswith(":interrupted")
    assert ">Interrupt</button>" not in (await agent_client.get(page)).text  # idle now


async def test_interrupt_on_an_idle_session_says_why_nothing_stopped(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)
    page = f"/console/sessions/{session_id}"

    sent = await client.post(f"{page}/interrupt", headers=_htmx(await _token(client, page)))

    assert sent.status_code == 200 and sent.headers["HX-Reswap"] == "none"
    assert 'hx-swap-oob="innerHTML:#flash"' in sent.text


async def test_a_message_sent_with_interrupt_stops_the_busy_turn_and_starts_its_own(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id, job = await _waiting(agent_client, fake_llm, tool_use("echo", {"text": "hi"}))
    page = f"/console/sessions/{session_id}"
    fake_llm.reply(text("Starting over."))

    sent = await agent_client.post(
        f"{page}/messages",
        data={"csrf_token": await _token(agent_client, page), "text": "stop, do this instead",
              "if_busy": "interrupt"},
    )  # fmt: skip

    assert sent.status_code == 303
    assert (await wait_job(agent_client, job["id"]))["error"]["type"].endswith(":interrupted")
    jobs = (await agent_client.get("/jobs", params={"session_id": session_id})).json()["data"]
    assert (await wait_job(agent_client, jobs[0]["id"]))["result_text"] == "Starting over."


async def test_the_message_box_offers_enqueue_steer_and_interrupt(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)

    page = (await client.get(f"/console/sessions/{session_id}")).text

    form = page.split('id="message-form"', 1)[1].split("</form>", 1)[0]
    assert re.findall(r'<option value="([a-z]+)"', form) == ["enqueue", "steer", "interrupt"]
