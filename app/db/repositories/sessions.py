from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import (
    Boolean,
    Text,
    and_,
    bindparam,
    case,
    cast,
    exists,
    false,
    func,
    true,
    update,
)
from sqlalchemy import select as core_select
from sqlalchemy.exc import NoResultFound
from sqlmodel import col, select

from app.db.models import Item, Job, Session, TenantToolPolicy
from app.db.prepared import Peeks, Prepared
from app.db.repositories.items import parse_stored_json
from app.db.repositories.rows import RowRepository
from app.db.rows import columns_of, detached
from app.db.types import utcnow
from app.domain.jobs import ACTIVE, WAITING, JobStatus
from app.domain.reminder import ReminderState
from app.domain.sessions import SessionStatus
from app.domain.usage import Usage


@dataclass(frozen=True)
class Probe:
    """What a running job asks once per step: where the log ends, the reminder's
    counters, whether its cancel was asked (None: the session or job is gone), whether
    that cancel is the user's interrupt, and whether a steer waits for the turn
    (`steer_pending`, see `PROBE`)."""

    last_seq: int
    segment: int
    reminder: ReminderState
    cancel_requested: bool
    interrupt_requested: bool = False
    steer_pending: bool = False
    # the session's stored lineage, when the probe came from its whole row (a turn's
    # start): its task list is then rebuilt without reading the row again
    lineage_read: bool = False
    lineage: dict[str, Any] | None = None


@dataclass(frozen=True)
class SeqSlot:
    """Where the next item of a session goes."""

    seq: int
    turn: int
    segment: int
    tenant: str


# The statements every agent step runs, built once as Core statements: no ORM
# bookkeeping, no expression building per call (both cost more than SQLite's work).
_S = Session.__table__  # type: ignore[attr-defined]


def _when(flag: str, then: Any, otherwise: Any) -> Any:
    return case((bindparam(flag, type_=Boolean) == true(), then), else_=otherwise)


_COLUMNS = columns_of(Session)
SESSION_ROW = Prepared(core_select(*_S.c).where(_S.c.id == bindparam("s_id")))
"""The session's whole row (`{"s_id": …}`), read by `session_of`: what a turn starts from."""


async def peek_session_row(units: Peeks, session_id: str) -> list[tuple[Any, ...]]:
    """`SESSION_ROW` outside any unit of work (`session_of` makes the row a model)."""
    return await units.peek(SESSION_ROW, {"s_id": session_id})


_LINEAGE = Prepared(core_select(cast(_S.c.lineage, Text)).where(_S.c.id == bindparam("s_id")))

_TP = TenantToolPolicy.__table__  # type: ignore[attr-defined]
_TURN_START = Prepared(
    core_select(
        *_S.c,
        core_select(_TP.c.rules)
        .where(_TP.c.tenant == _S.c.tenant)
        .scalar_subquery()
        .label("tenant_rules"),
    ).where(_S.c.id == bindparam("s_id"))
)


async def peek_turn_start(
    units: Peeks, session_id: str
) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]]]:
    """What a turn starts from, in one statement outside any unit of work: the session's
    row (as `SESSION_ROW` reads it) and its tenant's tool policy rules."""
    rows = await units.peek(_TURN_START, {"s_id": session_id})
    if not rows:
        return [], []
    *row, rules = rows[0]
    return [tuple(row)], list(rules or [])


def session_of(rows: list[tuple[Any, ...]]) -> Session | None:
    """The session `SESSION_ROW` read (detached), or None when there was none."""
    return detached(Session, _COLUMNS, rows[0]) if rows else None


def probe_from(session: Session, cancel_requested: bool, interrupt_requested: bool) -> Probe:
    """What `PROBE` would say, from a session row just read (`SESSION_ROW`) and the job's
    cancel flags as the job has them; a steer is taken at a step's end, never before the
    turn's first request, so none is looked for."""
    probe = _probe(
        (
            session.last_seq,
            session.current_segment,
            session.llm_requests,
            session.last_task_write_request,
            session.last_reminder_request,
            cancel_requested,
            interrupt_requested,
            False,
        )
    )
    return replace(probe, lineage_read=True, lineage=session.lineage)


_ALLOCATE = Prepared(
    _S.update()
    .where(_S.c.id == bindparam("s_id"))
    .values(
        last_seq=_S.c.last_seq + 1,
        current_turn=_S.c.current_turn + bindparam("s_step"),
        updated_at=bindparam("s_now", type_=_S.c.updated_at.type),
        # a task write outside the model's requests (REST) counts, for the reminder's
        # timing, as made in the last request answered
        last_task_write_request=_when("s_wrote", _S.c.llm_requests, _S.c.last_task_write_request),
    )
    .returning(_S.c.last_seq, _S.c.current_turn, _S.c.current_segment, _S.c.tenant)
)


