"""A rewind with `files: true`: the job's workspace goes back to its snapshot at the point,
what Bash changed, deleted and made included, after a safety snapshot that undoes it; the
preview lists the changes and makes none. A real piece job runs real Bash commands the
fake Messages API scripts."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.engine import Database, UnitsOfWork
from app.domain.errors import Conflict
from app.services import branching
from app.services.auth import LOCAL_TENANT
from app.services.piece_jobs import workspace_of
from app.services.workspace_snapshots import store_of
from app.settings import Settings
from tests.api.test_streams import _session_events_until
from tests.fakes.messages_api import FakeMessagesAPI, text, tool_use
from tests.support.apps import serve
from tests.support.chat import items, new_session, submit_job, wait_job, wait_until

SHELL = """\
name: shell
description: make files, then change them
movements:
  - name: make
    instruction: Make the files.
    allowed_tools: [Bash]
    transitions: [change]
    default_next: change
  - name: change
    instruction: Change the files.
    allowed_tools: [Bash]
    transitions: [COMPLETE]
"""

MAKE = "printf 'first\\n' > input/notes.txt && printf 'bye\\n' > input/gone.txt"
CHANGE = "echo x >> input/notes.txt && rm input/gone.txt && echo new > output/made.txt"


@pytest.fixture
def shell_settings(
    make_settings: Any, fake_llm: FakeMessagesAPI, tmp_path: Path
) -> Callable[..., Settings]:
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    (pieces / "shell.yaml").write_text(SHELL)

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "anthropic_base_url": fake_llm.url,
            "llm_max_retries": 0,
            "worker_poll_seconds": 0.05,
            "job_heartbeat_seconds": 0.1,
            "data_dir": tmp_path / "data",
            "pieces_dir": pieces,
            "bash_tool_enabled": True,
        }
        values.update(overrides)
        settings: Settings = make_settings(**values)
        return settings

    return make


@pytest.fixture
async def strata(shell_settings: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(shell_settings()) as (_, client):
        yield client


def _transition(next_step: str) -> Any:
    return tool_use("transition", {"next_step": next_step, "summary": f"to {next_step}"})


async def _run_shell_job(client: httpx.AsyncClient, fake_llm: FakeMessagesAPI) -> dict[str, Any]:
    """The job of the `shell` piece: its first movement makes the files, its second
    changes, deletes and adds some with Bash."""
    fake_llm.reply(tool_use("Bash", {"command": MAKE}))
    fake_llm.reply(_transition("change"))
    fake_llm.reply(tool_use("Bash", {"command": CHANGE}))
    fake_llm.reply(_transition("COMPLETE"))
    job = await wait_job(client, (await submit_job(client, piece="shell"))["id"])
    assert job["status"] == "succeeded", job
    return job


async def _before_change(client: httpx.AsyncClient, session_id: str) -> int:
    """The log's end as the `change` movement started: its opening message's seq - 1."""
    log = await items(client, session_id)
    [opening] = [
        item
        for item in log
        if item["kind"] == "user_message"
        and any("Change the files." in block.get("text", "") for block in item["content"])
    ]
    return int(opening["seq"]) - 1


def _folder(settings: Settings, job: dict[str, Any]) -> Path:
    return workspace_of(settings, job["id"]).root


async def _rewind(client: httpx.AsyncClient, session_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/sessions/{session_id}/rewind", json=body)


async def _rewound_files(
    client: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> tuple[dict[str, Any], httpx.Response]:
    job = await _run_shell_job(client, fake_llm)
    point = await _before_change(client, job["session_id"])
    return job, await _rewind(client, job["session_id"], to_seq=point, files=True)


async def test_a_file_bash_appended_to_is_restored(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job, rewound = await _rewound_files(strata, fake_llm)

    assert rewound.status_code == 200, rewound.text
    assert (_folder(shell_settings(), job) / "input/notes.txt").read_text() == "first\n"


async def test_a_file_bash_deleted_is_restored(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job, rewound = await _rewound_files(strata, fake_llm)

    assert rewound.status_code == 200, rewound.text
    assert (_folder(shell_settings(), job) / "input/gone.txt").read_text() == "bye\n"


async def test_a_file_bash_made_after_the_point_is_removed(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job, rewound = await _rewound_files(strata, fake_llm)

    assert rewound.status_code == 200, rewound.text
    assert not (_folder(shell_settings(), job) / "output/made.txt").exists()
    assert "output/made.txt" in rewound.json()["workspace"]["deleted"]


async def test_the_rewind_item_says_it_restored_the_files(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    job, rewound = await _rewound_files(strata, fake_llm)

    log = await items(strata, job["session_id"])
    [marker] = [item for item in log if item["kind"] == "rewind"]
    assert marker["files"] is True and marker["seq"] == rewound.json()["seq"]


async def test_undo_with_files_brings_back_the_rewound_away_workspace(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job, rewound = await _rewound_files(strata, fake_llm)

    undone = await _rewind(strata, job["session_id"], to_seq=rewound.json()["from_seq"], files=True)

    assert undone.status_code == 200, undone.text
    folder = _folder(shell_settings(), job)
    assert (folder / "input/notes.txt").read_text() == "first\nx\n"
    assert not (folder / "input/gone.txt").exists()
    assert (folder / "output/made.txt").read_text() == "new\n"


async def test_the_preview_lists_the_file_changes_and_changes_nothing(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job = await _run_shell_job(strata, fake_llm)
    point = await _before_change(strata, job["session_id"])

    preview = await strata.get(
        f"/sessions/{job['session_id']}/rewind-preview", params={"to_seq": point, "files": "true"}
    )

    assert preview.status_code == 200, preview.text
    workspace = preview.json()["workspace"]
    assert workspace["added"] == ["input/gone.txt"]
    assert workspace["changed"] == ["input/notes.txt"]
    assert "output/made.txt" in workspace["deleted"]
    folder = _folder(shell_settings(), job)
    assert (folder / "input/notes.txt").read_text() == "first\nx\n"
    assert (folder / "output/made.txt").exists()
    assert not [i for i in await items(strata, job["session_id"]) if i["kind"] == "rewind"]


async def test_a_chat_turn_start_snapshots_the_sessions_workspace(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job = await _run_shell_job(strata, fake_llm)
    session_id = job["session_id"]
    end_of_job = len(await items(strata, session_id))
    fake_llm.reply(text("noted"))
    said = await strata.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "thanks"}
    )
    assert said.status_code == 200, said.text
    (_folder(shell_settings(), job) / "output/made.txt").write_text("edited by hand\n")

    rewound = await _rewind(strata, session_id, to_seq=end_of_job, files=True)

    assert rewound.status_code == 200, rewound.text
    assert (_folder(shell_settings(), job) / "output/made.txt").read_text() == "new\n"


async def test_files_for_a_session_without_a_workspace_is_422(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI
) -> None:
    fake_llm.reply(text("hi"))
    session_id = await new_session(strata)
    said = await strata.post(
        f"/sessions/{session_id}/messages", params={"wait": "true"}, json={"text": "hello"}
    )
    assert said.status_code == 200, said.text

    rewound = await _rewind(strata, session_id, to_turn=0, files=True)

    assert rewound.status_code == 422, rewound.text
    assert rewound.headers["content-type"].startswith("application/problem+json")
    assert rewound.json()["reason"] == "no-workspace"


async def test_files_at_a_point_without_a_snapshot_is_422_and_changes_nothing(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job = await _run_shell_job(strata, fake_llm)
    head = len(await items(strata, job["session_id"]))  # Bash ran since the last snapshot

    rewound = await _rewind(strata, job["session_id"], to_seq=head, files=True)

    assert rewound.status_code == 422, rewound.text
    assert rewound.json()["reason"] == "no-snapshot"
    assert (_folder(shell_settings(), job) / "input/notes.txt").read_text() == "first\nx\n"
    assert not [i for i in await items(strata, job["session_id"]) if i["kind"] == "rewind"]


async def test_a_snapshot_over_the_byte_bound_is_refused_with_its_reason(
    shell_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    async with serve(shell_settings(snapshot_max_bytes=5)) as (_, client):
        _, rewound = await _rewound_files(client, fake_llm)

    assert rewound.status_code == 422, rewound.text
    assert rewound.json()["reason"] == "snapshot-not-kept"
    assert "STRATA_SNAPSHOT_MAX_BYTES=5" in rewound.json()["detail"]


async def test_files_while_a_movement_runs_is_409_and_changes_nothing(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    gate = threading.Event()
    fake_llm.reply(tool_use("Bash", {"command": MAKE}))
    fake_llm.reply(_transition("change"), held=gate)
    fake_llm.reply(_transition("COMPLETE"))
    job = await submit_job(strata, piece="shell")
    try:
        await wait_until(lambda: _asked(fake_llm, 2))  # Bash has run: its result is sent

        rewound = await _rewind(strata, job["session_id"], to_turn=0, files=True)
    finally:
        gate.set()

    assert rewound.status_code == 409, rewound.text
    assert rewound.json()["reason"] == "session-busy"
    assert (_folder(shell_settings(), job) / "input/gone.txt").read_text() == "bye\n"
    assert (await wait_job(strata, job["id"]))["status"] == "succeeded"


async def _asked(fake_llm: FakeMessagesAPI, requests: int) -> bool:
    return len(fake_llm.requests) >= requests


async def test_snapshots_past_the_bound_per_job_go_oldest_first(
    shell_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    async with serve(shell_settings(snapshot_max_per_job=1)) as (_, client):
        job = await _run_shell_job(client, fake_llm)
        kept = await _before_change(client, job["session_id"])

        rewound = await _rewind(client, job["session_id"], to_turn=0, files=True)

    assert rewound.status_code == 422, rewound.text
    assert rewound.json()["reason"] == "no-snapshot"
    assert rewound.json()["points"] == [kept]  # the `make` movement's snapshot went


async def test_deleting_the_session_removes_its_jobs_snapshots(
    strata: httpx.AsyncClient, fake_llm: FakeMessagesAPI, shell_settings: Callable[..., Settings]
) -> None:
    job = await _run_shell_job(strata, fake_llm)
    store = store_of(shell_settings(), LOCAL_TENANT)
    assert store.snapshots(job["id"])

    deleted = await strata.delete(f"/sessions/{job['session_id']}")

    assert deleted.status_code == 204, deleted.text
    assert store.snapshots(job["id"]) == []
    assert not store.blobs.exists() or not any(store.blobs.iterdir())


@dataclass
class _MovesTheLogFirst:
    """The database, its log moved by a REST task change just before the rewind's write."""

    database: Database
    client: httpx.AsyncClient
    session_id: str

    def read(self) -> AbstractAsyncContextManager[AsyncSession]:
        return self.database.read()

    async def write(self, work: Any) -> Any:
        moved = await self.client.post(
            f"/sessions/{self.session_id}/tasks", json={"subject": "meanwhile"}
        )
        assert moved.status_code == 201, moved.text
        return await self.database.write(work)


