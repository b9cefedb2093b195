"""Sessions: create, read, list, rename. A session another tenant owns does not exist."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel.ext.asyncio.session import AsyncSession

from app.db.models import Session
from app.db.repositories.jobs import JobRepository
from app.db.repositories.sessions import SessionRepository, session_of
from app.db.types import utcnow
from app.domain.client_tools import ClientTool, check_client_tools
from app.domain.errors import InvalidInput, NotFound
from app.domain.ids import new_id
from app.domain.sessions import SessionStatus, session_status
from app.domain.tool_policy import RuleBounds, ToolPolicyRule, check_rules
from app.mcp.names import is_mcp_name
from app.services.pagination import Page, page_of


async def create_session(
    db: AsyncSession,
    tenant: str,
    *,
    title: str | None = None,
    system_prompt: str | None = None,
    model: str | None = None,
    metadata: dict[str, Any] | None = None,
    tools: list[str] | None = None,
    known_tools: Collection[str] = (),
    mcp: list[dict[str, Any]] | None = None,
    continues_from: str | None = None,
    tool_policy: Sequence[ToolPolicyRule] = (),
    policy_bounds: RuleBounds | None = None,
    client_tools: Sequence[ClientTool] = (),
    client_tools_max: int = 0,
    source: str = "strata",
    external_id: str | None = None,
    project: str | None = None,
) -> Session:
    if (
        continues_from is not None
        and await SessionRepository(db).get(tenant, continues_from) is None
    ):
        raise InvalidInput(
            f"continues_from: session {continues_from!r} does not exist", field="continues_from"
        )
    row = Session(
        id=new_id("ses"),
        tenant=tenant,
        title=title,
        system_prompt=system_prompt,
        model=model,
        metadata_=metadata or {},
        tools=check_tools(tools, known_tools),
        mcp=mcp or None,
        tool_policy=_session_rules(tool_policy, policy_bounds),
        client_tools=check_client_tools(client_tools, known_tools, client_tools_max),
        continues_from=continues_from,
        source=source,
        external_id=external_id,
        project=project,
    )
    return await SessionRepository(db).save(row)


def _session_rules(
    rules: Sequence[ToolPolicyRule], bounds: RuleBounds | None
) -> list[dict[str, Any]] | None:
    """The session's layer of tool policy rules as stored; null when it has none."""
    if not rules:
        return None
    if bounds is None:
        raise ValueError("a session's tool policy rules are checked against bounds")
    return check_rules(rules, bounds, "tool_policy")


def check_tools(tools: list[str] | None, known: Collection[str]) -> list[str] | None:
    """None offers every registered tool; a list offers exactly those (MCP tools by
    glob, `mcp__git__*`: which there are is known once their servers are listed)."""
    if tools is None:
        return None
    unknown = [name for name in tools if name not in known and not is_mcp_name(name)]
    if unknown:
        raise InvalidInput(
            f"unknown tools {unknown}; this server has {sorted(known)}", field="tools"
        )
    return list(dict.fromkeys(tools))


async def get_session(
    db: AsyncSession, tenant: str, session_id: str, *, lock: bool = False
) -> Session:
    """The tenant's session, or 404. With `lock`, its row is held for the transaction
    (PostgreSQL; SQLite's writing transactions are exclusive already), read by that
    same statement: a write that serializes on the session reads it once."""
    repo = SessionRepository(db)
    row = await repo.lock(session_id) if lock else await repo.get(tenant, session_id)
    if row is None or row.tenant != tenant:
        raise no_session(session_id)
    return row


async def check_session(
    db: AsyncSession, tenant: str, session_id: str, *, lock: bool = False
) -> None:
    """`get_session` for the callers that only need to know the session is the tenant's:
    one prepared statement, no ORM object (every task, item and event request asks)."""
    if await SessionRepository(db).tenant_of(session_id, lock=lock) != tenant:
        raise no_session(session_id)


def session_from(rows: list[tuple[Any, ...]], tenant: str, session_id: str) -> Session:
    """The tenant's session from what `SESSION_ROW` read (detached), or 404: `get_session`
    for a reader that needs no ORM session around it (a turn's start, its end)."""
    row = session_of(rows)
    if row is None or row.tenant != tenant:
        raise no_session(session_id)
    return row


def no_session(session_id: str) -> NotFound:
    return NotFound(f"session {session_id!r} does not exist", resource="session")


async def list_sessions(
    db: AsyncSession,
    tenant: str,
    *,
    limit: int,
    after: str | None,
    title: str | None = None,
    status: SessionStatus | None = None,
) -> Page[Session]:
    """Newest first; `title` keeps the sessions whose title contains it (any case),
    `status` those in that status."""
    rows = await SessionRepository(db).list_page(
        tenant, limit=limit + 1, before_id=after, title_contains=title, status=status
    )
    return page_of(rows, limit, lambda row: row.id)


async def statuses_of(db: AsyncSession, rows: Sequence[Session]) -> dict[str, SessionStatus]:
    """Each session's status, from one read of their unfinished jobs."""
    found = await JobRepository(db).lane_statuses([row.id for row in rows])
    return {row.id: session_status(found.get(row.id, ())) for row in rows}


async def status_of(db: AsyncSession, row: Session) -> SessionStatus:
    return (await statuses_of(db, [row]))[row.id]


@dataclass(frozen=True)
class SessionChanges:
    """What a PATCH of a session changes: the fields named in `sent`, and only those
    (None included: a sent null title clears it)."""

    sent: frozenset[str]
    title: str | None = None
    metadata: dict[str, Any] | None = None
    tools: list[str] | None = None
    tool_policy: Sequence[ToolPolicyRule] = ()
    mcp: list[dict[str, Any]] | None = None
    client_tools: Sequence[ClientTool] = ()
    client_tools_max: int = 0


async def update_session(
    db: AsyncSession,
    tenant: str,
    session_id: str,
    changes: SessionChanges,
    known_tools: Collection[str] = (),
    policy_bounds: RuleBounds | None = None,
) -> Session:
    """Apply only the fields the client sent; `metadata`, `tools` and `tool_policy` are
    replaced whole."""
    row = await get_session(db, tenant, session_id)
    if "tools" in changes.sent:
        row.tools = check_tools(changes.tools, known_tools)
    if "tool_policy" in changes.sent:
        row.tool_policy = _session_rules(changes.tool_policy, policy_bounds)
    if "mcp" in changes.sent:
        row.mcp = changes.mcp or None
    if "client_tools" in changes.sent:
        row.client_tools = check_client_tools(
            changes.client_tools, known_tools, changes.client_tools_max
        )
    if "title" in changes.sent:
        row.title = changes.title
    if "metadata" in changes.sent:
        row.metadata_ = changes.metadata or {}
    row.updated_at = utcnow()
    return await SessionRepository(db).save(row)
