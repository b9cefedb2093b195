from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Integer,
    String,
    and_,
    bindparam,
    cast,
    exists,
    func,
    inspect,
    or_,
    union_all,
    update,
)
from sqlalchemy import select as core_select
from sqlmodel import col, select

from app.db.models import Job
from app.db.prepared import Peeks, Prepared
from app.db.repositories.rows import RowRepository
from app.db.repositories.sessions import steers_first, usage_params
from app.db.rows import columns_of, detached
from app.db.types import utcnow
from app.domain.jobs import ACTIVE, WAITING, JobKind, JobStatus
from app.domain.usage import Usage

# sorted: a statement built from a set names its statuses in the same order every time
_ACTIVE = sorted(ACTIVE)
_ACTIVE_OR_WAITING = sorted(ACTIVE | WAITING)

# built once: every agent step runs them (see app.db.repositories.sessions)
_J = Job.__table__  # type: ignore[attr-defined]
_STILL_OWNED = Prepared(
    _J.update()
    .where(
        _J.c.id == bindparam("j_id"),
        _J.c.lease_owner == bindparam("j_token"),
        _J.c.status == JobStatus.running,
    )
    .values(updated_at=bindparam("j_now", type_=_J.c.updated_at.type))
)
_ADD_USAGE = Prepared(
    _J.update()
    .where(_J.c.id == bindparam("j_id"))
    .values(
        input_tokens=_J.c.input_tokens + bindparam("u_input"),
        output_tokens=_J.c.output_tokens + bindparam("u_output"),
        cache_read_tokens=_J.c.cache_read_tokens + bindparam("u_cache_read"),
        cache_creation_tokens=_J.c.cache_creation_tokens + bindparam("u_cache_creation"),
    )
)
_TAKE_TREE_MOVEMENT = Prepared(
    _J.update()
    .where(
        _J.c.id == bindparam("j_root"),
        _J.c.tree_movements < bindparam("j_limit", type_=Integer),
    )
    .values(tree_movements=_J.c.tree_movements + 1)
    .returning(_J.c.tree_movements)
)
_SET_INPUT = Prepared(
    _J.update()
    .where(_J.c.id == bindparam("j_id"))
    .values(
        input=bindparam("j_input", type_=_J.c.input.type),
        updated_at=bindparam("j_now", type_=_J.c.updated_at.type),
    )
)


def _holds_lane(jobs: Any) -> Any:
    """A session-lane job that keeps the later ones of its session waiting: queued or
    running, or a chat turn waiting for people (its calls' results are still to come)."""
    # one equality per status, not an IN list: a prepared statement cannot expand one;
    # the statuses alone, so that each is a seek of `(session_id, status, number)`
    statuses = or_(*(jobs.c.status == s for s in [*_ACTIVE, JobStatus.waiting_human]))
    return and_(
        statuses, or_(jobs.c.status != JobStatus.waiting_human, jobs.c.kind == JobKind.chat)
    )


def _claimable(now: Any, limit: Any) -> Any:
    """The numbers of the first `limit` jobs a runner may take, in queue order: queued,
    or running with an expired lease, and not behind an unfinished earlier job of its
    session. The claim and its probe decide alike.

    Each of the two kinds is its own walk of `(status, number)` in queue order that stops
    at `limit`: one condition `queued OR expired` would make SQLite gather every queued
    job's row before sorting, a cost that grows with the queue and falls on the writer.
    PostgreSQL locks each walk's rows `FOR UPDATE SKIP LOCKED`."""
    earlier = _J.alias("earlier")
    blocked = exists().where(
        earlier.c.session_id == _J.c.session_id,
        earlier.c.number < _J.c.number,
        _holds_lane(earlier),
        earlier.c.lane == "session",
    )

    def walk(ready: Any) -> Any:
        return (
            core_select(_J.c.number)
            .where(ready, or_(_J.c.lane != "session", ~blocked))
            .order_by(_J.c.number)
            .limit(limit)
            .with_for_update(skip_locked=True)
            .subquery()
        )

    queued = walk(_J.c.status == JobStatus.queued)
    expired = walk(and_(_J.c.status == JobStatus.running, _J.c.lease_expires_at < now))
    both = union_all(core_select(queued.c.number), core_select(expired.c.number)).subquery()
    return core_select(both.c.number).order_by(both.c.number).limit(limit)


