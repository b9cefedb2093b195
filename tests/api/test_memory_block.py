"""GET /sessions/{id}/memory within its budget, read newest first from the database.

The block the service reads lazily (newest first, one index range per session, texts cut in
SQL) must equal the block rendered from every turn of the chain at once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel import col, select

from app.db.models import MemoryTurn
from app.memory.render import DetailHint, render_memory_block
from app.memory.render import MemoryTurn as RenderedTurn
from tests.support.apps import serve
from tests.support.memory import Transcript, database_of, import_session, many_turns

T0 = datetime(2026, 4, 14, 9, 0, tzinfo=UTC)


async def _all_turns(app: FastAPI, session_ids: list[str]) -> list[RenderedTurn]:
    async with database_of(app).read() as db:
        query = select(MemoryTurn).where(col(MemoryTurn.session_id).in_(session_ids))
        rows = (await db.exec(query)).all()
    return [RenderedTurn(r.ended_at, r.user_text, r.assistant_text, r.l1) for r in rows]


async def _start(client: httpx.AsyncClient, session_id: str, cwd: str) -> str:
    payload = {"hook_event_name": "SessionStart", "session_id": session_id, "cwd": cwd}
    response = await client.post("/hooks/claude-code", json={**payload, "source": "startup"})
    assert response.status_code == 200, response.text
    return response.headers["Strata-Session"]


async def _memory(client: httpx.AsyncClient, session_id: str, **params: Any) -> dict[str, Any]:
    response = await client.get(f"/sessions/{session_id}/memory", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
async def quiet(make_settings: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """An app whose runner does not run: no summary job changes a turn between two reads."""
    async with serve(make_settings(run_worker_in_server=False)) as served:
        yield served


@pytest.fixture
async def interleaved(
    quiet: tuple[FastAPI, httpx.AsyncClient],
) -> tuple[FastAPI, httpx.AsyncClient, str, list[str]]:
    """Three sessions of /work/mix whose turns interleave in time (two of them merged),
    and a fourth that continues them; (app, client, the fourth's id, the three ids)."""
    app, client = quiet
    ids = []
    for n in range(3):
        transcript = Transcript(f"cc-mix-{n}", cwd="/work/mix")
        for i in range(30):
            at = T0 + timedelta(minutes=3 * i + n)
            transcript.turn(at, f"q{n}-{i} " + "u" * (40 * (i % 7)), f"a{n}-{i} " + "v" * (90 * i))
        ids.append(await import_session(client, f"cc-mix-{n}", transcript.text(), cwd="/work/mix"))
    merged = await client.post(f"/sessions/{ids[1]}/merge", json={"into": ids[0]})
    assert merged.status_code == 200, merged.text
    head = await _start(client, "cc-mix-next", "/work/mix")
    return app, client, head, ids


Interleaved = tuple[FastAPI, httpx.AsyncClient, str, list[str]]


async def test_the_block_read_newest_first_equals_the_block_of_every_turn(
    interleaved: Interleaved,
) -> None:
    app, client, head, ids = interleaved
    every = await _all_turns(app, ids)
    for max_chars in (1_000, 4_000, 9_500, 60_000):
        expected = render_memory_block(
            every,
            window=20,
            tz=ZoneInfo("UTC"),
            max_chars=max_chars,
            hint=DetailHint.sc_detail,
        )

        memory = await _memory(client, head, max_chars=max_chars)

        assert memory["text"] == expected.text, max_chars
        assert memory["counts"] == vars(expected.counts)


async def test_the_block_is_within_the_default_budget_and_counts_what_it_leaves_out(
    interleaved: Interleaved,
) -> None:
    _, client, head, _ = interleaved

    memory = await _memory(client, head)

    counts = memory["counts"]
    assert len(memory["text"]) <= 9_500
    assert counts["total_turns"] == 90
    assert counts["omitted_turns"] == 90 - counts["l2_turns"] - counts["l1_turns"] > 0
    assert f"{counts['omitted_turns']} earlier turns are not shown here" in memory["text"]


async def test_a_budget_outside_its_bounds_is_422(interleaved: Interleaved) -> None:
    _, client, head, _ = interleaved

    response = await client.get(f"/sessions/{head}/memory", params={"max_chars": 999})

    assert response.status_code == 422


async def test_a_long_chain_is_counted_from_turn_numbers_without_reading_it(
    client: httpx.AsyncClient,
) -> None:
    transcript, _ = many_turns("cc-long", 300, T0, cwd="/work/long", pad=20)
    await import_session(client, "cc-long", transcript.text(), cwd="/work/long")
    head = await _start(client, "cc-long-next", "/work/long")

    memory = await _memory(client, head, max_chars=2_000)

    counts = memory["counts"]
    assert counts["total_turns"] == 300
    assert counts["l2_turns"] + counts["l1_turns"] < 30
    assert counts["omitted_turns"] == 300 - counts["l2_turns"] - counts["l1_turns"]


async def test_the_session_start_context_is_the_budgeted_block(
    client: httpx.AsyncClient,
) -> None:
    transcript, _ = many_turns("cc-big", 120, T0, cwd="/work/big", pad=80)
    await import_session(client, "cc-big", transcript.text(), cwd="/work/big")
    payload = {"hook_event_name": "SessionStart", "session_id": "cc-big-2", "cwd": "/work/big"}

    response = await client.post("/hooks/claude-code", json={**payload, "source": "startup"})

    context = response.json()["hookSpecificOutput"]["additionalContext"]
    assert 9_000 < len(context) <= 9_500  # under Claude Code's 10,000-character inline limit
    assert "/sc-detail " in context.splitlines()[-1]


@pytest.mark.parametrize(
    ("kit", "lookup"),
    [
        ({}, "`/sc-detail 09:"),
        ({"kit_mode": "settings"}, "`/sc-detail 09:"),
        ({"kit_mode": "plugin"}, "`/strata:sc-detail 09:"),
        ({"kit_mode": "settings", "kit_mcp": True}, "`mcp__strata__memory_detail` with time"),
        (
            {"kit_mode": "plugin", "kit_mcp": True},
            "`mcp__plugin_strata_strata__memory_detail` with time",
        ),
    ],
)
async def test_the_session_start_block_names_the_look_up_the_hook_says_it_has(
    client: httpx.AsyncClient, kit: dict[str, object], lookup: str
) -> None:
    transcript, _ = many_turns("cc-kit", 3, T0, cwd="/work/kit")
    await import_session(client, "cc-kit", transcript.text(), cwd="/work/kit")
    payload = {"hook_event_name": "SessionStart", "session_id": "cc-kit-2", "cwd": "/work/kit"}

    response = await client.post("/hooks/claude-code", json={**payload, **kit})

    context = response.json()["hookSpecificOutput"]["additionalContext"]
    assert lookup in context.splitlines()[-1]


@pytest.mark.parametrize(
    ("kit", "lookup"),
    [
        ({}, "`/sc-detail 09:"),
        ({"kit_mode": "plugin"}, "`/strata:sc-detail 09:"),
        ({"kit_mcp": "true"}, "`mcp__strata__memory_detail` with time"),
        (
            {"kit_mode": "plugin", "kit_mcp": "true"},
            "`mcp__plugin_strata_strata__memory_detail` with time",
        ),
    ],
)
async def test_a_claude_code_sessions_block_over_rest_names_the_look_up_asked_for(
    client: httpx.AsyncClient, kit: dict[str, str], lookup: str
) -> None:
    transcript, _ = many_turns("cc-rest", 3, T0, cwd="/work/rest")
    await import_session(client, "cc-rest", transcript.text(), cwd="/work/rest")
    session_id = await _start(client, "cc-rest-2", "/work/rest")

    block = await _memory(client, session_id, **kit)

    assert lookup in block["text"].splitlines()[-1]