async def test_a_log_moved_during_the_restore_puts_the_workspace_back_and_is_409(
    shell_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    settings = shell_settings()
    async with serve(settings) as (app, client):
        job = await _run_shell_job(client, fake_llm)
        point = await _before_change(client, job["session_id"])
        racing = _MovesTheLogFirst(app.state.runtime.database, client, job["session_id"])

        with pytest.raises(Conflict):
            await branching.rewind_with_files(
                cast(UnitsOfWork, racing), settings, LOCAL_TENANT, job["session_id"], to_seq=point
            )
        log = await items(client, job["session_id"])

    assert (_folder(settings, job) / "input/notes.txt").read_text() == "first\nx\n"
    assert (_folder(settings, job) / "output/made.txt").read_text() == "new\n"
    assert not [item for item in log if item["kind"] == "rewind"]


async def test_the_rewound_event_says_it_restored_the_files(
    shell_settings: Callable[..., Settings], fake_llm: FakeMessagesAPI
) -> None:
    async with serve(shell_settings()) as (app, client):
        job, rewound = await _rewound_files(client, fake_llm)
        streamed = await _session_events_until(app, job["session_id"], "session.rewound")

    [event] = [e["data"] for e in streamed if e["event"] == "session.rewound"]
    assert event["files"] is True and event["seq"] == rewound.json()["seq"]
