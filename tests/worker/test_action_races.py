"""A resolved call runs once, whatever happens to the runner that runs it: a runner whose
lease is taken over while the call runs writes nothing more, and the runner that takes
the job over finds the call started and answers it `interrupted` instead of running it
again."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from app.domain.actions import ActionDecision
from app.domain.jobs import JobStatus
from app.domain.tool_policy import Effect, RuleBounds, ToolPolicyRule
from app.engine.loop import INTERRUPTED
from app.engine.tools import Tool, ToolContext, ToolRegistry
from app.services.actions import ActionChoice, ResolveContext, pending_actions, resolve_actions
from app.services.chat import IfBusy, send_message
from app.services.jobs import get_job
from app.services.piece_jobs import submit_job
from app.services.sessions import create_session
from app.tools.transition import piece_tools
from app.wiring import runtime
from tests.fakes.messages_api import FakeMessagesAPI, tool_use
from tests.support.chat import TERMINAL, assert_log_consistent, wait_until
from tests.support.runners import agent_settings, has_status, job_of, log_of, running

pytestmark = pytest.mark.timeout(90)


class _Nothing(BaseModel):
    pass


class _Gate:
    """A tool that counts its runs and answers once its gate opens."""

    def __init__(self) -> None:
        self.runs = 0
        self.open = asyncio.Event()

    async def invoke(self, _ctx: ToolContext, _args: _Nothing) -> str:
        self.runs += 1
        await self.open.wait()
        return "through"


GATED = """\
name: gated
movements:
  - name: only
    instruction: Pass the gate.
    allowed_tools: [gate]
    transitions: [COMPLETE]
    tool_policy:
      - {tool: gate, effect: ask}
"""


@dataclass(frozen=True)
class _Kind:
    """What a job of one kind needs to ask for the gate: its tools, its settings, how it
    starts (from the runtime and a database unit, to the job's id) and the reply that ends
    it once the started call is answered."""

    tools: ToolRegistry
    settings: dict[str, Any]
    start: Callable[[Any, Any], Awaitable[str]]
    closing: Any


def _chat(gate: Tool[Any], _tmp_path: Path) -> _Kind:
    tools = ToolRegistry([gate])

    async def start(_parts: Any, db: Any) -> str:
        rules = [ToolPolicyRule(tool="gate", effect=Effect.ask)]
        bounds = RuleBounds(tools.names, 100)
        session = await create_session(db, "acme", tool_policy=rules, policy_bounds=bounds)
        return (await send_message(db, "acme", session.id, "go", IfBusy.enqueue)).id

    return _Kind(tools, {}, start, "Done.")


def _movement(gate: Tool[Any], tmp_path: Path) -> _Kind:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "gated.yaml").write_text(GATED)

    async def start(parts: Any, db: Any) -> str:
        piece = parts.pieces.get("gated")
        assert piece is not None
        return (await submit_job(db, "acme", instruction="go", piece=piece)).id

    closing = tool_use("transition", {"next_step": "COMPLETE", "summary": "through"})
    settings = {"pieces_dir": pieces, "data_dir": tmp_path / "data"}
    return _Kind(ToolRegistry([gate, *piece_tools()]), settings, start, closing)


@pytest.mark.parametrize("kind_of", [_chat, _movement], ids=["chat", "movement"])
async def test_an_allowed_call_runs_once_when_another_runner_takes_the_job_over(
    kind_of: Callable[[Tool[Any], Path], _Kind],
    make_settings: Any,
    fake_llm: FakeMessagesAPI,
    tmp_path: Path,
) -> None:
    gate = _Gate()
    kind = kind_of(Tool("gate", "Pass the gate.", _Nothing, gate.invoke), tmp_path)
    tools = kind.tools
    prompt = agent_settings(make_settings, fake_llm, job_lease_seconds=30.0, **kind.settings)
    late = agent_settings(  # its lease expires while the call runs: the job is B's
        make_settings,
        fake_llm,
        job_lease_seconds=0.3,
        job_heartbeat_seconds=3600.0,
        worker_concurrency=1,
        **kind.settings,
    )
    call = tool_use("gate", {})
    fake_llm.reply(call)
    fake_llm.reply(kind.closing)  # runner B, after it answered the started call

    async with (
        runtime(prompt, with_runner=False, tools=tools) as parts,
        runtime(late, with_runner=False, tools=tools) as late_parts,
    ):

        async def start(db: Any) -> str:
            return await kind.start(parts, db)

        job_id = await parts.database.write(start)
        waiting = frozenset({JobStatus.waiting_human})
        async with running(parts, prompt, "runner-first"):
            await wait_until(lambda: has_status(parts.database, job_id, waiting))

        async def allow(db: Any) -> None:
            [action] = await pending_actions(db, await get_job(db, "acme", job_id))
            choice = ActionChoice(action.id, ActionDecision.allow)
            await resolve_actions(db, "acme", job_id, [choice], ResolveContext(tools, 100))

        await parts.database.write(allow)
        async with running(late_parts, late, "runner-a"):

            async def ran() -> bool:
                return gate.runs == 1

            await wait_until(ran)
            async with running(parts, prompt, "runner-b"):
                await wait_until(lambda: has_status(parts.database, job_id, TERMINAL))
            gate.open.set()
        job = await job_of(parts.database, job_id)
        log = await log_of(parts.database, job.session_id)

    assert gate.runs == 1
    assert job.status == "succeeded"
    answers = [i for i in log if i["kind"] == "tool_result" and i["tool_use_id"] == call.id]
    assert [answer["content"] for answer in answers] == [INTERRUPTED]
    assert_log_consistent(log)