def _plus_usage(table: Any) -> dict[str, Any]:
    return {
        "input_tokens": table.c.input_tokens + bindparam("u_input"),
        "output_tokens": table.c.output_tokens + bindparam("u_output"),
        "cache_read_tokens": table.c.cache_read_tokens + bindparam("u_cache_read"),
        "cache_creation_tokens": table.c.cache_creation_tokens + bindparam("u_cache_creation"),
    }


def usage_params(usage: Usage) -> dict[str, int]:
    return {
        "u_input": usage.input_tokens,
        "u_output": usage.output_tokens,
        "u_cache_read": usage.cache_read_input_tokens,
        "u_cache_creation": usage.cache_creation_input_tokens,
    }


_LIKE_SPECIAL = re.compile(r"[\\%_]")


def _jobs_in(statuses: frozenset[str]) -> Any:
    """A session-lane job of the session being selected is in one of `statuses`."""
    return exists().where(
        col(Job.session_id) == col(Session.id),
        col(Job.lane) == "session",
        col(Job.status).in_(sorted(statuses)),
    )


def _status_is(status: SessionStatus) -> list[Any]:
    """The conditions under which a session has `status` (see `session_status`)."""
    if status is SessionStatus.running:
        return [_jobs_in(ACTIVE)]
    if status is SessionStatus.waiting:
        return [~_jobs_in(ACTIVE), _jobs_in(WAITING)]
    return [~_jobs_in(ACTIVE), ~_jobs_in(WAITING)]


# an LLM response's place in the log, and the request it answered counted
_ALLOCATE_ANSWERED = Prepared(
    _S.update()
    .where(_S.c.id == bindparam("s_id"))
    .values(
        last_seq=_S.c.last_seq + 1,
        updated_at=bindparam("s_now", type_=_S.c.updated_at.type),
        llm_requests=_S.c.llm_requests + 1,
        last_task_write_request=_when(
            "s_wrote", _S.c.llm_requests + 1, _S.c.last_task_write_request
        ),
        last_reminder_request=_when(
            "s_reminded", _S.c.llm_requests + 1, _S.c.last_reminder_request
        ),
        **_plus_usage(_S),
    )
    .returning(_S.c.last_seq, _S.c.current_turn, _S.c.current_segment, _S.c.tenant)
)
_J = Job.__table__  # type: ignore[attr-defined]


def steers_first(session: Any) -> Any:
    """The condition on `jobs` of a steer the running turn of `session` (an id, or a bound
    parameter) may take: a queued
    chat message marked `steer`, with no other queued job of the session's lane before
    it (a message queued before the steer is answered first; the steer then goes into
    that message's turn or becomes a turn of its own)."""
    before = _J.alias("before")
    return and_(
        _J.c.session_id == session,
        _J.c.status == JobStatus.queued,
        _J.c.steer == true(),
        ~exists().where(
            before.c.session_id == _J.c.session_id,
            before.c.status == JobStatus.queued,
            before.c.lane == "session",
            before.c.steer == false(),
            before.c.number < _J.c.number,
        ),
    )


def _of_job(column: Any) -> Any:
    return core_select(column).where(_J.c.id == bindparam("j_id")).scalar_subquery()


_PROBE = Prepared(
    core_select(
        _S.c.last_seq,
        _S.c.current_segment,
        _S.c.llm_requests,
        _S.c.last_task_write_request,
        _S.c.last_reminder_request,
        _of_job(_J.c.cancel_requested),
        _of_job(_J.c.interrupt_requested),
        exists().where(steers_first(bindparam("s_id"))),
    ).where(_S.c.id == bindparam("s_id"))
)


_RESERVE_TURN = Prepared(
    _S.update()
    .where(_S.c.id == bindparam("s_id"), _S.c.tenant == bindparam("s_tenant"))
    .values(
        current_turn=_S.c.current_turn + 1,
        updated_at=bindparam("s_now", type_=_S.c.updated_at.type),
    )
    .returning(_S.c.current_turn)
)
_TENANT = core_select(_S.c.tenant).where(_S.c.id == bindparam("s_id"))
_TENANT_OF = Prepared(_TENANT)
_TENANT_OF_LOCKED = Prepared(_TENANT.with_for_update())
_TENANT_LINEAGE = Prepared(
    core_select(_S.c.tenant, cast(_S.c.lineage, Text)).where(_S.c.id == bindparam("s_id"))
)


