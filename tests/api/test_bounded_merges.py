"""POST /sessions/{id}/merge of any size: one small transaction decides the merge, the turns
move in bounded chunks after it, and no reader can tell a merge half-way through its moves
from a finished one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.repositories.memory import MemoryRepository
from tests.support.apps import serve
from tests.support.chat import new_session
from tests.support.memory import database_of, import_session, many_turns, memory_turns

A_START = datetime(2026, 3, 5, 8, 0, 0, tzinfo=UTC)
B_START = datetime(2026, 3, 5, 12, 0, 0, tzinfo=UTC)
CHUNK = 3
Work = Callable[[AsyncSession], Awaitable[Any]]


async def _reads(client: httpx.AsyncClient, a: str, b: str, successor: str) -> dict[str, Any]:
    """What readers of the two sessions and of a continuation of the target see."""

    async def get(path: str) -> Any:
        response = await client.get(path)
        return response.status_code, response.json()

    return {
        "successor memory": await get(f"/sessions/{successor}/memory"),
        "memory via a": await get(f"/sessions/{a}/memory"),
        "detail of b": await get(f"/sessions/{b}/detail/00:00-23:59"),
        "detail via a": await get(f"/sessions/{a}/detail/08:00:00-08:59:59"),
        "successor detail": await get(f"/sessions/{successor}/detail/00:00-23:59"),
    }


async def _sessions(client: httpx.AsyncClient) -> tuple[str, str, str]:
    """A with 10 turns (08:00-08:09), B with 2 (12:00-12:01), and a session continuing B."""
    a_lines, _ = many_turns("cc-a", 10, A_START)
    b_lines, _ = many_turns("cc-b", 2, B_START)
    a = await import_session(client, "cc-a", a_lines.text(), cwd="/a")
    b = await import_session(client, "cc-b", b_lines.text(), cwd="/b")
    return a, b, await new_session(client, continues_from=b)


def _spy_moves(monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None) -> list[int]:
    """Record how many turns each move moved; the `fail_at`-th call fails after moving."""
    moved: list[int] = []
    real = MemoryRepository.move_turns

    async def move(self: MemoryRepository, source: str, target: str, limit: int) -> int:
        count = await real(self, source, target, limit)
        moved.append(count)
        if len(moved) == fail_at:
            await self.db.flush()
            raise RuntimeError("the disk filled up between two chunks of the merge")
        return count

    monkeypatch.setattr(MemoryRepository, "move_turns", move)
    return moved


def _after_each_unit(app: FastAPI, then: Callable[[], Awaitable[None]]) -> list[int]:
    """Call `then` after each write unit commits; returns a list the units are counted in."""
    database = database_of(app)
    real = database.write
    units: list[int] = []

    async def write(work: Work) -> Any:
        value = await real(work)
        units.append(1)
        await then()
        return value

    database.write = write  # type: ignore[method-assign]
    return units


async def test_a_large_merge_moves_its_turns_in_chunks_and_reads_as_merged_after_each(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(make_settings(merge_chunk_turns=CHUNK)) as (app, client):
        a, b, successor = await _sessions(client)
        seen: list[dict[str, Any]] = []

        async def look() -> None:
            seen.append(await _reads(client, a, b, successor))

        moved = _spy_moves(monkeypatch)
        units = _after_each_unit(app, look)
        response = await client.post(f"/sessions/{a}/merge", json={"into": b})
        final = await _reads(client, a, b, successor)
        left_in_a = await memory_turns(app, a)
        in_b = await memory_turns(app, b)

    assert response.status_code == 200, response.text
    assert moved == [3, 3, 3, 1]  # ten turns, at most three per transaction
    assert len(units) == len(moved)  # the decision and the first chunk, then one unit each
    assert seen == [final] * len(units)  # between any two chunks, reads are the final ones
    assert (left_in_a, len(in_b)) == ([], 12)
    assert "[08:00:00] [user]: question 01:" in final["successor memory"][1]["text"]
    assert [t["user_text"] for t in final["detail via a"][1]["data"]][-1] == "question 01:"
    assert final["memory via a"][1]["session_id"] == b


async def test_a_merge_stopped_between_chunks_reads_as_merged_and_asking_again_finishes_it(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(make_settings(merge_chunk_turns=CHUNK)) as (app, client):
        a, b, successor = await _sessions(client)
        moved = _spy_moves(monkeypatch, fail_at=2)
        stopped = await client.post(f"/sessions/{a}/merge", json={"into": b})
        half = await _reads(client, a, b, successor)
        left_half_way = len(await memory_turns(app, a))
        elsewhere = await client.post(f"/sessions/{a}/merge", json={"into": successor})
        moved.clear()
        monkeypatch.undo()
        moved = _spy_moves(monkeypatch)
        again = await client.post(f"/sessions/{a}/merge", json={"into": b})
        finished = await _reads(client, a, b, successor)
        left = await memory_turns(app, a)
        session_a = (await client.get(f"/sessions/{a}")).json()

    assert stopped.status_code == 500
    assert left_half_way == 10 - CHUNK  # the decision and the first chunk committed
    assert elsewhere.status_code == 409  # it is merged into b, whatever is left to move
    assert again.status_code == 200, again.text
    assert again.json()["id"] == b
    assert moved == [3, 3, 1]
    assert left == []
    assert half == finished  # nothing a reader sees was half-done
    assert session_a["merged_into"] == b


async def test_a_merge_failing_in_its_deciding_transaction_changes_nothing(
    make_settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(make_settings(merge_chunk_turns=CHUNK)) as (app, client):
        a, b, successor = await _sessions(client)
        before = await _reads(client, a, b, successor)
        moved = _spy_moves(monkeypatch, fail_at=1)
        response = await client.post(f"/sessions/{a}/merge", json={"into": b})
        after = await _reads(client, a, b, successor)
        left = await memory_turns(app, a)
        session_a = (await client.get(f"/sessions/{a}")).json()

    assert response.status_code == 500
    assert moved == [CHUNK]  # moved in the transaction, then rolled back with it
    assert (after, len(left), session_a["merged_into"]) == (before, 10, None)
