"""A job's end claims the next queued job in its own transaction while the queue is busy.

Before, a busy runner wrote twice per job it ran besides the job's own steps: the claim
(with the job's start) and the job's end. Now the end of one job also claims the job
that takes its slot, one write transaction less per job. A job whose start fails does
not take the end of the job before it along: that job ends alone, and the next is
claimed by the runner's own loop, as it would have been.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.domain.jobs import JobKind
from app.wiring import runtime
from app.worker import kinds
from tests.fakes.messages_api import FakeMessagesAPI, reply
from tests.support.chat import TERMINAL, wait_until
from tests.support.units import count_write_units
from tests.test_runner_faults import agent_settings, enqueue_turn, job_of, running

pytestmark = pytest.mark.timeout(60)

Units = list[str]


async def run_queued_turns(
    make_settings: Any, fake_llm: FakeMessagesAPI, turns: int
) -> tuple[list[Job], Units]:
    """`turns` one-request turns in sessions of their own, queued before a runner of one
    slot starts; their jobs once all ended, and the runner's write units."""
    settings = agent_settings(
        make_settings, fake_llm, worker_concurrency=1, job_heartbeat_seconds=3600.0
    )
    fake_llm.always(lambda _body: reply("Done."))
    async with runtime(settings, with_runner=False) as parts:
        queued = [await enqueue_turn(parts.database, f"message {n}") for n in range(turns)]
        units = count_write_units(parts.database)

        async def all_ended() -> bool:
            statuses = [(await job_of(parts.database, j)).status for j in queued]
            return all(status in TERMINAL for status in statuses)

        async with running(parts, settings, "runner"):
            await wait_until(all_ended, seconds=30)
            await asyncio.sleep(0)  # the last end's bookkeeping
        jobs = [await job_of(parts.database, j) for j in queued]
    return jobs, units


async def test_a_jobs_end_claims_the_next_queued_job_in_the_same_transaction(
    make_settings: Any, fake_llm: FakeMessagesAPI
) -> None:
    """Three queued turns, one slot: the loop's claim, then each end claims the next (the
    last end finds none), four write units where there were six."""
    jobs, units = await run_queued_turns(make_settings, fake_llm, turns=3)

    assert [job.status for job in jobs] == ["succeeded"] * 3
    assert units == ["claim", "finish_and_claim", "finish_and_claim", "finish_and_claim"]


async def test_a_job_whose_start_fails_does_not_keep_the_job_before_it_from_ending(
    make_settings: Any, fake_llm: FakeMessagesAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second turn's start fails inside the first turn's end: the first ends alone,
    the loop claims the second without its start, and the second starts on its own."""
    chat = kinds.HANDLERS[JobKind.chat]
    starts: list[str] = []

    async def fails_once(db: AsyncSession, job: Job) -> None:
        starts.append(job.id)
        if len(starts) == 2:
            raise ValueError("no start")
        assert chat.on_claim is not None
        await chat.on_claim(db, job)

    monkeypatch.setitem(kinds.HANDLERS, JobKind.chat, replace(chat, on_claim=fails_once))

    jobs, units = await run_queued_turns(make_settings, fake_llm, turns=2)

    assert [job.status for job in jobs] == ["succeeded"] * 2
    assert units[:3] == ["claim", "finish_and_claim", "finish"]  # the first turn's end
    assert starts[:2] == [jobs[0].id, jobs[1].id]
    assert "item_seq" in jobs[1].input  # the second turn logged its message itself
