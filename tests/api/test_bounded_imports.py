"""POST /hooks/claude-code imports a transcript of any size in bounded write transactions.

Each write unit of work is counted (how many items it added, in commit order) by wrapping
`Database.write` of the running app; the chunked import is compared with a one-shot import
(a chunk size larger than the transcript) of the same lines into another session.
"""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func
from sqlmodel import select
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api import hook_body
from app.db.models import Item
from tests.support.apps import serve
from tests.support.chat import items
from tests.support.memory import (
    Transcript,
    database_of,
    hook_payload,
    jobs_of,
    memory_rows,
    memory_turns,
    post_hook,
    real_transcript,
    sessions_with_parent,
)

MAIN = "fasthooks__sample_main_transcript.jsonl"
SIDECHAIN = "fasthooks__sample_agent_sidechain.jsonl"
CHUNK = 4
WHOLE = 10**6  # a chunk larger than any transcript here: the import in one unit
JSON = {"content-type": "application/json"}
T0 = datetime(2026, 5, 4, 9, 0, 0, tzinfo=UTC)
Work = Callable[[AsyncSession], Awaitable[Any]]


async def _item_count(db: AsyncSession) -> int:
    return int((await db.exec(select(func.count()).select_from(Item))).one())


@dataclass
class Units:
    """The write units of an app in commit order: (label, items the unit added).

    `fail_at` makes the n-th unit that adds items fail after doing its work, so that it
    rolls back whole (as if the process died or the disk filled up in that chunk)."""

    fail_at: int | None = None
    committed: list[tuple[str, int]] = field(default_factory=list)
    adding: int = 0

    def install(self, app: FastAPI, label: Callable[[], str] = lambda: "import") -> None:
        database = database_of(app)
        real = database.write

        async def write(work: Work) -> Any:
            async def counted(db: AsyncSession) -> tuple[Any, int]:
                before = await _item_count(db)
                value = await work(db)
                added = await _item_count(db) - before
                if added:
                    self.adding += 1
                    if self.adding == self.fail_at:
                        raise RuntimeError(f"chunk {self.adding} failed")
                return value, added

            value, added = await real(counted)
            self.committed.append((label(), added))
            return value

        database.write = write  # type: ignore[method-assign]

    def chunks(self, label: str = "import") -> list[int]:
        return [added for name, added in self.committed if name == label and added]


def _synthetic(session_id: str, turns: int) -> Transcript:
    """`turns` turns of four items each (prompt, tool call, tool result, answer): with a
    chunk of four, every chunk but the first completes the turn before it."""
    transcript = Transcript(session_id)
    for i in range(turns):
        transcript.turn(
            T0 + timedelta(minutes=i),
            f"question {i}",
            f"answer {i}",
            tool=("Read", {"file": f"f{i}.txt"}, f"contents of f{i}.txt"),
        )
    return transcript


def _stop_body(external_id: str, text: str) -> bytes:
    return json.dumps(hook_payload("stop", session_id=external_id, transcript=text)).encode()


async def _stop(
    client: httpx.AsyncClient, external_id: str, text: str, **extra: Any
) -> httpx.Response:
    payload = hook_payload("stop", session_id=external_id, transcript=text, **extra)
    return await post_hook(client, payload)


async def _log(client: httpx.AsyncClient, session_id: str) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in item.items() if k != "session_id"}
        for item in await items(client, session_id)
    ]


async def _memory(app: FastAPI, session_id: str) -> tuple[list[Any], list[Any]]:
    turns = [
        (t.turn, t.ended_at, t.user_text, t.assistant_text, t.l1)
        for t in await memory_turns(app, session_id)
    ]
    _, details = await memory_rows(app)
    return turns, sorted((d[3], d[4], d[5]) for d in details if d[2] == session_id)