CLAIMABLE = Prepared(_claimable(bindparam("now"), 1))
"""Whether any job is claimable now (`{"now": …}`): what a runner asks, through
`Database.peek`, before it queues a claim for the writer; an idle runner asks it every
poll."""


async def any_claimable(units: Peeks, now: datetime) -> bool:
    """`CLAIMABLE` outside any unit of work: whether a runner's claim would take a job."""
    return bool(await units.peek(CLAIMABLE, {"now": now}))


_NOW = bindparam("now", type_=_J.c.updated_at.type)
_CLAIM = Prepared(
    _J.update()
    .where(_J.c.number.in_(_claimable(_NOW, bindparam("limit", type_=Integer))))
    .values(
        status=JobStatus.running,
        attempts=_J.c.attempts + 1,
        # SET reads the row as it was: `attempts + 1` is the new attempt
        lease_owner=bindparam("owner", type_=String) + "#" + cast(_J.c.attempts + 1, String),
        lease_expires_at=bindparam("until", type_=_J.c.lease_expires_at.type),
        started_at=func.coalesce(_J.c.started_at, _NOW),
        updated_at=_NOW,
    )
    .returning(*_J.c)
)
_IS_ACTIVE = or_(*(_J.c.status == status for status in _ACTIVE))
# a chat message's admission and its busy check (`app.services.chat.send_message`)
_ACTIVE_COUNT = Prepared(
    core_select(func.count())
    .select_from(_J)
    .where(_J.c.tenant == bindparam("j_tenant"), _IS_ACTIVE)
)
_ADMISSION_LOCK = Prepared(
    core_select(func.pg_advisory_xact_lock(func.hashtext(bindparam("j_lock", type_=String))))
)
_SESSION_BUSY = Prepared(
    core_select(_J.c.id)
    .where(_J.c.session_id == bindparam("j_session"), _J.c.lane == "session", _holds_lane(_J))
    .limit(1)
)
_COLUMNS = columns_of(Job)
_ROW = Prepared(core_select(*_J.c).where(_J.c.id == bindparam("j_id")))


async def peek_job(units: Peeks, job_id: str) -> Job | None:
    """The job's row outside any unit of work (one prepared statement, `Database.peek`),
    detached: what a request waiting for the job reads at each wake-up."""
    rows = await units.peek(_ROW, {"j_id": job_id})
    return detached(Job, _COLUMNS, rows[0]) if rows else None


# what a status change sets (`app.services.jobs.set_status`), and nothing else
_STATUS_COLUMNS = (
    "status",
    "updated_at",
    "error",
    "result",
    "finished_at",
    "lease_owner",
    "lease_expires_at",
)
_SAVE_STATUS = Prepared(
    _J.update()
    .where(_J.c.number == bindparam("j_number"))
    .values({name: bindparam(f"j_{name}", type_=_J.c[name].type) for name in _STATUS_COLUMNS})
)


