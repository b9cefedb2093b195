from __future__ import annotations

import asyncio
from typing import Any

import httpx

PROBLEM = "application/problem+json"


async def new_session(client: httpx.AsyncClient) -> str:
    response = await client.post("/sessions", json={})
    assert response.status_code == 201
    session_id: str = response.json()["id"]
    return session_id


async def append(
    client: httpx.AsyncClient, session_id: str, text: str, kind: str = "user_message"
) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/items", json={"kind": kind, "text": text})


async def all_items(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/sessions/{session_id}/items", params={"limit": 200})
    assert response.status_code == 200
    items: list[dict[str, Any]] = response.json()["data"]
    return items


async def test_append_user_message_is_201_with_origin_user(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    response = await append(client, session_id, "hello")

    assert response.status_code == 201
    item = response.json()
    assert item["kind"] == "user_message"
    assert item["origin"] == "user"
    assert item["session_id"] == session_id
    assert item["seq"] == 1
    assert item["turn"] == 1
    assert item["content"] == [{"type": "text", "text": "hello"}]


async def test_each_user_message_starts_a_new_turn(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    turns = [(await append(client, session_id, f"m{i}")).json()["turn"] for i in range(3)]

    assert turns == [1, 2, 3]


async def test_system_item_has_origin_api_and_stays_in_the_turn(
    client: httpx.AsyncClient,
) -> None:
    session_id = await new_session(client)
    await append(client, session_id, "question")

    response = await append(client, session_id, "note", kind="system")

    assert response.status_code == 201
    item = response.json()
    assert item["kind"] == "system"
    assert item["origin"] == "api"
    assert item["text"] == "note"
    assert item["turn"] == 1
    assert item["seq"] == 2


async def test_seq_is_one_based_and_gap_free(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    for i in range(5):
        await append(client, session_id, f"m{i}", kind="system" if i % 2 else "user_message")

    assert [item["seq"] for item in await all_items(client, session_id)] == [1, 2, 3, 4, 5]


async def test_list_items_returns_the_log_in_seq_order(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    await append(client, session_id, "first")
    await append(client, session_id, "second", kind="system")
    await append(client, session_id, "third")

    items = await all_items(client, session_id)

    assert [i["kind"] for i in items] == ["user_message", "system", "user_message"]
    assert items[0]["content"][0]["text"] == "first"
    assert items[1]["text"] == "second"
    assert items[2]["content"][0]["text"] == "third"


async def test_list_items_paginates_with_a_cursor(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    for i in range(5):
        await append(client, session_id, f"m{i}")
    url = f"/sessions/{session_id}/items"

    first = (await client.get(url, params={"limit": 2})).json()
    second = (await client.get(url, params={"limit": 2, "after": first["next_cursor"]})).json()
    third = (await client.get(url, params={"limit": 2, "after": second["next_cursor"]})).json()

    seqs = [[i["seq"] for i in page["data"]] for page in (first, second, third)]
    assert seqs == [[1, 2], [3, 4], [5]]
    assert first["next_cursor"] is not None
    assert third["next_cursor"] is None


async def test_list_items_of_an_empty_log_is_an_empty_page(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    body = (await client.get(f"/sessions/{session_id}/items")).json()

    assert body == {"data": [], "next_cursor": None}


async def test_list_items_rejects_a_bad_cursor(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    response = await client.get(f"/sessions/{session_id}/items", params={"after": "abc"})

    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert "after" in response.json()["detail"]


async def test_list_items_of_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_missing/items")

    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "urn:strata:problem:not-found"


async def test_append_to_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    response = await append(client, "ses_missing", "hello")

    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "urn:strata:problem:not-found"


async def test_append_rejects_a_kind_clients_cannot_append(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    response = await append(client, session_id, "hi", kind="assistant_message")

    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    assert "kind" in response.json()["detail"]


async def test_append_rejects_empty_text(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    response = await append(client, session_id, "")

    assert response.status_code == 422
    assert "text" in response.json()["detail"]
    assert await all_items(client, session_id) == []


async def test_session_counts_reflect_appends(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)
    await append(client, session_id, "q1")
    await append(client, session_id, "note", kind="system")
    await append(client, session_id, "q2")

    session = (await client.get(f"/sessions/{session_id}")).json()

    assert session["item_count"] == 3
    assert session["turn_count"] == 2


async def test_concurrent_appends_get_distinct_gap_free_seqs(client: httpx.AsyncClient) -> None:
    session_id = await new_session(client)

    responses = await asyncio.gather(*(append(client, session_id, f"m{i}") for i in range(40)))

    assert [r.status_code for r in responses] == [201] * 40
    assert sorted(r.json()["seq"] for r in responses) == list(range(1, 41))
    assert sorted(r.json()["turn"] for r in responses) == list(range(1, 41))
    assert [i["seq"] for i in await all_items(client, session_id)] == list(range(1, 41))


async def test_parallel_appends_to_two_sessions_number_each_log(
    client: httpx.AsyncClient,
) -> None:
    first, second = await new_session(client), await new_session(client)

    responses = await asyncio.gather(
        *(append(client, sid, f"m{i}") for i in range(15) for sid in (first, second))
    )

    assert all(r.status_code == 201 for r in responses)
    for session_id in (first, second):
        seqs = sorted(r.json()["seq"] for r in responses if r.json()["session_id"] == session_id)
        assert seqs == list(range(1, 16))
        assert [i["seq"] for i in await all_items(client, session_id)] == list(range(1, 16))
        assert (await client.get(f"/sessions/{session_id}")).json()["item_count"] == 15
