"""Full-text search of memory over REST: ranked hits of L1/L2 and L3, tenant sealed,
filtered by project and time, a session's chain, and queries that are never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from app.db.repositories.memory import Holder, MemoryRepository
from tests.support.apps import serve
from tests.support.memory import Transcript, database_of, import_session, stop

T0 = datetime(2026, 4, 16, 9, 0, tzinfo=UTC)
ACME = {"Authorization": "Bearer key-a"}
GLOBEX = {"Authorization": "Bearer key-b"}


@pytest.fixture
async def keyed(make_settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Two tenants: acme (key-a) and globex (key-b)."""
    async with serve(make_settings(api_keys="acme:key-a,globex:key-b")) as (_, c):
        yield c


async def _import(
    client: httpx.AsyncClient,
    cc_id: str,
    turns: list[tuple[str, str]],
    *,
    cwd: str = "/work/project",
    start: datetime = T0,
    tool: tuple[str, dict[str, Any], str] | None = None,
    headers: dict[str, str] | None = None,
) -> str:
    transcript = Transcript(cc_id, cwd=cwd)
    for n, (user, assistant) in enumerate(turns):
        transcript.turn(
            start + timedelta(minutes=n), user, assistant, tool=tool if n == 0 else None
        )
    if headers is None:
        return await import_session(client, cc_id, transcript.text(), cwd=cwd)
    client.headers.update(headers)
    try:
        return (await stop(client, cc_id, transcript.text(), cwd=cwd)).headers["Strata-Session"]
    finally:
        for name in headers:
            del client.headers[name]


async def _search(client: httpx.AsyncClient, **params: Any) -> list[dict[str, Any]]:
    response = await client.get("/memory/search", params=params)
    assert response.status_code == 200, response.text
    hits: list[dict[str, Any]] = response.json()["data"]
    return hits


async def test_a_search_finds_the_turn_that_said_the_words(client: httpx.AsyncClient) -> None:
    session = await _import(
        client,
        "cc-1",
        [("which database?", "We decided on PostgreSQL for the queue."), ("hi", "hello")],
    )

    hits = await _search(client, q="decided postgresql")

    assert [(h["session_id"], h["turn"], h["layer"]) for h in hits] == [(session, 1, "L2")]
    assert hits[0]["line"] == "[assistant]: We decided on PostgreSQL for the queue."
    assert hits[0]["time"] == "2026-04-16 09:00:00"


async def test_a_turn_saying_the_word_more_often_ranks_first(client: httpx.AsyncClient) -> None:
    await _import(
        client,
        "cc-1",
        [
            ("tell me about caching", "caching once, among many other words of this answer"),
            ("caching?", "caching caching caching, caching all the way"),
        ],
    )

    hits = await _search(client, q="caching")

    assert [h["turn"] for h in hits] == [2, 1]


async def test_a_long_turn_saying_the_word_more_often_ranks_before_a_short_one(
    client: httpx.AsyncClient,
) -> None:
    """Both databases rank by how often a turn holds the words, not by the words' rarity
    across the whole index nor the turn's length (FTS5's bm25, which costs a count of
    every row holding each term in every query)."""
    long = "caching here, caching there, caching everywhere; " + "other words " * 60
    await _import(client, "cc-1", [("a", long), ("b", "caching twice: caching")])

    hits = await _search(client, q="caching")

    assert [h["turn"] for h in hits] == [1, 2]


async def test_a_tool_output_is_found_as_l3(client: httpx.AsyncClient) -> None:
    tool = ("Bash", {"command": "ls"}, "zanzibar.txt\nother.txt")
    await _import(client, "cc-1", [("list files", "done")], tool=tool)

    hits = await _search(client, q="zanzibar")

    assert [(h["layer"], h["line"]) for h in hits] == [("L3", "[tool_output Bash]: zanzibar.txt")]


async def test_a_phrase_matches_only_its_words_in_order(client: httpx.AsyncClient) -> None:
    await _import(client, "cc-1", [("a", "blue whale"), ("b", "whale, blue")])

    hits = await _search(client, q='"blue whale"')

    assert [h["turn"] for h in hits] == [1]


@pytest.mark.parametrize(
    "query",
    [
        "it's \"unclosed",
        "NEAR(a b) OR NOT c*",
        "a & b | !c <-> d",
        "col:value ^start -minus (paren",
        '""" \'\' ;-- table',
        "don't",
    ],
)
async def test_query_syntax_is_never_an_error(client: httpx.AsyncClient, query: str) -> None:
    await _import(client, "cc-1", [("don't stop", "it's fine")])

    response = await client.get("/memory/search", params={"q": query})

    assert response.status_code == 200, response.text


async def test_an_apostrophe_matches_the_word_it_is_in(client: httpx.AsyncClient) -> None:
    await _import(client, "cc-1", [("don't stop", "fine"), ("do it", "fine")])

    hits = await _search(client, q="don't")

    assert [h["turn"] for h in hits] == [1]


