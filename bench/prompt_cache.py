"""Prompt cache: the input a tool-using session is billed, next to the ideal.

Strata runs real chat turns (the API, the runner, the task reminder, the SDK) against
the fake Messages API, in this process; the bodies the fake received are then billed by
a model of the API's prompt cache, as its documentation describes it:

- a request's prompt is its tools, its system blocks and its messages' blocks, in that
  order; a block with `cache_control` is a breakpoint, and the prefix up to it is written
  to the cache (1.25x its input tokens) unless it is there already;
- at each breakpoint the API looks for an entry at that block or at one of the
  `LOOKBACK` (about 20) blocks before it; the tokens up to the furthest entry found
  are read (0.1x), the rest up to the last breakpoint written, and what follows the
  last breakpoint billed as plain input (1x);
- entries are kept per model, and live longer than the session (no expiry).

The ideal bills every token that an earlier request of the same model sent at the same
place (the same prefix) as a read, and every other token as a write: no request could
do better, short of sending less. Alongside, the same bodies are billed with a single
breakpoint on their last block (and the system prompt's), to show what the placement
is worth. Tokens are the fake's count (`count_tokens`: 4 characters to a token, plus a
few per message and block), so the figures are sizes, not timings: one run.

Two sessions: 50 turns of a tool-using agent (a few tool steps a turn, a task list, so
the task reminder comes every 8 requests without a task write), and 10 turns whose
responses each make 12 parallel tool calls (12 tool_use and 12 tool_result blocks a
step, beyond the lookback). The L1 summary requests the session's older turns queue are
billed apart: they mark no breakpoint, so they write nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from app.db.migrate import upgrade_to_head
from app.settings import Settings
from bench.common import Context, Row, Section
from tests.fakes.messages_api import (
    MESSAGE_TOKENS,
    FakeMessagesAPI,
    Step,
    block_tokens,
    reply,
    text,
    tool_tokens,
    tool_use,
)
from tests.support.apps import IN_PROCESS_HOSTS, serve

NAME = "prompt_cache"
TITLE = "Prompt cache: billed input tokens of a tool-using session"
TARGET = (
    "billed-equivalent input tokens (plain 1x, cache writes 1.25x, cache reads 0.1x) ≤ "
    "1.05x the ideal, for a 50-turn tool-using session and for one whose responses each "
    "make 12 parallel tool calls"
)
BOUND = 1.05
READ, WRITE = 0.1, 1.25
LOOKBACK = 20
"""Blocks before a breakpoint where the API still looks for an earlier entry."""
QUICK_TURNS = 2


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True)
class Unit:
    """One block of a prompt, in order: its prefix's digest, its tokens, a breakpoint?"""

    prefix: str
    tokens: int
    marked: bool


def units(body: dict[str, Any]) -> list[Unit]:
    """The prompt's blocks (tools, system, messages), each with the digest of the prompt
    up to and including it (the model's name first: entries are per model)."""
    digest = hashlib.sha256(str(body.get("model")).encode())
    out: list[Unit] = []

    def add(kind: str, block: Any, tokens: int) -> None:
        marked = isinstance(block, dict) and "cache_control" in block
        plain = (
            {k: v for k, v in block.items() if k != "cache_control"}
            if isinstance(block, dict)
            else block
        )
        digest.update(kind.encode() + json.dumps(plain, sort_keys=True).encode())
        out.append(Unit(digest.copy().hexdigest(), tokens, marked))

    for tool in body.get("tools") or []:
        add("tool", tool, tool_tokens(tool))
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or []:
        add("system", block, block_tokens(block))
    for message in body.get("messages") or []:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for index, block in enumerate(content):
            framing = MESSAGE_TOKENS if index == 0 else 0
            add(f"{message['role']}{index == 0}", block, block_tokens(block) + framing)
    return out


@dataclass
class Billing:
    """Input tokens by how they are billed."""

    plain: int = 0
    written: int = 0
    read: int = 0

    @property
    def billed(self) -> float:
        """Billed-equivalent input tokens."""
        return self.plain + WRITE * self.written + READ * self.read

    def __add__(self, other: Billing) -> Billing:
        return Billing(
            self.plain + other.plain, self.written + other.written, self.read + other.read
        )


