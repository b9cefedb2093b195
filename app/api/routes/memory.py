from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query
from sqlmodel.ext.asyncio.session import AsyncSession

from app.api.deps import CurrentTenant, DatabaseDep, SessionDep, SettingsDep
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.memory import (
    DetailEntryPublic,
    DetailList,
    MemoryCounts,
    MemoryPublic,
    MergeRequest,
    TurnDetailPublic,
)
from app.api.schemas.sessions import SessionPublic
from app.memory.details import DetailQuery
from app.memory.render import MIN_BLOCK_CHARS, DetailHint
from app.services import memory as service
from app.services.sessions import status_of
from app.services.summaries import enqueue_if_needed

router = APIRouter(
    prefix="/sessions/{session_id}", tags=["memory"], responses=problem_responses(401, 503)
)

_CLOCK = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?"
# Exactly the calendar's dates (leap days included) of the years 1000-8999: a date the
# pattern admits is one the server reads, and no zone offset can carry it past the years
# Python's datetime holds.
_YEAR = "[1-8][0-9]{3}"
_LEAP_YEAR = "([1-8][0-9](0[48]|[2468][048]|[13579][26])|(1[26]|[2468][048]|[357][26])00)"
_DATE = (
    f"({_LEAP_YEAR}-02-29|{_YEAR}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    "|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8])))"
)
_ISO = (
    _DATE
    + "[T ]"
    + _CLOCK.replace(")?", "([.,][0-9]{1,6})?)?")
    + r"(Z|z|[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?)?"
)
_RANGE = rf"{_CLOCK} ?[-\u2013] ?{_CLOCK}"
# the forms app.memory.timeref reads, within its ranges
TIME_REF_PATTERN = rf"^({_CLOCK}|{_RANGE}|{_DATE} {_RANGE}|{_ISO})$"

DetailKindParam = Literal[
    "user", "assistant", "tool_input", "tool_output", "system", "image"
]  # app.memory.details.PIECE_KINDS
TimeRef = Annotated[
    str,
    Path(
        max_length=60,
        pattern=TIME_REF_PATTERN,
        description=(
            "`HH:MM:SS`, `HH:MM`, `HH:MM:SS-HH:MM:SS`, `HH:MM-HH:MM`, a date and time "
            "`YYYY-MM-DD HH:MM[:SS]` or `YYYY-MM-DD HH:MM-HH:MM`, or an ISO timestamp "
            "(dates of the years 1000-8999)."
        ),
    ),
]


@router.get(
    "/memory",
    name="get",
    summary="The memory block a continuation of this session starts with",
    description=(
        "At most `max_chars` characters (default `STRATA_MEMORY_BLOCK_MAX_CHARS`, 9,500): "
        "the predecessor chain's newest turns whole (L2, up to 20, oldest first; a turn "
        "longer than its share cut in its middle, both ends kept, with a marker), then older "
        "turns as one-line summaries "
        "(L1, newest first), then a line counting the turns left out and the guide line "
        "naming the detail look-up with a real time from the block (for a Claude Code "
        "session the look-up `kit_mode` and `kit_mcp` name, as its hook sends them: "
        "`/sc-detail` by default; the `Detail` tool otherwise). Times are `[HH:MM:SS]` in the "
        "display time zone, with a date line per day when the turns span several days. "
        "The session's own turns are not in it. A forked predecessor's turns include its "
        "parent's up to the fork point; turns a rewind reverted are left out."
    ),
    responses=problem_responses(404, 422),
)
async def get_memory(
    session_id: SessionId,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    max_chars: Annotated[
        int | None,
        Query(ge=MIN_BLOCK_CHARS, le=1_000_000, description="The block's length at most."),
    ] = None,
    kit_mode: Annotated[
        Literal["plugin", "settings"] | None,
        Query(
            description=(
                "For a Claude Code session, how its reader runs the kit, as the hook's "
                "`kit_mode`: `plugin` names `/strata:sc-detail`, `settings` `/sc-detail`."
            )
        ),
    ] = None,
    kit_mcp: Annotated[
        bool,
        Query(
            description=(
                "For a Claude Code session, whether its reader has Strata's MCP server, as "
                "the hook's `kit_mcp`: the block then names the `memory_detail` tool."
            )
        ),
    ] = False,
) -> MemoryPublic:
    limits = service.BlockLimits.of(settings, max_chars)
    block = await service.memory_block(
        db,
        tenant,
        session_id,
        limits=limits,
        tz=settings.zone,
        claude_code_hint=DetailHint.of_kit(kit_mode, kit_mcp),
    )
    return MemoryPublic(
        session_id=block.session_id,
        text=block.text,
        counts=MemoryCounts.model_validate(vars(block.counts)),
        chain=block.chain,
    )


