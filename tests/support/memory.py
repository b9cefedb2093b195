"""Helpers for the layered-memory tests: synthetic Claude Code transcripts, hook posts,
apps with their own settings, and snapshots of the memory tables."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import func
from sqlmodel import col, select

from app.db.engine import Database
from app.db.models import Item, MemoryDetail, MemoryTurn, Session

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TRANSCRIPTS = FIXTURES / "claude-code"
HOOK_PAYLOADS = FIXTURES / "claude-code-hooks"
SUMMARY_MODEL = "claude-haiku-4-5-20251001"


def hook_payload(name: str, **overrides: Any) -> dict[str, Any]:
    """A documented hook payload (tests/fixtures/claude-code-hooks/<name>.json), amended."""
    payload = json.loads((HOOK_PAYLOADS / f"{name}.json").read_text())
    assert isinstance(payload, dict)
    payload = copy.deepcopy(payload)
    payload.update(overrides)
    return payload


def real_transcript(name: str) -> str:
    return (TRANSCRIPTS / name).read_text(encoding="utf-8")


def clock(moment: datetime | str) -> str:
    """`HH:MM:SS` in UTC (the default display zone), as the memory block shows it."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    return moment.astimezone(UTC).strftime("%H:%M:%S")


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class Transcript:
    """A Claude Code transcript (JSONL) written turn by turn, with chosen timestamps."""

    session_id: str
    cwd: str = "/work/project"
    lines: list[str] = field(default_factory=list)
    _n: int = 0
    _parent: str | None = None

    def _entry(self, kind: str, at: datetime, **fields: Any) -> dict[str, Any]:
        self._n += 1
        uuid = f"{self.session_id}-{self._n:05d}"
        entry = {
            "parentUuid": self._parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.0.76",
            "type": kind,
            "uuid": uuid,
            "timestamp": iso(at),
            **fields,
        }
        self._parent = uuid
        return entry

    def add(self, entry: dict[str, Any]) -> None:
        self.lines.append(json.dumps(entry, ensure_ascii=False))

    def user(self, at: datetime, content: str | list[Any]) -> None:
        self.add(self._entry("user", at, message={"role": "user", "content": content}))

    def assistant(self, at: datetime, *blocks: dict[str, Any]) -> None:
        message = {
            "id": f"msg_{self.session_id}_{self._n + 1:05d}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": list(blocks),
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        self.add(self._entry("assistant", at, message=message))

    def turn(
        self,
        ended_at: datetime,
        user: str,
        assistant: str,
        *,
        tool: tuple[str, dict[str, Any], str] | None = None,
    ) -> datetime:
        """A user prompt, optionally a tool call and its result, then the reply ending at
        `ended_at` (the turn's stable time); returns `ended_at`."""
        start = ended_at - timedelta(seconds=10)
        self.user(start, user)
        if tool is not None:
            name, tool_input, output = tool
            tool_id = f"toolu_{self.session_id}_{self._n + 1:05d}"
            self.assistant(
                start + timedelta(seconds=2),
                {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input},
            )
            self.user(
                start + timedelta(seconds=4),
                [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
            )
        self.assistant(ended_at, {"type": "text", "text": assistant})
        return ended_at

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def many_turns(
    session_id: str, count: int, start: datetime, *, cwd: str = "/work/project", pad: int = 0
) -> tuple[Transcript, list[datetime]]:
    """`count` turns a minute apart; turn i says `question <i>` / `answer <i>` (1-based)."""
    transcript = Transcript(session_id, cwd=cwd)
    padding = " lorem ipsum" * pad
    times = [
        transcript.turn(
            start + timedelta(minutes=i),
            f"question {i + 1:02d}:{padding}",
            f"answer {i + 1:02d}:{padding}",
        )
        for i in range(count)
    ]
    return transcript, times


async def post_hook(client: httpx.AsyncClient, payload: dict[str, Any]) -> httpx.Response:
    return await client.post("/hooks/claude-code", json=payload)


async def stop(
    client: httpx.AsyncClient,
    session_id: str,
    transcript: str,
    *,
    cwd: str = "/work/project",
    **extra: Any,
) -> httpx.Response:
    """POST a Stop hook with these transcript lines; asserts it was taken."""
    payload = hook_payload("stop", session_id=session_id, cwd=cwd, transcript=transcript, **extra)
    response = await post_hook(client, payload)
    assert response.status_code == 200, response.text
    return response


async def import_session(
    client: httpx.AsyncClient, session_id: str, transcript: str, *, cwd: str = "/work/project"
) -> str:
    """Import a transcript through the Stop hook; returns the mirrored Strata session id."""
    response = await stop(client, session_id, transcript, cwd=cwd)
    return response.headers["Strata-Session"]


def database_of(app: FastAPI) -> Database:
    database: Database = app.state.database
    return database


async def memory_rows(app: FastAPI) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every memory turn and detail row, as comparable tuples, in id order."""
    async with database_of(app).read() as db:
        turns = (await db.exec(select(MemoryTurn).order_by(col(MemoryTurn.id)))).all()
        details = (await db.exec(select(MemoryDetail).order_by(col(MemoryDetail.id)))).all()
    return (
        [
            (
                t.id,
                t.session_id,
                t.origin_session_id,
                t.turn,
                t.ended_at,
                t.user_text,
                t.assistant_text,
                t.l1,
                t.l1_fallback,
            )
            for t in turns
        ],
        [(d.id, d.turn_id, d.origin_session_id, d.kind, d.source_id, d.text) for d in details],
    )


async def memory_turns(app: FastAPI, session_id: str) -> list[MemoryTurn]:
    """The memory turns a session owns, oldest first."""
    async with database_of(app).read() as db:
        query = (
            select(MemoryTurn)
            .where(MemoryTurn.session_id == session_id)
            .order_by(col(MemoryTurn.ended_at))
        )
        return list((await db.exec(query)).all())


async def row_counts(app: FastAPI) -> dict[str, int]:
    counts: dict[str, int] = {}
    async with database_of(app).read() as db:
        for model in (Session, Item, MemoryTurn, MemoryDetail):
            query = select(func.count()).select_from(model)
            counts[model.__name__] = int((await db.exec(query)).one())
    return counts


async def sessions_with_parent(app: FastAPI, parent_id: str) -> list[Session]:
    async with database_of(app).read() as db:
        query = select(Session).where(Session.parent_session_id == parent_id)
        return list((await db.exec(query)).all())


async def jobs_of(client: httpx.AsyncClient, session_id: str, kind: str) -> list[dict[str, Any]]:
    response = await client.get("/jobs", params={"session_id": session_id})
    assert response.status_code == 200, response.text
    return [j for j in response.json()["data"] if j["kind"] == kind]
