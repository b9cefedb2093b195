from __future__ import annotations

import httpx

PROBLEM = "application/problem+json"


async def test_create_session_returns_201_with_defaults(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions", json={})

    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("ses_")
    assert body["title"] is None
    assert body["metadata"] == {}
    assert body["item_count"] == 0
    assert body["turn_count"] == 0
    assert body["created_at"].endswith("Z")


async def test_create_session_keeps_given_fields(client: httpx.AsyncClient) -> None:
    payload = {
        "title": "Refactor",
        "system_prompt": "You are careful.",
        "model": "claude-x",
        "metadata": {"ticket": 42, "tags": ["a"]},
    }
    created = (await client.post("/sessions", json=payload)).json()
    fetched = (await client.get(f"/sessions/{created['id']}")).json()

    for key, value in payload.items():
        assert fetched[key] == value


async def test_create_session_names_the_invalid_field(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions", json={"title": "x" * 501})

    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"] == "urn:strata:problem:validation-error"
    assert "title" in problem["detail"]
    assert problem["errors"][0]["loc"] == ["body", "title"]


async def test_create_session_rejects_unknown_fields(client: httpx.AsyncClient) -> None:
    response = await client.post("/sessions", json={"titel": "typo"})

    assert response.status_code == 422
    assert "titel" in response.json()["detail"]


async def test_create_session_rejects_malformed_json(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/sessions", content=b"{not json", headers={"content-type": "application/json"}
    )

    assert response.status_code == 422
    assert response.headers["content-type"] == PROBLEM


async def test_get_unknown_session_is_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_missing")

    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["type"] == "urn:strata:problem:not-found"


async def test_list_sessions_is_newest_first_and_paginates(client: httpx.AsyncClient) -> None:
    ids = [(await client.post("/sessions", json={"title": str(i)})).json()["id"] for i in range(5)]

    first = (await client.get("/sessions", params={"limit": 2})).json()
    second = (
        await client.get("/sessions", params={"limit": 2, "after": first["next_cursor"]})
    ).json()
    third = (
        await client.get("/sessions", params={"limit": 2, "after": second["next_cursor"]})
    ).json()

    seen = [s["id"] for page in (first, second, third) for s in page["data"]]
    assert seen == list(reversed(ids))
    assert third["next_cursor"] is None


async def test_list_sessions_rejects_a_bad_limit(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions", params={"limit": 0})

    assert response.status_code == 422
    assert "limit" in response.json()["detail"]


async def test_patch_session_changes_only_sent_fields(client: httpx.AsyncClient) -> None:
    created = (await client.post("/sessions", json={"title": "old", "metadata": {"a": 1}})).json()

    renamed = await client.patch(f"/sessions/{created['id']}", json={"title": "new"})
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "new"
    assert renamed.json()["metadata"] == {"a": 1}

    retagged = (
        await client.patch(f"/sessions/{created['id']}", json={"metadata": {"b": 2}})
    ).json()
    assert retagged["title"] == "new"
    assert retagged["metadata"] == {"b": 2}
    assert retagged["updated_at"] >= created["updated_at"]


async def test_patch_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    response = await client.patch("/sessions/ses_missing", json={"title": "x"})

    assert response.status_code == 404


async def test_patch_session_rejects_invalid_fields(client: httpx.AsyncClient) -> None:
    created = (await client.post("/sessions", json={})).json()

    response = await client.patch(f"/sessions/{created['id']}", json={"model": "not-patchable"})

    assert response.status_code == 422
