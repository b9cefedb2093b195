"""A job's closing write (its status, its memory, the summary job its end queues) is one
unit of work, run once: prepared statements where they serve, the ORM where a part needs
it, in the same transaction. It is never tried one way and run again another."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database
from app.db.models import Job
from app.services.chat import IfBusy, send_message
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, reply, tool_use
from tests.support.chat import TERMINAL, wait_until
from tests.support.runners import agent_settings, enqueue_turn, has_status, job_of, running

pytestmark = pytest.mark.timeout(60)


def record_paths(database: Database) -> list[tuple[str, str]]:
    """Every write unit `database` runs from now on: the method it took and its work's
    name."""
    paths: list[tuple[str, str]] = []

    def recorded(method: str) -> Callable[..., Awaitable[Any]]:
        inner = getattr(database, method)

        async def unit(work: Callable[[AsyncSession], Awaitable[Any]]) -> Any:
            name = getattr(work, "__qualname__", repr(work)).rsplit(".", 1)[-1]
            paths.append((method, name))
            return await inner(work)

        return unit

    for method in ("write", "write_statements"):
        setattr(database, method, recorded(method))
    return paths


async def test_a_tool_using_turn_whose_end_queues_a_summary_ends_in_one_unit(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Past the memory's L2 window the second turn's end also queues the chain's summary
    job (an ORM row); its end is still one unit."""
    settings = agent_settings(
        make_settings, fake_llm, memory_l2_window_turns=1, job_heartbeat_seconds=3600.0
    )
    fake_llm.reply("First.")
    fake_llm.reply(tool_use("current_time", {}))
    fake_llm.always(lambda body: reply("Done."))  # the second turn's answer, the summary
    async with runtime(settings, with_runner=False) as parts:
        first_id = await enqueue_turn(parts.database, "One.")
        async with running(parts, settings, "runner"):
            await wait_until(lambda: has_status(parts.database, first_id, TERMINAL), seconds=30)
            session_id = (await job_of(parts.database, first_id)).session_id

            async def second_turn(db: AsyncSession) -> str:
                return (await send_message(db, "acme", session_id, "Two.", IfBusy.reject)).id

            second_id = await parts.database.write(second_turn)
            paths = record_paths(parts.database)
            await wait_until(lambda: has_status(parts.database, second_id, TERMINAL), seconds=30)
        async with parts.database.read() as db:
            query = select(Job.kind).where(col(Job.session_id) == session_id)
            kinds = sorted((await db.exec(query)).all())

    assert kinds == ["chat", "chat", "summary"]  # the second end queued it
    claims = [n for n, path in enumerate(paths) if path[1] == "claim_and_start"]
    turn = paths[: claims[1]] if len(claims) > 1 else paths  # up to the summary's claim
    assert [path for path in turn if path[1] == "finish"] == [("write_statements", "finish")]
