"""The memory of forked and rewound sessions: a fork shares its parent's turns up to the
fork point and none after it; a rewind takes the reverted turns out of what a model sees
of memory (the block, search), and the detail look-up and the turn list flag them."""

from __future__ import annotations

from typing import Any

import httpx

from tests.api.test_fork_rewind import _fork, _rewind, _say
from tests.fakes.messages_api import FakeMessagesAPI, text
from tests.support.apps import serve
from tests.support.chat import new_session, wait_job


async def _two_turns(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> str:
    fake_llm.reply(text("alpha answer"))
    fake_llm.reply(text("bravo answer"))
    session_id = await new_session(client)
    await _say(client, session_id, "alpha question")
    await _say(client, session_id, "bravo question")
    return session_id


async def _forked(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> tuple[str, str]:
    """A parent of turns alpha and bravo, and its fork at the end of alpha that said
    charlie."""
    parent = await _two_turns(client, fake_llm)
    fork = await _fork(client, parent, at_turn=1)
    assert fork.status_code == 201, fork.text
    fake_llm.reply(text("charlie answer"))
    await _say(client, fork.json()["id"], "charlie question")
    return parent, fork.json()["id"]


async def _block_after(client: httpx.AsyncClient, session_id: str) -> str:
    """The memory block of a session continuing `session_id`."""
    created = await client.post("/sessions", json={"continues_from": session_id})
    assert created.status_code == 201, created.text
    response = await client.get(f"/sessions/{created.json()['id']}/memory")
    assert response.status_code == 200, response.text
    return str(response.json()["text"])


async def _found(client: httpx.AsyncClient, session_id: str, word: str) -> list[Any]:
    response = await client.get(f"/sessions/{session_id}/memory/search", params={"q": word})
    assert response.status_code == 200, response.text
    return [(hit["session_id"], hit["turn"]) for hit in response.json()["data"]]


async def _turns(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/sessions/{session_id}/turns")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


# --- fork ---------------------------------------------------------------------------
async def test_a_forks_memory_block_holds_its_parents_turns_up_to_the_fork_only(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    _, fork = await _forked(agent_client, fake_llm)

    block = await _block_after(agent_client, fork)

    assert "alpha question" in block and "alpha answer" in block
    assert "charlie question" in block and "charlie answer" in block
    assert "bravo" not in block


async def test_a_forks_memory_search_finds_its_parents_turns_up_to_the_fork_only(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent, fork = await _forked(agent_client, fake_llm)

    assert await _found(agent_client, fork, "alpha") == [(parent, 1)]
    assert await _found(agent_client, fork, "charlie") == [(fork, 2)]
    assert await _found(agent_client, fork, "bravo") == []


async def test_a_forks_detail_reads_its_parents_turn_before_the_fork_not_after(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent, fork = await _forked(agent_client, fake_llm)
    ends = [t["ended_at"] for t in await _turns(agent_client, parent)]

    read = set()
    for end in ends:  # turns a second apart or less: a look-up may match several
        response = await agent_client.get(f"/sessions/{fork}/detail/{end}")
        if response.status_code == 200:
            read |= {(t["session_id"], t["turn"]) for t in response.json()["data"]}

    assert (parent, 1) in read
    assert (parent, 2) not in read


async def test_a_forks_turn_list_holds_its_parents_turns_up_to_the_fork_then_its_own(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent, fork = await _forked(agent_client, fake_llm)

    turns = await _turns(agent_client, fork)

    assert [(t["session_id"], t["turn"], t["reverted"]) for t in turns] == [
        (fork, 2, False),
        (parent, 1, False),
    ]


async def test_a_fork_rewound_before_its_fork_point_flags_its_parents_turn_reverted(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    parent, fork = await _forked(agent_client, fake_llm)

    rewound = await _rewind(agent_client, fork, to_seq=0)

    assert rewound.status_code == 200, rewound.text
    turns = await _turns(agent_client, fork)
    assert [(t["session_id"], t["turn"], t["reverted"]) for t in turns] == [
        (fork, 2, True),
        (parent, 1, True),
    ]
    assert await _found(agent_client, fork, "alpha") == []


# --- rewind -------------------------------------------------------------------------
async def test_a_rewound_sessions_memory_block_leaves_out_the_reverted_turns(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    await _rewind(agent_client, session_id, to_turn=1)
    block = await _block_after(agent_client, session_id)

    assert "alpha question" in block and "alpha answer" in block
    assert "bravo" not in block


async def test_a_rewound_sessions_memory_search_leaves_out_the_reverted_turns(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    await _rewind(agent_client, session_id, to_turn=1)

    assert await _found(agent_client, session_id, "alpha") == [(session_id, 1)]
    assert await _found(agent_client, session_id, "bravo") == []


async def test_a_search_of_every_session_leaves_out_the_turns_a_rewind_reverted(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)

    await _rewind(agent_client, session_id, to_turn=1)

    for word, found in (("alpha", [(session_id, 1)]), ("bravo", [])):
        response = await agent_client.get("/memory/search", params={"q": word})
        assert response.status_code == 200, response.text
        assert [(h["session_id"], h["turn"]) for h in response.json()["data"]] == found


async def test_a_rewound_sessions_detail_says_a_reverted_turn_is_reverted_in_its_text(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    bravo = max(t["ended_at"] for t in await _turns(agent_client, session_id))

    await _rewind(agent_client, session_id, to_turn=1)
    detail = await agent_client.get(f"/sessions/{session_id}/detail/{bravo}")

    assert detail.status_code == 200, detail.text
    assert f"(session {session_id}, turn 2, reverted)" in detail.json()["text"]


async def test_an_undo_brings_the_reverted_turns_back_into_the_memory_block(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    first = (await _rewind(agent_client, session_id, to_turn=1)).json()

    undone = await _rewind(agent_client, session_id, to_seq=first["from_seq"])
    block = await _block_after(agent_client, session_id)

    assert undone.status_code == 200, undone.text
    assert "alpha question" in block and "bravo question" in block


async def test_an_undo_brings_the_reverted_turns_back_into_memory_search(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    first = (await _rewind(agent_client, session_id, to_turn=1)).json()

    await _rewind(agent_client, session_id, to_seq=first["from_seq"])

    assert await _found(agent_client, session_id, "bravo") == [(session_id, 2)]
    turns = await _turns(agent_client, session_id)
    assert [(t["turn"], t["reverted"]) for t in turns] == [(2, False), (1, False)]


async def test_after_a_rollback_memory_search_finds_the_new_turn_not_the_rolled_back_one(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("alpha answer"))
    session_id = await new_session(agent_client)
    await _say(agent_client, session_id, "alpha question")
    fake_llm.hang(120)
    running = await agent_client.post(
        f"/sessions/{session_id}/messages", json={"text": "oops question"}
    )
    await fake_llm.wait_for_requests(2)

    fake_llm.reply(text("charlie answer"))
    response = await agent_client.post(
        f"/sessions/{session_id}/messages",
        params={"if_busy": "rollback", "wait": "true"},
        json={"text": "charlie question"},
    )

    assert response.status_code == 200, response.text
    assert (await wait_job(agent_client, running.json()["job_id"]))["status"] == "cancelled"
    found = await _found(agent_client, session_id, "question")
    assert sorted(found) == [(session_id, 1), (session_id, 3)]
    assert await _found(agent_client, session_id, "oops") == []


async def test_turns_merged_into_a_rewound_session_stay_in_its_memory(
    agent_client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    session_id = await _two_turns(agent_client, fake_llm)
    await _rewind(agent_client, session_id, to_turn=1)
    fake_llm.reply(text("delta answer"))
    other = await new_session(agent_client)
    await _say(agent_client, other, "delta question")

    merged = await agent_client.post(f"/sessions/{other}/merge", json={"into": session_id})

    assert merged.status_code == 200, merged.text
    assert await _found(agent_client, session_id, "delta") == [(other, 1)]
    assert "delta question" in await _block_after(agent_client, session_id)


# --- tenants ------------------------------------------------------------------------
async def test_another_tenant_never_reads_the_memory_a_fork_shares(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    acme = {"Authorization": "Bearer key-a"}
    globex = {"Authorization": "Bearer key-b"}
    settings = make_settings(anthropic_base_url=fake_llm.url, api_keys="acme:key-a,globex:key-b")
    async with serve(settings) as (_, client):
        client.headers.update(acme)
        _, fork = await _forked(client, fake_llm)
        client.headers.update(globex)

        chain = await client.get(f"/sessions/{fork}/memory/search", params={"q": "alpha"})
        tenant = await client.get("/memory/search", params={"q": "alpha"})
        listed = await client.get(f"/sessions/{fork}/turns")

    assert chain.status_code == 404
    assert tenant.status_code == 200 and tenant.json()["data"] == []
    assert listed.status_code == 404
