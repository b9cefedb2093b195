"""Continuation: a session that continues another starts with its predecessors' memory."""

from __future__ import annotations

import httpx

from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.chat import items, new_session
from tests.support.memory import clock


async def _say(client: httpx.AsyncClient, session_id: str, message: str) -> None:
    response = await client.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": message}
    )
    assert response.status_code == 200, response.text
    assert response.json()["job"]["status"] == "succeeded"


async def _turn_times(client: httpx.AsyncClient, session_id: str) -> list[str]:
    """Each turn's stable time: its last assistant item (UTC is the default display zone)."""
    ends: dict[int, str] = {}
    for item in await items(client, session_id):
        if item["kind"] == "assistant_message":
            ends[item["turn"]] = clock(item["created_at"])
    return [ends[t] for t in sorted(ends)]


async def _predecessor(client: httpx.AsyncClient, fake: FakeMessagesAPI) -> tuple[str, list[str]]:
    """Session A with two turns; (its id, the turns' HH:MM:SS)."""
    fake.reply(text("Paris."))
    fake.reply(text("Rome."))
    a = await new_session(client)
    await _say(client, a, "What is the capital of France?")
    await _say(client, a, "And of Italy?")
    return a, await _turn_times(client, a)


def _system_text(fake: FakeMessagesAPI) -> str:
    system = fake.requests[-1].body.get("system")
    assert system, "the request has no system prompt"
    return str(system[0]["text"])


async def test_a_continuation_sends_the_predecessors_turns_in_its_system_prompt(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    a, (t1, t2) = await _predecessor(agent_client, fake_llm)
    b = await new_session(agent_client, continues_from=a)
    fake_llm.reply(text("We were on capitals."))

    await _say(agent_client, b, "Where were we?")

    system = _system_text(fake_llm)
    lines = system.splitlines()
    assert lines[0] == "## Strata: session memory"
    expected = [
        f"[{t1}] [user]: What is the capital of France?",
        f"[{t1}] [assistant]: Paris.",
        f"[{t2}] [user]: And of Italy?",
        f"[{t2}] [assistant]: Rome.",
    ]
    start = lines.index(expected[0])
    assert lines[start : start + 4] == expected
    assert "the `Detail` tool" in lines[-1] and f"time `{t2}`" in lines[-1]
    assert "Where were we?" not in system


async def test_the_memory_endpoint_returns_the_block_the_request_carried(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    a, _ = await _predecessor(agent_client, fake_llm)
    b = await new_session(agent_client, continues_from=a)
    fake_llm.reply(text("ok"))
    await _say(agent_client, b, "go on")

    memory = (await agent_client.get(f"/sessions/{b}/memory")).json()

    assert memory["text"] == _system_text(fake_llm)
    assert memory["counts"] == {
        "l2_turns": 2,
        "l1_turns": 0,
        "omitted_turns": 0,
        "total_turns": 2,
    }
    assert memory["chain"] == [a]
    assert memory["session_id"] == b


async def test_the_sessions_own_turns_are_not_repeated_in_its_memory(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    a, _ = await _predecessor(agent_client, fake_llm)
    b = await new_session(agent_client, continues_from=a)
    fake_llm.reply(text("Noted: Berlin."))
    fake_llm.reply(text("Sure."))
    await _say(agent_client, b, "Remember Berlin as well.")
    first_block = _system_text(fake_llm)

    await _say(agent_client, b, "Thanks.")

    second_block = _system_text(fake_llm)
    assert second_block == first_block
    assert "Berlin" not in second_block
    # the model still sees B's own first turn, as conversation rather than memory
    messages = fake_llm.requests[-1].body["messages"]
    assert "Remember Berlin as well." in str(messages[0])


async def test_the_memory_block_follows_the_sessions_own_system_prompt(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    a, _ = await _predecessor(agent_client, fake_llm)
    b = await new_session(agent_client, continues_from=a, system_prompt="Be brief.")
    fake_llm.reply(text("ok"))

    await _say(agent_client, b, "hi")

    system = _system_text(fake_llm)
    block = (await agent_client.get(f"/sessions/{b}/memory")).json()["text"]
    assert system == "Be brief.\n\n" + block


async def test_memory_reaches_back_through_the_whole_chain(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    a, (t1, _) = await _predecessor(agent_client, fake_llm)
    b = await new_session(agent_client, continues_from=a)
    fake_llm.reply(text("Madrid."))
    await _say(agent_client, b, "And of Spain?")
    [tb] = await _turn_times(agent_client, b)
    c = await new_session(agent_client, continues_from=b)
    fake_llm.reply(text("Three capitals."))

    await _say(agent_client, c, "How many so far?")

    system = _system_text(fake_llm)
    assert f"[{t1}] [user]: What is the capital of France?" in system
    assert f"[{tb}] [assistant]: Madrid." in system
    assert system.index("France") < system.index("Spain")
    memory = (await agent_client.get(f"/sessions/{c}/memory")).json()
    assert memory["chain"] == [b, a]
    assert memory["counts"]["total_turns"] == 3


async def test_a_session_without_a_predecessor_has_no_memory_block(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("hello"))
    a = await new_session(agent_client)

    await _say(agent_client, a, "hi")

    assert "system" not in fake_llm.requests[-1].body
    memory = (await agent_client.get(f"/sessions/{a}/memory")).json()
    assert memory["text"] == ""
    assert memory["counts"] == {
        "l2_turns": 0,
        "l1_turns": 0,
        "omitted_turns": 0,
        "total_turns": 0,
    }


async def test_continuing_an_unknown_session_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions", json={"continues_from": "ses_does_not_exist"})

    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "continues_from" in response.text
