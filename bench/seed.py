"""A session with a long log, written fast: what the benchmarks measure against.

The log is realistic chat: turns of user message → assistant tool call → tool result
→ assistant answer, four items a turn, split into segments the way compaction
splits them. Rows go in with one Core `executemany`, not through the services:
building a 100,000-item log one append at a time would take minutes and measure
nothing the benchmark is about.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import insert, update
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Item, Session
from app.db.types import utcnow
from app.domain.items import (
    AssistantMessage,
    ItemPayload,
    Origin,
    TextBlock,
    ToolResult,
    ToolUseBlock,
    dump_payload,
    tool_name_of,
    user_text,
)
from app.services.sessions import create_session

TENANT = "default"
TURN_ITEMS = 4


def _turn(turn: int) -> list[tuple[ItemPayload, Origin]]:
    call = ToolUseBlock(id=f"toolu_{turn:07d}", name="CurrentTime", input={})
    return [
        (user_text(f"Question {turn}: what should happen next with part {turn}?"), Origin.user),
        (AssistantMessage(content=[TextBlock(text="Let me check."), call]), Origin.llm),
        (
            ToolResult(tool_use_id=call.id, content="2026-12-02T13:00:00Z", name="CurrentTime"),
            Origin.system,
        ),
        (
            AssistantMessage(content=[TextBlock(text=f"Part {turn} is done; next is {turn + 1}.")]),
            Origin.llm,
        ),
    ]


async def session_with_log(
    database: Database, items: int, segment_items: int, task_ops: int = 0, tenant: str = TENANT
) -> str:
    """A new session whose log holds `items` chat items, the last `segment_items` of them
    in its current segment (the rest in earlier, compacted segments).

    With `task_ops`, the log starts with that many task operations (TaskCreate /
    TaskUpdate results and REST task events, as `bench.replay` writes them) in a
    compacted segment of their own: the task list is rebuilt from the log, so a turn
    in such a session shows what a long task history costs each step. With no
    `segment_items`, the current segment is empty, as a newly opened one is: a turn's
    requests then hold only what the turn adds.

    The session is `tenant`'s."""
    session = await database.write(lambda db: create_session(db, tenant, title=f"{items} items"))
    session_id = session.id
    start = utcnow() - timedelta(seconds=items)
    rows: list[dict[str, Any]] = []
    if task_ops:
        from bench.replay import task_only_log

        rows = task_only_log(session_id, task_ops)
        for row in rows:
            row["segment"] = 1
            row["created_at"] = start - timedelta(seconds=task_ops - row["seq"] + 1)
    first = len(rows)
    turns = -(-items // TURN_ITEMS)
    earlier = max(items - segment_items, 0)
    shift = 1 if task_ops else 0  # the task operations' segment comes first
    for turn in range(1, turns + 1):
        for payload, origin in _turn(turn):
            n = len(rows) - first + 1
            if n > items:
                break
            rows.append(
                {
                    "session_id": session_id,
                    "seq": len(rows) + 1,
                    "turn": turn,
                    "segment": shift + 1 + (n - 1) * 4 // max(earlier, 1),
                    "kind": payload.kind,
                    "origin": origin.value,
                    "tool_name": tool_name_of(payload),
                    "payload": dump_payload(payload),
                    "created_at": start + timedelta(seconds=n),
                }
            )
    # earlier segments are numbered 1..4 (after the task segment) above; the current one
    # must be the highest
    current = shift + 5 if earlier else (2 if task_ops else 0)
    for row in rows[first:]:
        if row["seq"] - first > earlier:
            row["segment"] = current

    async def fill(db: AsyncSession) -> None:
        # Core statements on the unit's connection (SQLModel's session deprecates `execute`)
        connection = await db.connection()
        for chunk in range(0, len(rows), 5000):
            await connection.execute(insert(Item), rows[chunk : chunk + 5000])
        await connection.execute(
            update(Session)
            .where(Session.id == session_id)  # type: ignore[arg-type]
            .values(last_seq=len(rows), current_turn=turns, current_segment=current)
        )

    await database.write(fill)
    return session_id
