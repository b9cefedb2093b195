"""GET /sessions/{id}/turns: the chain's turns newest first, each with the time the detail
look-up takes and a short preview."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.support.apps import serve
from tests.support.memory import Transcript, clock, import_session, many_turns

START = datetime(2026, 3, 4, 14, 20, 0, tzinfo=UTC)


async def test_turns_are_newest_first_with_their_detail_time(client: httpx.AsyncClient) -> None:
    transcript, times = many_turns("cc-timeline", 3, START)
    session_id = await import_session(client, "cc-timeline", transcript.text())

    body = (await client.get(f"/sessions/{session_id}/turns")).json()

    assert [t["time"] for t in body["data"]] == [clock(t) for t in reversed(times)]
    assert [t["preview"] for t in body["data"]] == [
        "question 03:",
        "question 02:",
        "question 01:",
    ]
    assert {t["session_id"] for t in body["data"]} == {session_id}
    assert body["next_cursor"] is None
    newest = body["data"][0]
    detail = (await client.get(f"/sessions/{session_id}/detail/{newest['time']}")).json()
    assert detail["data"][0]["turn"] == newest["turn"]


async def test_turns_page_by_cursor_without_gaps_or_repeats(client: httpx.AsyncClient) -> None:
    transcript, times = many_turns("cc-pages", 5, START)
    session_id = await import_session(client, "cc-pages", transcript.text())

    seen: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"after": after} if after else {})}
        page = (await client.get(f"/sessions/{session_id}/turns", params=params)).json()
        seen.extend(t["time"] for t in page["data"])
        after = page["next_cursor"]
        if after is None:
            break

    assert seen == [clock(t) for t in reversed(times)]


async def test_turns_at_the_same_moment_page_apart(client: httpx.AsyncClient) -> None:
    transcript = Transcript("cc-same")
    for n in range(3):  # three turns ending in the same microsecond
        transcript.turn(START, f"same {n}", f"answer {n}")
    session_id = await import_session(client, "cc-same", transcript.text())

    first = (await client.get(f"/sessions/{session_id}/turns", params={"limit": 2})).json()
    rest = (
        await client.get(f"/sessions/{session_id}/turns", params={"after": first["next_cursor"]})
    ).json()

    turns = [t["turn"] for t in first["data"] + rest["data"]]
    assert sorted(turns) == sorted(set(turns)) and len(turns) == 3


async def test_turns_include_the_predecessor_chain(client: httpx.AsyncClient) -> None:
    transcript, times = many_turns("cc-before", 2, START)
    predecessor = await import_session(client, "cc-before", transcript.text())
    created = await client.post("/sessions", json={"continues_from": predecessor})
    successor = created.json()["id"]

    body = (await client.get(f"/sessions/{successor}/turns")).json()

    assert [(t["session_id"], t["time"]) for t in body["data"]] == [
        (predecessor, clock(times[1])),
        (predecessor, clock(times[0])),
    ]


async def test_a_preview_is_the_l1_summary_when_there_is_one_and_is_cut(
    make_settings: Any,
) -> None:
    long_question = "why " * 100
    transcript = Transcript("cc-long")
    transcript.turn(START, long_question, "because")
    async with serve(make_settings(turn_preview_chars=40)) as (_, client):
        session_id = await import_session(client, "cc-long", transcript.text())
        body = (await client.get(f"/sessions/{session_id}/turns")).json()

    preview = body["data"][0]["preview"]
    assert len(preview) == 40
    assert preview.startswith("why why") and preview.endswith("…")


async def test_turns_times_are_in_the_display_zone(make_settings: Any) -> None:
    transcript = Transcript("cc-zone")
    transcript.turn(START + timedelta(seconds=5), "hi", "hello")
    async with serve(make_settings(display_timezone="Asia/Tokyo")) as (_, client):
        session_id = await import_session(client, "cc-zone", transcript.text())
        body = (await client.get(f"/sessions/{session_id}/turns")).json()

    assert body["data"][0]["time"] == "23:20:05"


async def test_a_malformed_cursor_is_422(client: httpx.AsyncClient) -> None:
    session_id = (await client.post("/sessions", json={})).json()["id"]

    for cursor in ("abc", "1.2.3", f"{'9' * 19}.1"):
        response = await client.get(f"/sessions/{session_id}/turns", params={"after": cursor})
        assert response.status_code == 422, (cursor, response.text)


async def test_a_cursor_past_the_year_9999_pages_from_the_newest_turn(
    client: httpx.AsyncClient,
) -> None:
    """The cursor's pattern admits 18 digits of microseconds, past what a datetime holds:
    such a cursor is later than every turn, not a 422 (the request is schema-valid)."""
    transcript, times = many_turns("cc-far", 2, START)
    session_id = await import_session(client, "cc-far", transcript.text())

    far = f"{'9' * 18}.{'9' * 18}"
    response = await client.get(f"/sessions/{session_id}/turns", params={"after": far})

    assert response.status_code == 200, response.text
    assert [t["time"] for t in response.json()["data"]] == [clock(t) for t in reversed(times)]


async def test_turns_of_an_unknown_session_are_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/sessions/ses_missing/turns")

    assert response.status_code == 404
