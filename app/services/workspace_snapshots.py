"""Snapshots of a job's workspace at each movement start and chat turn start, and a
rewind's restore of the folder (`files: true`); the store is `app.engine.snapshots`.

A snapshot is taken at a point of the session's log: `seq`, the log's end when it was
taken. The snapshot of a point `S` is the first taken at or after it (among several at
one `seq`, the last taken), provided nothing between `S` and it may have changed the
folder: an assistant message (its tool calls run once it is written), a tool result, or
a rewind that restored files. A turn's end and the next turn's start are thus the same
workspace, and so are the log's end before a rewind and its safety snapshot. The
workspace of a session is that of the piece jobs that ran movements in it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from pathlib import Path

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.items import ItemRepository
from app.domain.errors import InvalidInput
from app.engine.snapshots import Bounds, Changes, Reason, SnapshotRef, SnapshotStore
from app.services.piece_jobs import workspace_of
from app.settings import Settings

logger = logging.getLogger("strata.snapshots")

# items after which the folder may differ: tool calls run once their message is written
_CHANGING = ("assistant_message", "tool_result", "rewind")
_BETWEEN_LIMIT = 1000


def store_of(settings: Settings, tenant: str) -> SnapshotStore:
    bounds = Bounds(
        max_per_job=settings.snapshot_max_per_job,
        max_bytes=settings.snapshot_max_bytes,
        tenant_max_bytes=settings.snapshot_tenant_max_bytes,
    )
    return SnapshotStore(Path(settings.data_dir) / "snapshots", tenant, bounds)


async def _take(
    settings: Settings, job_id: str, tenant: str, session_id: str, seq: int, reason: Reason
) -> None:
    store = store_of(settings, tenant)
    root = workspace_of(settings, job_id).root
    try:
        manifest = await asyncio.to_thread(store.take, root, job_id, session_id, seq, reason)
    except OSError:  # the agent's work goes on; a rewind to this point is then refused
        logger.exception("the %s snapshot of job %s at seq %s failed", reason, job_id, seq)
        return
    if not manifest.kept:
        logger.warning(
            "the %s snapshot of job %s at seq %s was not kept: %s",
            reason,
            job_id,
            seq,
            manifest.note,
        )


async def at_movement_start(settings: Settings, job: Job, seq: int) -> None:
    """The job's workspace as the log ends at `seq`, before its movement opens."""

    def register() -> None:
        store_of(settings, job.tenant).add_session_job(job.session_id, job.id)

    await asyncio.to_thread(register)
    await _take(settings, job.id, job.tenant, job.session_id, seq, "movement")


async def at_turn_start(settings: Settings, job: Job, seq: int) -> None:
    """The session's workspace (its last piece job's), if it has one, as the chat turn
    starts: one small file read for a session without any."""
    jobs = store_of(settings, job.tenant).session_jobs(job.session_id)
    if jobs:
        await _take(settings, jobs[-1], job.tenant, job.session_id, seq, "turn")


@dataclass(frozen=True)
class Found:
    store: SnapshotStore
    ref: SnapshotRef
    root: Path


async def snapshot_at(
    db: AsyncSession, settings: Settings, tenant: str, session_id: str, seq: int
) -> Found:
    """The snapshot of the point `seq` (see the module docstring), or a 422 saying why
    there is none: no workspace, none taken there, or one over a bound."""
    store = store_of(settings, tenant)
    jobs = await asyncio.to_thread(store.session_jobs, session_id)
    if not jobs:
        raise InvalidInput(
            "the session has no job workspace to restore (`files: true` restores the folder "
            "of a piece job run in the session)",
            field="files",
            reason="no-workspace",
        )
    refs = [ref for job_id in jobs for ref in await asyncio.to_thread(store.snapshots, job_id)]
    later = sorted((r for r in refs if r.seq >= seq), key=lambda r: (r.seq, -r.taken_ns))
    if later and not await _changed_between(db, session_id, seq, later[0].seq):
        ref = later[0]
    else:
        points = sorted({r.seq for r in refs})
        raise InvalidInput(
            f"no snapshot of the workspace shows it as the log ended at seq {seq}; the "
            f"workspace was taken at seqs {points}",
            field="files",
            reason="no-snapshot",
            points=points,
        )
    manifest = await asyncio.to_thread(store.manifest, ref)
    if not manifest.kept:
        raise InvalidInput(
            f"the snapshot of the workspace at seq {ref.seq} was not kept: {manifest.note}",
            field="files",
            reason="snapshot-not-kept",
        )
    return Found(store, ref, workspace_of(settings, ref.job_id).root)


async def _changed_between(db: AsyncSession, session_id: str, after: int, upto: int) -> bool:
    if upto == after:
        return False
    rows = await ItemRepository(db).of_kinds_between(
        session_id, _CHANGING, after_seq=after, upto=upto, limit=_BETWEEN_LIMIT
    )
    return any(row.kind != "rewind" or row.payload.get("files") for row in rows)


async def changes_at(
    db: AsyncSession, settings: Settings, tenant: str, session_id: str, seq: int
) -> tuple[Found, Changes]:
    """What restoring the point `seq` would change in the folder, changing nothing."""
    found = await snapshot_at(db, settings, tenant, session_id, seq)
    changes = await asyncio.to_thread(found.store.changes, found.root, found.ref)
    return found, changes


@dataclass(frozen=True)
class Restored:
    safety: SnapshotRef
    changes: Changes


async def restore(found: Found, session_id: str, head: int) -> Restored:
    """Restore the folder to the snapshot found, after a safety snapshot of it as the
    log ends now (`head`), which a rewind back to `head` with `files: true` restores; a
    safety snapshot over a bound refuses the restore (422), which could not be undone."""
    job_id = found.ref.job_id
    safety = await asyncio.to_thread(
        functools.partial(
            found.store.take, found.root, job_id, session_id, head, "safety", keep=found.ref
        )
    )
    if not safety.kept:
        raise InvalidInput(
            f"the workspace could not be saved before the restore, which could then not be "
            f"undone: {safety.note}",
            field="files",
            reason="snapshot-not-kept",
        )
    changes = await asyncio.to_thread(found.store.restore, found.root, found.ref)
    return Restored(found.store.ref_of(safety), changes)


async def put_back(found: Found, restored: Restored) -> None:
    """The folder as it was before `restore`, from its safety snapshot."""
    await asyncio.to_thread(found.store.restore, found.root, restored.safety)


def remove_snapshots(settings: Settings, tenant: str, job_ids: list[str]) -> None:
    """Blocking (run it in a thread): the snapshots of deleted jobs."""
    store_of(settings, tenant).remove_jobs(job_ids)
