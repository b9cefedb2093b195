"""A chat message: the user's item and the job that answers it, in one transaction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from enum import StrEnum
from typing import Any

from sqlalchemy.orm.attributes import set_committed_value
from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Job
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository
from app.domain.client_tools import ClientTool, check_client_tools
from app.domain.errors import Conflict, InvalidInput
from app.domain.ids import new_id
from app.domain.items import ItemPayload, Origin, TextBlock, UserBlock, UserMessage, user_text
from app.domain.jobs import JobKind
from app.services.branching import rewind_before_seq
from app.services.items import add_item, append_item
from app.services.jobs import enqueue, interrupt_job
from app.services.sessions import get_session, no_session


class IfBusy(StrEnum):
    """What to do with a message sent while a turn runs (LangGraph's double-texting):
    queue it as the next turn, refuse it, interrupt the turn and queue it, or steer the
    turn with it (`app.services.turn_control`), or roll the turn back: interrupt it and
    rewind to before its user message as the message's own turn starts
    (`app.services.branching`)."""

    enqueue = "enqueue"
    reject = "reject"
    interrupt = "interrupt"
    steer = "steer"
    rollback = "rollback"


def message_client_tools(
    tools: Sequence[ClientTool], if_busy: IfBusy, builtin: Collection[str], max_tools: int
) -> list[dict[str, Any]] | None:
    """The client tools a message offers its own turn, as its job keeps them (None: none),
    or InvalidInput naming the field at fault: as a session's are checked, and none with
    a steer, which joins a running turn whose tools are set."""
    if tools and if_busy is IfBusy.steer:
        raise InvalidInput(
            "client_tools: a steer joins the running turn, whose tools are set; send the "
            "message without them, or with another if_busy",
            field="client_tools",
        )
    return check_client_tools(tools, builtin, max_tools)


async def send_message(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    message: str | Sequence[UserBlock],
    if_busy: IfBusy,
    *,
    client_tools: list[dict[str, Any]] | None = None,
) -> Job:
    """Enqueue a chat turn. On an idle session the user item is appended now; behind a
    running turn it is appended when its own turn starts, so turns never interleave.
    `client_tools`: what the message offers its own turn besides the session's.

    Prepared statements only, so that a message is a statement unit like a step: the
    tenant's check is the turn's reservation (which also locks the session), and the
    item's place is taken before the job is written, which then holds it (`turn_input`)
    without a second write of its row."""
    sessions = SessionRepository(db)
    turn = await sessions.reserve_turn(session_id, tenant)
    if turn is None:
        raise no_session(session_id)
    jobs = JobRepository(db)
    busy = await jobs.session_is_busy(session_id)
    if busy and if_busy is IfBusy.reject:
        raise Conflict("the session is busy with another turn", reason="session-busy")
    rolled_back: int | None = None  # the user item of the turn a rollback takes back
    stopping = if_busy in (IfBusy.interrupt, IfBusy.rollback)
    if busy and stopping and (head := await jobs.lane_head(session_id)):
        if if_busy is IfBusy.rollback and head.kind == JobKind.chat:
            rolled_back = head.input.get("item_seq")
        await interrupt_job(db, head)
        busy = await jobs.session_is_busy(session_id)  # a queued head ended at once
    job = Job(
        id=new_id("job"),
        tenant=tenant,
        session_id=session_id,
        kind=JobKind.chat,
        turn=turn,
        input=_job_input([TextBlock(text=message)] if isinstance(message, str) else message),
        steer=busy and if_busy is IfBusy.steer,
    )
    if client_tools:
        job.input = {**job.input, "client_tools": client_tools}
    if busy:
        if rolled_back is not None:  # rewound once the interrupted turn has ended
            job.input = {**job.input, ROLLBACK_KEY: rolled_back}
        return await enqueue(db, job)
    if rolled_back is not None:
        await rewind_before_seq(db, tenant, session_id, rolled_back)
    slot = await sessions.allocate_seq(session_id, new_turn=False)
    job.input = {**job.input, "item_seq": slot.seq}
    await enqueue(db, job)
    await add_item(db, session_id, slot, user_item_of(job), Origin.user, turn=turn, job_id=job.id)
    return job


async def enqueue_compaction(db: AsyncSession, tenant: str, session_id: str) -> Job:
    """Compaction runs as a job in the session's queue, so it never cuts a turn in half."""
    session = await get_session(db, tenant, session_id, lock=True)
    return await enqueue(
        db,
        Job(
            id=new_id("job"),
            tenant=tenant,
            session_id=session_id,
            kind=JobKind.compaction,
            turn=session.current_turn,
        ),
    )


ROLLBACK_KEY = "rollback_before"
"""A chat job's input field: the `seq` of the user item of the turn it rolls back."""


def _job_input(blocks: Sequence[UserBlock]) -> dict[str, Any]:
    """A chat job's input: the message's text, or its blocks when it attaches files."""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return {"text": blocks[0].text}
    return {"content": [block.model_dump(mode="json", exclude_none=True) for block in blocks]}


def user_item_of(job: Job) -> ItemPayload:
    """The user item a chat job's input makes."""
    if "content" in job.input:
        return UserMessage.model_validate({"content": job.input["content"]})
    return user_text(job.input["text"])


def turn_input(job: Job) -> tuple[int, ItemPayload] | None:
    """The user item a chat job's input put in the log, and its `seq`; None while it is
    not there yet. It is what `append_turn_input` wrote, so a job holding the log up to
    the item before needs no read to hold this one too."""
    seq = job.input.get("item_seq")
    return None if seq is None else (seq, user_item_of(job))


async def append_turn_input(db: AsyncSession, job: Job) -> None:
    """Append the job's user message once; `item_seq` records that it is in the log.

    Prepared statements only, so a running job's turn starts in a statement unit. The
    runner's copy of the job gets the new `input` as the database's (not as a change
    of its own), as its later fenced writes expect (`held_job`)."""
    if turn_input(job) is not None:
        return
    if (rolled_back := job.input.get(ROLLBACK_KEY)) is not None:
        await rewind_before_seq(db, job.tenant, job.session_id, rolled_back)
    item = await append_item(
        db, job.session_id, user_item_of(job), Origin.user, turn=job.turn, job_id=job.id
    )
    value = {**job.input, "item_seq": item.seq}
    await JobRepository(db).set_input(job.id, value)
    set_committed_value(job, "input", value)