def _stored_lineage(value: Any) -> dict[str, Any] | None:
    """A lineage column as a statement read it (JSON text, or parsed already)."""
    if value is None:
        return None
    stored = parse_stored_json(value) if isinstance(value, str) else value
    return stored if isinstance(stored, dict) else None


def probe_params(session_id: str, job_id: str) -> dict[str, str]:
    return {"s_id": session_id, "j_id": job_id}


PROBE = _PROBE
"""One statement: the session's log end and reminder counters, the job's cancel flags,
and whether a steer waits for it (`steers_first`). A running job asks it once per step,
through `Database.peek`."""


async def peek_probe(units: Peeks, session_id: str, job_id: str) -> Probe | None:
    """`PROBE` outside any unit of work; None when the session or the job is gone."""
    return probe_of(await units.peek(PROBE, probe_params(session_id, job_id)))


def probe_of(rows: list[tuple[Any, ...]]) -> Probe | None:
    if not rows or rows[0][5] is None:  # the session or the job is gone
        return None
    return _probe(rows[0])


def _probe(row: tuple[Any, ...]) -> Probe:
    """A probe from `PROBE`'s columns, in its order."""
    return Probe(
        last_seq=row[0],
        segment=row[1],
        reminder=ReminderState(
            requests_done=row[2], last_task_write_request=row[3], last_reminder_request=row[4]
        ),
        cancel_requested=bool(row[5]),
        interrupt_requested=bool(row[6]),
        steer_pending=bool(row[7]),
    )


def _slot_of(rows: list[tuple[Any, ...]], session_id: str) -> SeqSlot:
    """The slot an allocating UPDATE … RETURNING gave (`_ALLOCATE`, `_ALLOCATE_ANSWERED`)."""
    if not rows:
        raise NoResultFound(f"no session {session_id!r}")
    seq, turn, segment, tenant = rows[0]
    return SeqSlot(seq=seq, turn=turn, segment=segment, tenant=tenant)