class JobRepository(RowRepository):
    async def get(self, job_id: str) -> Job | None:
        result = await self.db.exec(select(Job).where(Job.id == job_id))
        return result.first()

    async def locked(self, job_id: str) -> Job | None:
        """The row, locked until the transaction ends (`FOR UPDATE` on PostgreSQL; a
        SQLite write transaction is exclusive already): what is decided from it holds
        against a concurrent cancel."""
        result = await self.db.exec(select(Job).where(Job.id == job_id).with_for_update())
        return result.first()

    async def cancel_requested(self, job_id: str) -> bool:
        """Whether the job should stop: asked to cancel, or gone. One column, no ORM
        object: the agent loop asks before every request and every tool."""
        query = select(Job.cancel_requested).where(Job.id == job_id)
        flag = (await self.db.exec(query)).first()
        return flag is None or flag

    async def interrupt_requested(self, job_id: str) -> bool:
        """Whether the job's cancel is the user's interrupt (`interrupt_job`)."""
        query = select(Job.interrupt_requested).where(Job.id == job_id)
        return bool((await self.db.exec(query)).first())

    async def lane_head(self, session_id: str) -> Job | None:
        """The session's first session-lane job that holds its lane (`_holds_lane`: queued,
        running, or a chat turn waiting for people): the turn a user would interrupt, its
        row locked until the transaction ends (PostgreSQL)."""
        query = (
            select(Job)
            .where(
                Job.session_id == session_id,
                Job.lane == "session",
                _holds_lane(Job.__table__),  # type: ignore[attr-defined]
            )
            .order_by(col(Job.number))
            .limit(1)
            .with_for_update()
        )
        return (await self.db.exec(query)).first()

    async def steers_to_take(self, session_id: str) -> list[Job]:
        """The steers the session's running turn may take now (`steers_first`), in queue
        order, their rows locked until the transaction ends (PostgreSQL: a concurrent
        cancel or take waits, then sees them no longer queued)."""
        query = (
            select(Job).where(steers_first(session_id)).order_by(col(Job.number)).with_for_update()
        )
        return list((await self.db.exec(query)).all())

    async def active_count(self, tenant: str) -> int:
        """How many jobs of the tenant are queued or running."""
        return int((await _ACTIVE_COUNT.execute(self.db, {"j_tenant": tenant})).rows[0][0])

    async def lock_tenant_admission(self, tenant: str) -> None:
        """Hold the tenant's admission lock until the transaction ends, so that two units
        queueing its jobs at once count one after the other (PostgreSQL: a transaction
        advisory lock; a SQLite write transaction is exclusive already)."""
        if self.db.get_bind().dialect.name == "postgresql":
            await _ADMISSION_LOCK.execute(self.db, {"j_lock": f"strata.admission:{tenant}"})

    async def session_is_busy(self, session_id: str) -> bool:
        return bool((await _SESSION_BUSY.execute(self.db, {"j_session": session_id})).rows)

    async def claim(self, owner: str, until: datetime, *, limit: int) -> list[Job]:
        """Lease the first `limit` jobs a runner may take to `owner`, in one prepared
        statement (a statement unit may run it); returns them as leased, in queue order.

        A runner may take a job that is queued, or running with an expired lease, and
        not behind an unfinished earlier job of its session (so at most one job of a
        session, its earliest). The lease token names the attempt too, so a runner that
        claims the same job again later never mistakes an old lease for its own.

        The rows are locked `FOR UPDATE SKIP LOCKED` (PostgreSQL): a job another
        worker is claiming right now is passed over, never claimed twice. SQLite
        renders no lock clause; its writing transactions (`BEGIN IMMEDIATE`) are
        exclusive already, so the second claimer sees the job taken."""
        params = {"now": utcnow(), "limit": limit, "owner": owner, "until": until}
        rows = (await _CLAIM.execute(self.db, params)).rows
        number = _COLUMNS.index("number")
        return [detached(Job, _COLUMNS, row) for row in sorted(rows, key=lambda row: row[number])]

    async def save_status(self, job: Job) -> None:
        """Write the status change made on `job`. A job this unit of work holds is flushed
        by the ORM with whatever else changed on it; a detached one, a runner's own clean
        copy (`app.services.leases.held_job`), by one prepared statement of the columns a
        status change sets (the others may have been written since by statements of their
        own: usage counters, a cancel request)."""
        if not inspect(job).detached:
            self.db.add(job)
            await self.db.flush()
            return
        params = {f"j_{name}": getattr(job, name) for name in _STATUS_COLUMNS}
        await _SAVE_STATUS.execute(self.db, {"j_number": job.number, **params})

    async def renew_leases(
        self, leases: dict[str, str], until: datetime
    ) -> tuple[set[str], set[str]]:
        """Extend the leases still held (job id → lease token); returns the ids held, and
        those of them whose cancel was asked.

        It never waits for a row lock (PostgreSQL): the rows are locked `FOR UPDATE SKIP
        LOCKED`, and a row another transaction holds (a job's own fenced write, or one
        that also locks its tree's root, `take_tree_movement`) is passed over this beat
        and counts as held while its token matches. Waiting there could deadlock: a
        fenced write holds its job's row and wants its root's, which this statement may
        hold while it waits for the first."""
        if not leases:
            return set(), set()
        held = and_(
            or_(
                *(
                    and_(col(Job.id) == job_id, col(Job.lease_owner) == token)
                    for job_id, token in leases.items()
                )
            ),
            col(Job.status) == JobStatus.running,
        )
        free = select(Job.number).where(held).with_for_update(skip_locked=True)
        stmt = (
            update(Job)
            .where(col(Job.number).in_(free.scalar_subquery()))
            .values(lease_expires_at=until)
            .returning(col(Job.id), col(Job.cancel_requested))
            .execution_options(synchronize_session=False)
        )
        found: dict[str, bool] = {
            job_id: bool(cancel) for job_id, cancel in (await self.db.exec(stmt)).all()
        }
        if len(found) < len(leases):  # passed over, or lost: a plain read tells which
            query = select(Job.id, Job.cancel_requested).where(held)
            for job_id, cancel in (await self.db.exec(query)).all():
                found.setdefault(job_id, bool(cancel))
        return set(found), {job_id for job_id, cancel in found.items() if cancel}

    async def still_owned(self, job_id: str, token: str) -> bool:
        """Whether `token` still holds the running job's lease, in one UPDATE: it takes
        the row's lock (PostgreSQL), so a concurrent claim waits for this transaction."""
        params = {"j_id": job_id, "j_token": token, "j_now": utcnow()}
        return bool((await _STILL_OWNED.execute(self.db, params)).rowcount)

    async def take_tree_movement(self, root_id: str, limit: int) -> int | None:
        """Count one more movement begun in the job tree of `root_id`, in one statement that
        locks the root's row (PostgreSQL) so the tree's jobs take them one at a time; the
        count so far, or None when the tree has begun `limit` already (or the root is gone)."""
        rows = (
            await _TAKE_TREE_MOVEMENT.execute(self.db, {"j_root": root_id, "j_limit": limit})
        ).rows
        return int(rows[0][0]) if rows else None

    async def count_children(self, parent_id: str) -> int:
        query = select(func.count()).select_from(Job).where(Job.parent_job_id == parent_id)
        return int((await self.db.exec(query)).one())

    async def set_input(self, job_id: str, value: dict[str, Any]) -> None:
        """A running job's `input`, as one prepared statement (a statement unit may run it)."""
        await _SET_INPUT.execute(self.db, {"j_id": job_id, "j_input": value, "j_now": utcnow()})

    async def add_usage(self, job_id: str, usage: Usage) -> None:
        await _ADD_USAGE.execute(self.db, {"j_id": job_id, **usage_params(usage)})

    async def list_page(
        self,
        tenant: str,
        *,
        limit: int,
        before_id: str | None,
        session_id: str | None,
        status: str | None,
        parent_job_id: str | None = None,
    ) -> list[Job]:
        query = select(Job).where(Job.tenant == tenant)
        if session_id is not None:
            query = query.where(Job.session_id == session_id)
        if parent_job_id is not None:
            query = query.where(Job.parent_job_id == parent_job_id)
        if status is not None:
            query = query.where(Job.status == status)
        if before_id is not None:
            query = query.where(col(Job.id) < before_id)
        query = query.order_by(col(Job.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def lane_statuses(self, session_ids: list[str]) -> dict[str, set[str]]:
        """The distinct statuses of the session-lane jobs of these sessions that are still
        queued, running or waiting (what `session_status` reads)."""
        if not session_ids:
            return {}
        query = (
            select(Job.session_id, Job.status)
            .where(
                col(Job.session_id).in_(session_ids),
                col(Job.lane) == "session",
                col(Job.status).in_(_ACTIVE_OR_WAITING),
            )
            .distinct()
        )
        found: dict[str, set[str]] = {}
        for session_id, status in (await self.db.exec(query)).all():
            found.setdefault(session_id, set()).add(status)
        return found

    async def active_of_kind(self, session_id: str, kind: str) -> Job | None:
        query = select(Job).where(
            Job.session_id == session_id, Job.kind == kind, col(Job.status).in_(_ACTIVE)
        )
        return (await self.db.exec(query.limit(1))).first()

    async def children(self, parent_id: str) -> list[Job]:
        return await self.children_of([parent_id])

    async def children_of(self, parent_ids: list[str]) -> list[Job]:
        """The subtasks of any of `parent_ids`, oldest first."""
        if not parent_ids:
            return []
        query = select(Job).where(col(Job.parent_job_id).in_(parent_ids)).order_by(col(Job.number))
        return list((await self.db.exec(query)).all())