async def _view(app: FastAPI, client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    """Everything an import leaves behind in a session, without its ids."""
    return {
        "log": await _log(client, session_id),
        "memory": await _memory(app, session_id),
        "summary jobs": len(await jobs_of(client, session_id, "summary")),
    }


@pytest.fixture
def chunked(make_settings: Any) -> Any:
    """Settings with a small import chunk (and a small L2 window, so that the summary
    enqueue at the end of an import has something to do)."""

    def make(chunk: int, **overrides: Any) -> Any:
        return make_settings(
            import_chunk_items=chunk,
            memory_l2_window_turns=2,
            run_worker_in_server=False,
            **overrides,
        )

    return make


@pytest.fixture
async def one_shot(chunked: Any) -> AsyncIterator[Callable[[str, str], Awaitable[Any]]]:
    """Import a transcript in one unit into its own session; returns what it left."""

    async def run(external_id: str, text: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        async with serve(chunked(WHOLE)) as (app, client):
            units = Units()
            units.install(app)
            response = await _stop(client, external_id, text)
            assert response.status_code == 200, response.text
            main = response.headers["Strata-Session"]
            views = [await _view(app, client, main)]
            for child in await sessions_with_parent(app, main):
                views.append(await _view(app, client, child.id))
            assert len(units.chunks()) == len(views)  # one unit per session
            return dict(response.headers), views

    yield run


async def test_a_large_import_commits_in_chunks_and_equals_a_one_shot_import(
    chunked: Any, one_shot: Callable[[str, str], Awaitable[Any]]
) -> None:
    transcript = real_transcript(MAIN) + real_transcript(SIDECHAIN)
    whole_headers, whole = await one_shot("cc-whole", transcript)

    async with serve(chunked(CHUNK)) as (app, client):
        units = Units()
        units.install(app)
        # another project: in the one-shot's it would continue its chain, which holds its
        # system texts already (kept once per chain)
        response = await _stop(client, "cc-chunked", transcript, cwd="/work/elsewhere")
        main = response.headers["Strata-Session"]
        children = await sessions_with_parent(app, main)
        views = [await _view(app, client, main)]
        views += [await _view(app, client, c.id) for c in children]

    assert response.status_code == 200, response.text
    assert response.headers["Strata-Imported"] == whole_headers["strata-imported"] == "48"
    assert response.headers["Strata-Already-Known"] == "0"
    chunks = units.chunks()
    assert sum(chunks) == 48
    assert max(chunks) <= CHUNK
    assert len(chunks) >= 48 // CHUNK  # 46 main items in 12 chunks, 2 subagent items in 1
    assert views == whole
    assert views[0]["summary jobs"] == 1  # the enqueue saw every turn of the session


async def test_another_tenants_write_commits_between_the_chunks_of_an_import(
    chunked: Any,
) -> None:
    transcript = real_transcript(MAIN)
    async with serve(chunked(CHUNK, api_keys="acme:key-a,globex:key-b")) as (app, client):
        other: asyncio.Task[httpx.Response] | None = None
        other_done = asyncio.Event()

        def label() -> str:
            return "globex" if asyncio.current_task() is other else "import"

        units = Units()
        units.install(app, label)
        database = database_of(app)
        counted_write = database.write

        async def write(work: Work) -> Any:
            nonlocal other
            mine = asyncio.current_task() is other
            if not mine and other is not None:
                # the import's next unit waits for the other tenant's write, which was
                # submitted after the import's first chunk: with one unit for the whole
                # import there is no next unit, and the other write commits after it
                await asyncio.wait_for(other_done.wait(), timeout=30)
            value = await counted_write(work)
            if mine:
                other_done.set()
            elif other is None and units.chunks():
                other = asyncio.create_task(
                    client.post(
                        "/sessions",
                        json={"title": "globex's"},
                        headers={"Authorization": "Bearer key-b"},
                    )
                )
            return value

        database.write = write  # type: ignore[method-assign]
        payload = hook_payload("stop", session_id="cc-acme", transcript=transcript)
        response = await client.post(
            "/hooks/claude-code", json=payload, headers={"Authorization": "Bearer key-a"}
        )
        assert other is not None
        created = await other

    assert response.status_code == 200, response.text
    assert created.status_code == 201, created.text
    labels = [name for name, added in units.committed if name == "globex" or added]
    assert labels.count("globex") == 1
    assert labels.index("globex") < len(labels) - 1 - labels[::-1].index("import")
    assert labels[0] == "import"  # the import had begun


async def test_an_import_that_failed_in_a_chunk_is_finished_by_posting_it_again(
    chunked: Any, one_shot: Callable[[str, str], Awaitable[Any]]
) -> None:
    text = _synthetic("cc-crash", turns=6).text()  # 24 items, six chunks of four
    _, whole = await one_shot("cc-whole", text)

    async with serve(chunked(CHUNK)) as (app, client):
        units = Units(fail_at=3)
        units.install(app)
        async with database_of(app).read() as db:
            before = await _item_count(db)
        failed = await _stop(client, "cc-crash", text)
        async with database_of(app).read() as db:
            kept = await _item_count(db) - before
        units.fail_at = None
        retried = await _stop(client, "cc-crash", text)
        again = await _stop(client, "cc-crash", text)
        session_id = retried.headers["Strata-Session"]
        view = await _view(app, client, session_id)
        async with database_of(app).read() as db:
            query = select(Item.source_id).where(Item.session_id == session_id)
            sources = list((await db.exec(query)).all())

    assert failed.status_code == 500
    assert kept == 2 * CHUNK  # the two chunks before the failure stay committed
    assert retried.status_code == 200, retried.text
    assert retried.headers["Strata-Imported"] == str(24 - kept)
    assert retried.headers["Strata-Already-Known"] == str(kept)
    assert (again.headers["Strata-Imported"], again.headers["Strata-Already-Known"]) == ("0", "24")
    assert len(set(sources)) == len(sources) == 24  # no duplicates
    assert [view] == whole  # turn 2, open when its completing chunk failed, is projected


async def test_a_chunk_ending_inside_a_turn_leaves_it_unprojected_until_it_is_complete(
    chunked: Any,
) -> None:
    text = _synthetic("cc-open", turns=3).text()
    async with serve(chunked(3)) as (app, client):
        units = Units(fail_at=2)  # the first chunk ends inside turn 1
        units.install(app)
        await _stop(client, "cc-open", text)
        session_id = (await client.get("/sessions")).json()["data"][0]["id"]
        half = await memory_turns(app, session_id)
        units.fail_at = None
        await _stop(client, "cc-open", text)
        whole = await memory_turns(app, session_id)

    assert half == []  # never a half turn in memory
    assert [(t.turn, t.user_text, t.assistant_text) for t in whole] == [
        (1, "question 0", "answer 0"),
        (2, "question 1", "answer 1"),
        (3, "question 2", "answer 2"),
    ]


async def test_two_posts_of_the_same_lines_at_once_import_each_item_once(
    chunked: Any, one_shot: Callable[[str, str], Awaitable[Any]]
) -> None:
    text = _synthetic("cc-twice", turns=6).text()
    _, whole = await one_shot("cc-twice", text)

    async with serve(chunked(CHUNK)) as (app, client):
        first, second = await asyncio.gather(
            _stop(client, "cc-twice-2", text), _stop(client, "cc-twice-2", text)
        )
        view = await _view(app, client, first.headers["Strata-Session"])

    assert (first.status_code, second.status_code) == (200, 200)
    imported = [int(r.headers["Strata-Imported"]) for r in (first, second)]
    assert sum(imported) == 24  # a client that retried too early duplicates nothing
    assert [int(r.headers["Strata-Already-Known"]) for r in (first, second)] == [
        24 - n for n in imported
    ]
    assert [view] == whole


def _large_stop(external_id: str, size: int) -> bytes:
    """A Stop hook body of about `size` bytes: turns whose tool output is a long text
    (non-ASCII, quotes and backslashes, as real output has)."""
    transcript = Transcript(external_id)
    output = 'Résumé of the file, line after line: "quoted" and \\ escaped.\n' * 300
    for i in range(max(1, size // len(output))):
        transcript.turn(
            T0 + timedelta(minutes=i),
            f"question {i}",
            f"answer {i}",
            tool=("Read", {"file": f"f{i}.txt"}, output),
        )
    payload = hook_payload("stop", session_id=external_id, transcript=transcript.text())
    return json.dumps(payload).encode()


async def test_a_large_import_holds_little_more_than_its_body_at_its_peak(
    chunked: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a small body, so a small decoding block, to keep what is fixed small beside it
    monkeypatch.setattr(hook_body, "BLOCK_BYTES", 16 * 1024)
    body = _large_stop("cc-large", 2 * 2**20)
    async with serve(chunked(CHUNK)) as (_, client):
        warm = await _stop(client, "cc-warm", _synthetic("cc-warm", turns=2).text())
        assert warm.status_code == 200  # what the first import of a process sets up
        tracemalloc.start()
        try:
            response = await client.post("/hooks/claude-code", content=body, headers=JSON)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()

    assert response.status_code == 200, response.text
    assert int(response.headers["Strata-Imported"]) > 0
    # the body once, a decoded block and a chunk of items (decoded whole: 3-7 times)
    assert peak < 2 * len(body), f"peak {peak} bytes for a body of {len(body)}"


@pytest.fixture
async def budgeted(chunked: Any) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """Room for one hook body of at most 64 KiB at a time (the bodies here: 40 kB)."""
    limits = {"hook_max_body_bytes": 64 * 1024, "hook_body_budget_bytes": 64 * 1024}
    async with serve(chunked(CHUNK, admission_retry_after_seconds=5, **limits)) as parts:
        yield parts


async def _held_body(
    app: FastAPI, client: httpx.AsyncClient, body: bytes, release: asyncio.Event
) -> asyncio.Task[httpx.Response]:
    """A post of `body` (chunked, no declared length) whose last bytes are sent once
    `release` is set; returns when the rest is counted against the budget."""
    half = len(body) - 10

    async def chunks() -> AsyncIterator[bytes]:
        yield body[:half]
        await release.wait()
        yield body[half:]

    sent = asyncio.create_task(client.post("/hooks/claude-code", content=chunks(), headers=JSON))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while app.state.hook_body_budget.in_flight < half:
        assert loop.time() < deadline and not sent.done(), "the body was never counted"
        await asyncio.sleep(0.01)
    return sent


async def test_a_hook_body_past_the_process_budget_is_refused_with_503(
    budgeted: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = budgeted
    release = asyncio.Event()
    first = _synthetic("cc-first", turns=21).text()
    held = await _held_body(app, client, _stop_body("cc-first", first), release)

    refused = await client.post(
        "/hooks/claude-code", content=_stop_body("cc-second", first), headers=JSON
    )
    release.set()
    taken = await held
    again = await client.post(
        "/hooks/claude-code", content=_stop_body("cc-second", first), headers=JSON
    )

    assert refused.status_code == 503
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "5"
    assert refused.json()["type"] == "urn:strata:problem:server-busy"
    assert "STRATA_HOOK_BODY_BUDGET_BYTES" in refused.json()["detail"]
    assert (taken.status_code, again.status_code) == (200, 200)
    assert app.state.hook_body_budget.in_flight == 0


async def test_a_chunked_hook_body_is_refused_once_it_passes_the_budget(
    budgeted: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, client = budgeted
    release = asyncio.Event()
    text = _synthetic("cc-first", turns=21).text()
    held = await _held_body(app, client, _stop_body("cc-first", text), release)

    async def undeclared() -> AsyncIterator[bytes]:
        yield _stop_body("cc-second", text)

    refused = await client.post("/hooks/claude-code", content=undeclared(), headers=JSON)
    release.set()
    await held

    assert refused.status_code == 503
    assert app.state.hook_body_budget.in_flight == 0