async def test_a_query_without_a_word_is_422(client: httpx.AsyncClient) -> None:
    response = await client.get("/memory/search", params={"q": "!!! ---"})

    assert response.status_code == 422
    assert response.headers["content-type"] == "application/problem+json"


async def test_another_tenants_memory_is_never_found(keyed: httpx.AsyncClient) -> None:
    await _import(keyed, "cc-a", [("q", "the acme plan")], headers=ACME)
    await _import(keyed, "cc-b", [("q", "the globex plan")], headers=GLOBEX)

    response = await keyed.get("/memory/search", params={"q": "plan"}, headers=GLOBEX)

    assert [h["line"] for h in response.json()["data"]] == ["[assistant]: the globex plan"]


async def test_a_search_without_a_key_is_401(keyed: httpx.AsyncClient) -> None:
    response = await keyed.get("/memory/search", params={"q": "plan"})

    assert response.status_code == 401


async def test_a_project_keeps_its_own_sessions_and_those_of_folders_inside(
    client: httpx.AsyncClient,
) -> None:
    await _import(client, "cc-1", [("q", "shared word one")], cwd="/work/alpha")
    await _import(client, "cc-2", [("q", "shared word two")], cwd="/work/alpha/sub")
    await _import(client, "cc-3", [("q", "shared word three")], cwd="/work/beta")

    from_root = await _search(client, q="shared", project="/work/alpha")
    from_inside = await _search(client, q="shared", project="/work/beta/src/")

    assert sorted(h["line"] for h in from_root) == [
        "[assistant]: shared word one",
        "[assistant]: shared word two",
    ]
    assert [h["line"] for h in from_inside] == ["[assistant]: shared word three"]


async def test_since_and_until_keep_the_turns_that_ended_between(
    client: httpx.AsyncClient,
) -> None:
    await _import(client, "cc-1", [("a", "marker"), ("b", "marker"), ("c", "marker")])

    hits = await _search(
        client,
        q="marker",
        since=(T0 + timedelta(minutes=1)).isoformat(),
        until=(T0 + timedelta(minutes=2)).isoformat(),
    )

    assert [h["turn"] for h in hits] == [2]


async def test_limit_is_capped_by_the_setting(make_settings: Any) -> None:
    async with serve(make_settings(memory_search_limit_max=2)) as (_, client):
        await _import(client, "cc-1", [("a", "word"), ("b", "word"), ("c", "word")])

        hits = await _search(client, q="word", limit=50)

    assert len(hits) == 2


async def test_a_chain_search_keeps_the_chain_of_the_session(client: httpx.AsyncClient) -> None:
    first = await _import(client, "cc-1", [("a", "keyword early")], cwd="/work/alpha")
    second = await _import(
        client, "cc-2", [("b", "keyword later")], cwd="/work/alpha", start=T0 + timedelta(hours=1)
    )
    await _import(client, "cc-3", [("c", "keyword elsewhere")], cwd="/work/beta")

    response = await client.get(f"/sessions/{second}/memory/search", params={"q": "keyword"})

    hits = response.json()["data"]
    assert [(h["session_id"], h["line"]) for h in hits] == [
        (second, "[assistant]: keyword later"),
        (first, "[assistant]: keyword early"),
    ]


async def test_a_chain_search_of_an_unknown_session_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_nope/memory/search", params={"q": "x"})

    assert response.status_code == 404


async def test_a_summary_written_later_is_found_as_l1(app: Any, client: httpx.AsyncClient) -> None:
    await _import(client, "cc-1", [("a", "plain words")])
    database = database_of(app)
    async with database.read() as db:
        (turn,) = await MemoryRepository(db).newest_turns(
            [Holder((await client.get("/sessions")).json()["data"][0]["id"])], limit=1, before=None
        )

    turn_id = turn.id
    assert turn_id is not None
    await database.write(lambda db: MemoryRepository(db).set_l1(turn_id, "walrus", fallback=False))

    hits = await _search(client, q="walrus")
    assert [(h["layer"], h["line"]) for h in hits] == [("L1", "[summary]: walrus")]


async def test_a_deleted_sessions_memory_is_no_longer_found(client: httpx.AsyncClient) -> None:
    session = await _import(client, "cc-1", [("a", "ephemeral")], tool=("Bash", {}, "ephemeral"))

    assert (await client.delete(f"/sessions/{session}")).status_code == 204

    assert await _search(client, q="ephemeral") == []


async def test_past_the_rank_window_the_newest_matches_are_ranked(make_settings: Any) -> None:
    async with serve(make_settings(memory_search_rank_window=2)) as (_, client):
        await _import(
            client,
            "cc-1",
            [("a", "word word word word"), ("b", "word and more"), ("c", "word and more")],
        )

        hits = await _search(client, q="word")

    assert sorted(h["turn"] for h in hits) == [2, 3]
