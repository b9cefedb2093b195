"""U+0000 in what clients send is never a server error.

SQLite stores it as it is; PostgreSQL cannot hold it in `text` or `jsonb`, so there
it is stored as U+FFFD (and a look-up by an id holding it finds nothing).
"""

from __future__ import annotations

import httpx

from tests.conftest import TEST_BACKEND

NUL = "\x00"
STORED = NUL if TEST_BACKEND == "sqlite" else "\ufffd"


async def test_text_and_json_with_nul_are_stored(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/sessions", json={"title": f"a{NUL}b", "metadata": {f"k{NUL}": [f"v{NUL}"]}}
    )
    assert created.status_code == 201, created.text
    session_id = created.json()["id"]
    appended = await client.post(
        f"/sessions/{session_id}/items", json={"kind": "user_message", "text": f"hi{NUL}"}
    )
    assert appended.status_code == 201, appended.text

    session = (await client.get(f"/sessions/{session_id}")).json()
    (item,) = (await client.get(f"/sessions/{session_id}/items")).json()["data"]

    assert session["title"] == f"a{STORED}b"
    assert session["metadata"] == {f"k{STORED}": [f"v{STORED}"]}
    assert item["content"] == [{"type": "text", "text": f"hi{STORED}"}]


async def test_an_id_with_nul_is_not_found(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_%00")

    assert response.status_code == 404