@router.get(
    "/detail/{time}",
    name="detail",
    summary="L2 and L3 of the turns at a time, across the chain, a page at a time",
    description=(
        "A turn is addressed by the time it ended, as the memory block shows it, or by any "
        "time of its span (from its prompt to its end). A time of day matches every day it "
        "occurs on (newest first); a range matches every turn whose span overlaps it; a "
        "date and time (`2026-04-16 14:23:05`, `2026-04-16 14:23-14:30`) "
        "matches on that day, in the display time zone. The answer is one page of at most "
        "`max_chars` characters (default `STRATA_DETAIL_PAGE_MAX_CHARS`, 8,000): the turns' "
        "pieces newest first (user, assistant, then tool inputs, tool outputs, system "
        "messages, images), a piece longer than what is left of a page continuing on the "
        "next. `kind` keeps one kind of piece, `grep` only the lines containing a text "
        "(case-insensitive, numbered `L<n>:`). 404 when no turn matches the time, 422 for a "
        "malformed time or parameter; a page past the last is empty. Turns a rewind "
        "reverted are found too, `reverted` (and so marked in the text's headings)."
    ),
    responses=problem_responses(404, 422),
)
async def get_detail(
    session_id: SessionId,
    time: TimeRef,
    db: SessionDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    page: Annotated[int, Query(ge=1, le=100_000, description="1 for the first page.")] = 1,
    max_chars: Annotated[
        int | None, Query(ge=1_000, le=1_000_000, description="The page's length at most.")
    ] = None,
    kind: Annotated[DetailKindParam | None, Query(description="Only this kind of piece.")] = None,
    grep: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Only lines containing this text."),
    ] = None,
) -> DetailList:
    query = DetailQuery(
        max_chars=max_chars or settings.detail_page_max_chars, page=page, kind=kind, grep=grep
    )
    found = await service.detail_page_of(db, tenant, session_id, time, query, tz=settings.zone)
    return DetailList(
        data=[
            TurnDetailPublic(
                session_id=t.session_id,
                turn=t.turn,
                ended_at=t.ended_at,
                time=f"{t.ended_at.astimezone(settings.zone):%H:%M:%S}",
                user_text=t.user_text,
                assistant_text=t.assistant_text,
                l1=t.l1,
                details={
                    kind: [DetailEntryPublic(**vars(e)) for e in entries]
                    for kind, entries in t.details.items()
                },
                reverted=t.reverted,
            )
            for t in found.turns
        ],
        text=found.text,
        page=found.page,
        pages=found.pages,
        next_page=found.page + 1 if found.page < found.pages else None,
        matched_turns=found.matched_turns,
        total_chars=found.total_chars,
    )


@router.post(
    "/merge",
    name="merge",
    summary="Move this session's turns and chain link into another session",
    description=(
        "Atomic for readers: one small transaction decides the merge (the predecessor link "
        "moves to `into`, and this session answers its memory and detail reads through it "
        "from then on, its turns included); the turns (L1/L2/L3) then move in transactions "
        "of at most `STRATA_MERGE_CHUNK_TURNS`, which no read can tell apart. If the answer "
        "is an error after the merge was decided, asking for the same merge again finishes "
        "the moves (200); merging into another session than the first time is 409."
    ),
    responses=problem_responses(404, 409, 422),
)
async def merge(
    session_id: SessionId,
    body: MergeRequest,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
) -> SessionPublic:
    chunk = max(1, settings.merge_chunk_turns)

    async def decide(db: AsyncSession) -> tuple[SessionPublic, int]:
        target, moved = await service.merge_sessions(db, tenant, session_id, body.into, chunk=chunk)
        # merged-in turns may push older ones out of the window: queue their summaries
        await enqueue_if_needed(db, target, settings.memory_l2_window_turns)
        return SessionPublic.of(target, await status_of(db, target)), moved

    target, moved = await database.write(decide)
    while moved == chunk:
        moved = await database.write(
            lambda db: service.move_merged_turns(db, session_id, target.id, chunk)
        )
    return target