class PromptCache:
    """The API's prompt cache as the module's docstring describes it."""

    def __init__(self, lookback: int = LOOKBACK) -> None:
        self.lookback = lookback
        self._entries: set[str] = set()

    def bill(self, prompt: Sequence[Unit]) -> Billing:
        ends = [sum(u.tokens for u in prompt[: n + 1]) for n in range(len(prompt))]
        marked = [n for n, unit in enumerate(prompt) if unit.marked]
        if not marked:
            return Billing(plain=ends[-1] if ends else 0)
        read_to = -1
        for point in marked:
            for n in range(point, max(-1, point - self.lookback - 1), -1):
                if prompt[n].prefix in self._entries:
                    read_to = max(read_to, n)
                    break
        self._entries.update(prompt[n].prefix for n in marked)
        read = ends[read_to] if read_to >= 0 else 0
        return Billing(
            plain=ends[-1] - ends[marked[-1]], written=ends[marked[-1]] - read, read=read
        )


class IdealCache:
    """Every token an earlier request sent at the same place read, every other written."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def bill(self, prompt: Sequence[Unit]) -> Billing:
        shared = 0
        for unit in prompt:
            if unit.prefix not in self._seen:
                break
            shared += unit.tokens
        self._seen.update(unit.prefix for unit in prompt)
        return Billing(written=sum(u.tokens for u in prompt) - shared, read=shared)


def last_block_only(body: dict[str, Any]) -> dict[str, Any]:
    """The body with one conversation breakpoint, on its last block (and the system's)."""
    plain: dict[str, Any] = json.loads(json.dumps(body))
    for message in plain.get("messages") or []:
        for block in message["content"]:
            block.pop("cache_control", None)
    plain["messages"][-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return plain


def billed(bodies: Sequence[dict[str, Any]], cache: PromptCache | IdealCache) -> Billing:
    total = Billing()
    for body in bodies:
        total = total + cache.bill(units(body))
    return total


# ---------------------------------------------------------------------------- sessions
@dataclass(frozen=True)
class Session:
    """A scripted session: each turn's user text and the model's steps (tool calls)."""

    label: str
    turns: int
    steps: Callable[[int], list[list[tuple[str, dict[str, Any]]]]]


def tool_using_steps(turn: int) -> list[list[tuple[str, dict[str, Any]]]]:
    """Three tool steps: tasks created at the start, one updated every sixth turn (so the
    reminder comes in between), the clock and the list read otherwise."""
    first: list[tuple[str, dict[str, Any]]]
    if turn == 0:
        first = [("TaskCreate", {"subject": f"part {n} of the work"}) for n in range(1, 4)]
    elif turn % 6 == 0:
        first = [("TaskUpdate", {"taskid": 1 + turn % 3, "status": "inprogress"})]
    else:
        first = [("current_time", {})]
    return [first, [("TaskList", {})], [("current_time", {}), ("TaskGet", {"taskid": 1})]]


def parallel_steps(turn: int) -> list[list[tuple[str, dict[str, Any]]]]:
    return [[("current_time", {})] * 12, [("TaskList", {})] * 12]


SESSIONS = (
    Session("50 turns, 3 tool steps a turn, a task list", 50, tool_using_steps),
    Session("10 turns, 12 parallel tool calls a response", 10, parallel_steps),
)
PROSE = (
    "The parser now reads the header, the body and the trailer; the tests cover each "
    "part and the two ways a file can end early. "
)


def _script(session: Session, turns: int, summary_model: str) -> Callable[[dict[str, Any]], Step]:
    """The fake's answers: the session's steps turn by turn, a line for any summary."""
    queue: deque[Step] = deque()
    lock = threading.Lock()
    for turn in range(turns):
        for n, calls in enumerate(session.steps(turn)):
            blocks = [text(f"Step {n + 1} of turn {turn + 1}: looking.")]
            queue.append(reply(*blocks, *(tool_use(name, args) for name, args in calls)))
        queue.append(reply(text(f"Turn {turn + 1} done. " + PROSE * 3)))

    def answer(body: dict[str, Any]) -> Step:
        if body.get("model") == summary_model:
            return reply(text("A one-line summary of the turn."))
        with lock:
            return queue.popleft()

    return answer


async def _run_session(session: Session, turns: int, workdir: Path) -> list[dict[str, Any]]:
    """The bodies of every request the session's turns (and their summaries) sent."""
    url = f"sqlite:///{workdir / 'prompt-cache.db'}"
    upgrade_to_head(url)
    with FakeMessagesAPI() as fake:
        settings = Settings(
            _env_file=None,
            database_url=url,
            data_dir=workdir / "data",
            anthropic_base_url=fake.url,
            llm_max_retries=0,
            worker_poll_seconds=0.05,
            allowed_hosts=IN_PROCESS_HOSTS,
        )
        fake.always(_script(session, turns, settings.summary_model))
        async with serve(settings) as (_, client):
            created = await client.post("/sessions", json={"title": "prompt cache"})
            session_id = created.json()["id"]
            for turn in range(turns):
                said = f"Turn {turn + 1}: go on with the next part. " + PROSE
                answered = await client.post(
                    f"/sessions/{session_id}/messages",
                    params={"wait": "true"},
                    json={"text": said},
                    timeout=httpx.Timeout(120.0),
                )
                job = answered.json()["job"]
                if job["status"] != "succeeded":
                    raise RuntimeError(f"turn {turn + 1} ended {job['status']}: {job}")
            await _summaries_done(client, session_id)
        return [request.body for request in fake.requests]


async def _summaries_done(client: httpx.AsyncClient, session_id: str) -> None:
    """Waits for the session's summary jobs (their requests are billed too)."""
    for _ in range(600):
        waiting = [
            (await client.get("/jobs", params={"session_id": session_id, "status": status})).json()[
                "data"
            ]
            for status in ("queued", "running")
        ]
        if not any(waiting):
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the session's summaries did not end")


@dataclass(frozen=True)
class Figures:
    requests: int
    placed: Billing
    last_only: Billing
    ideal: Billing
    summaries: int
    summary_billing: Billing

    @property
    def ratio(self) -> float:
        return self.placed.billed / self.ideal.billed


def figures(bodies: Sequence[dict[str, Any]], chat_model: str) -> Figures:
    chat = [b for b in bodies if b.get("model") == chat_model]
    others = [b for b in bodies if b.get("model") != chat_model]
    return Figures(
        requests=len(chat),
        placed=billed(chat, PromptCache()),
        last_only=billed([last_block_only(b) for b in chat], PromptCache()),
        ideal=billed(chat, IdealCache()),
        summaries=len(others),
        summary_billing=billed(others, PromptCache()),
    )


def _cell(billing: Billing) -> str:
    return (
        f"{billing.billed:,.0f} ({billing.plain:,} plain · {billing.written:,} written · "
        f"{billing.read:,} read)"
    )


async def run(ctx: Context) -> Section:
    section = Section(NAME, TITLE, TARGET)
    chat_model = Settings(_env_file=None).model
    for number, session in enumerate(SESSIONS):
        turns = ctx.scale(session.turns, QUICK_TURNS)
        workdir = ctx.workdir / str(number)
        workdir.mkdir()
        found = figures(await _run_session(session, turns, workdir), chat_model)
        last = found.last_only.billed / found.ideal.billed
        section.rows.append(
            Row(
                session.label if turns == session.turns else f"{session.label} ({turns} turns)",
                {
                    "requests": str(found.requests),
                    "billed input, Strata's breakpoints": _cell(found.placed),
                    "ideal": _cell(found.ideal),
                    "ratio": f"{found.ratio:.3f}×",
                    "one breakpoint on the last block": f"{found.last_only.billed:,.0f} "
                    f"({last:.2f}×)",
                    "L1 summary requests (billed, written)": f"{found.summaries} "
                    f"({found.summary_billing.billed:,.0f}, {found.summary_billing.written})",
                },
                found.ratio <= BOUND,
                {
                    "ratio": found.ratio,
                    "last_block_only_ratio": last,
                    "billed": found.placed.billed,
                    "ideal": found.ideal.billed,
                },
            )
        )
    section.notes = [
        "Billed-equivalent input tokens of the session's chat requests: plain input at 1×, "
        f"cache writes at {WRITE}×, cache reads at {READ}×, as a model of the prompt cache "
        f"bills the bodies Strata sent (breakpoints as marked; an entry is found at a "
        f"breakpoint or up to {LOOKBACK} blocks before it; entries per model, no expiry). "
        "The ideal reads every token an earlier request sent at the same place and writes "
        "every other one. Strata's requests mark the system prompt, the end of what later "
        "requests send again (never the task reminder, which only its request sends) and the "
        "end of the previous request; the column beside marks the last block only. "
        "Tokens are the fake's count (4 characters a token), so one run, no timing.",
        "L1 summary requests mark no breakpoint: each prompt is one turn's, which no later "
        "request repeats, so they write nothing to the cache (the written figure).",
    ]
    return section
