"""Memory search in the console, without a browser: the tenant-wide page and the session
page's search box answer hits that link to their turn, escaped, and say what a query that
cannot match is."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

import httpx

from tests.support.memory import Transcript, import_session

T0 = datetime(2026, 4, 16, 9, 0, tzinfo=UTC)
HTMX = {"HX-Request": "true"}


async def _remembered(client: httpx.AsyncClient, cc_id: str, words: str) -> str:
    transcript = Transcript(cc_id)
    transcript.turn(T0, words, "Noted.")
    return await import_session(client, cc_id, transcript.text())


async def test_the_memory_page_links_each_hit_to_its_turn(client: httpx.AsyncClient) -> None:
    session_id = await _remembered(client, "cc-1", "rename the zebra parser")

    page = await client.get("/console/memory", params={"q": "zebra"})

    assert page.status_code == 200
    link = f'href="/console/sessions/{session_id}?time=2026-04-16%2009%3A00%3A00#detail"'
    assert link in page.text
    assert "rename the zebra parser" in page.text


async def test_the_memory_page_escapes_what_a_hit_shows(client: httpx.AsyncClient) -> None:
    await _remembered(client, "cc-1", "why does <script>alert(1)</script> zebra run?")

    page = await client.get("/console/memory", params={"q": "zebra"})

    assert "<script>alert(1)</script>" not in page.text
    assert escape("<script>alert(1)</script>", quote=False) in page.text


async def test_a_query_without_a_letter_or_digit_is_said_on_the_page(
    client: httpx.AsyncClient,
) -> None:
    page = await client.get("/console/memory", params={"q": "!!!"})

    assert page.status_code == 200
    assert 'class="error"' in page.text


async def test_the_session_search_box_answers_the_chains_hits_as_a_fragment(
    client: httpx.AsyncClient,
) -> None:
    await _remembered(client, "cc-1", "rename the zebra parser")
    later = await _remembered(client, "cc-2", "and the okapi lexer")

    found = await client.get(
        f"/console/sessions/{later}/search", params={"q": "zebra"}, headers=HTMX
    )

    assert found.status_code == 200
    assert "rename the zebra parser" in found.text and "<html" not in found.text


async def test_the_session_search_without_htmx_is_the_page_with_its_hits(
    client: httpx.AsyncClient,
) -> None:
    session_id = await _remembered(client, "cc-1", "rename the zebra parser")

    sent = await client.get(f"/console/sessions/{session_id}/search", params={"q": "zebra"})
    page = await client.get(sent.headers["location"])

    assert sent.status_code == 303
    assert "rename the zebra parser" in page.text