class SessionRepository(RowRepository):
    async def session_row(self, session_id: str) -> list[tuple[Any, ...]]:
        """`SESSION_ROW` in this unit of work (`session_of` makes the row a model)."""
        return (await SESSION_ROW.execute(self.db, {"s_id": session_id})).rows

    async def get(self, tenant: str, session_id: str) -> Session | None:
        row = await self.db.get(Session, session_id)
        if row is None or row.tenant != tenant:
            return None
        return row

    async def list_page(
        self,
        tenant: str,
        *,
        limit: int,
        before_id: str | None,
        title_contains: str | None = None,
        status: SessionStatus | None = None,
    ) -> list[Session]:
        """Newest first. Ids are time-ordered, so `id < cursor` is 'older than the cursor'.
        `title_contains` matches case-insensitively; `status` as `SessionStatus` defines it."""
        query = select(Session).where(Session.tenant == tenant)
        if before_id is not None:
            query = query.where(col(Session.id) < before_id)
        if title_contains:
            pattern = "%" + _LIKE_SPECIAL.sub(r"\\\g<0>", title_contains) + "%"
            query = query.where(col(Session.title).ilike(pattern, escape="\\"))
        if status is not None:
            query = query.where(*_status_is(status))
        query = query.order_by(col(Session.id).desc()).limit(limit)
        return list((await self.db.exec(query)).all())

    async def allocate_seq(
        self, session_id: str, *, new_turn: bool, wrote_tasks: bool = False
    ) -> SeqSlot:
        """Reserve the next `seq` with one atomic UPDATE … RETURNING (which also notes a
        REST task write, `wrote_tasks`, for the reminder).

        The row lock (PostgreSQL) or the write lock (SQLite) makes concurrent
        appends queue here, so a seq is never handed out twice or skipped.
        """
        params = {
            "s_id": session_id,
            "s_step": 1 if new_turn else 0,
            "s_now": utcnow(),
            "s_wrote": wrote_tasks,
        }
        return _slot_of((await _ALLOCATE.execute(self.db, params)).rows, session_id)

    async def reserve_turn(self, session_id: str, tenant: str) -> int | None:
        """Take the next turn number of the tenant's session (None: the tenant has no such
        session, and nothing changed). First statement of a chat enqueue: it also locks
        the session row, so busy checks after it see every earlier enqueue."""
        params = {"s_id": session_id, "s_tenant": tenant, "s_now": utcnow()}
        rows = (await _RESERVE_TURN.execute(self.db, params)).rows
        return int(rows[0][0]) if rows else None

    async def tenant_of(self, session_id: str, *, lock: bool = False) -> str | None:
        """Whose the session is (None: there is none), in one prepared statement; with
        `lock` its row is held for the transaction (PostgreSQL)."""
        statement = _TENANT_OF_LOCKED if lock else _TENANT_OF
        rows = (await statement.execute(self.db, {"s_id": session_id})).rows
        return str(rows[0][0]) if rows else None

    async def tenant_and_lineage(self, session_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """Whose the session is and its stored lineage (None: there is no session), in one
        prepared statement: a read of the log checks the tenant and reads the lineage."""
        rows = (await _TENANT_LINEAGE.execute(self.db, {"s_id": session_id})).rows
        return (str(rows[0][0]), _stored_lineage(rows[0][1])) if rows else None

    async def lock(self, session_id: str) -> Session | None:
        """The session, its row held for this transaction (on SQLite a plain read: its
        writing transactions are exclusive already)."""
        query = select(Session).where(col(Session.id) == session_id).with_for_update()
        return (await self.db.exec(query)).first()

    async def probe(self, session_id: str, job_id: str) -> Probe | None:
        """The probe in this unit of work (see `probe_of`)."""
        return probe_of((await _PROBE.execute(self.db, probe_params(session_id, job_id))).rows)

    async def allocate_answered(
        self,
        session_id: str,
        *,
        wrote_tasks: bool,
        usage: Usage | None = None,
        carried_reminder: bool = False,
    ) -> SeqSlot:
        """`allocate_seq` for a main-thread LLM response, with the request it answered
        counted by the same statement: remembered if it wrote tasks, and if it carried
        the task reminder (counted as shown only now that it got an answer); its usage,
        if given, is added too."""
        params = {
            "s_id": session_id,
            "s_now": utcnow(),
            "s_wrote": wrote_tasks,
            "s_reminded": carried_reminder,
            **usage_params(usage or Usage()),
        }
        return _slot_of((await _ALLOCATE_ANSWERED.execute(self.db, params)).rows, session_id)

    async def last_seq(self, session_id: str) -> int | None:
        """Where the log ends, the row locked for this transaction (PostgreSQL)."""
        query = select(Session.last_seq).where(col(Session.id) == session_id).with_for_update()
        return (await self.db.exec(query)).first()

    async def start_segment(self, session_id: str) -> int:
        """Open a segment never used before: items appended from now on belong to it.

        Past the highest segment any item has, not just the current one: a piece job
        gives the chat its segment back when it stops, so segments above the current
        one may hold the job's items."""
        used = (
            core_select(func.coalesce(func.max(Item.segment), 0))
            .where(col(Item.session_id) == session_id)
            .scalar_subquery()
        )
        current = col(Session.current_segment)
        stmt = (
            update(Session)
            .where(col(Session.id) == session_id)
            .values(
                current_segment=case((used > current, used), else_=current) + 1, updated_at=utcnow()
            )
            .returning(col(Session.current_segment))
        )
        return int((await self.db.exec(stmt)).one()[0])

    async def set_segment(self, session_id: str, segment: int) -> None:
        """Make `segment` (one that exists) the session's current one again."""
        stmt = (
            update(Session)
            .where(col(Session.id) == session_id)
            .values(current_segment=segment, updated_at=utcnow())
        )
        await self.db.exec(stmt)

    async def with_lineage(self, session_ids: list[str]) -> list[Session]:
        """Those of these sessions that were forked or rewound (that have a lineage)."""
        if not session_ids:
            return []
        query = select(Session).where(
            col(Session.id).in_(session_ids), col(Session.lineage).is_not(None)
        )
        return list((await self.db.exec(query)).all())

    async def lineage(self, session_id: str) -> dict[str, Any] | None:
        """The session's stored lineage (`app.domain.lineage`); None: it reads its own log.
        One prepared statement (a job reads it in its snapshot of prepared statements)."""
        rows = (await _LINEAGE.execute(self.db, {"s_id": session_id})).rows
        return _stored_lineage(rows[0][0]) if rows else None

    async def forks_of(self, session_ids: list[str]) -> list[str]:
        """The sessions forked from any of `session_ids` (their logs read those)."""
        query = select(Session.id).where(col(Session.forked_from).in_(session_ids))
        return list((await self.db.exec(query)).all())

    async def set_lineage(self, session_id: str, lineage: dict[str, Any], *, segment: int) -> None:
        """A rewind: the session reads its log as `lineage` says, from `segment` on."""
        stmt = (
            update(Session)
            .where(col(Session.id) == session_id)
            .values(lineage=lineage, current_segment=segment, updated_at=utcnow())
        )
        await self.db.exec(stmt)

    async def current_segment(self, session_id: str) -> int | None:
        query = select(Session.current_segment).where(col(Session.id) == session_id)
        return (await self.db.exec(query)).first()
