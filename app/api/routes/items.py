from __future__ import annotations

from fastapi import APIRouter, Response

from app.api.deps import (
    CurrentTenant,
    DatabaseDep,
    PageLimit,
    SeqCursor,
    SessionDep,
    SettingsDep,
)
from app.api.errors import problem_responses
from app.api.routes.sessions import SessionId
from app.api.schemas.items import ItemCreate, ItemList, ItemPublic, item_public
from app.domain.items import ItemPayload, Origin, SystemMessage, UserMessage
from app.services import files
from app.services import items as service

router = APIRouter(
    prefix="/sessions/{session_id}/items", tags=["items"], responses=problem_responses(401, 503)
)


@router.get(
    "",
    name="list",
    summary="Read a session's event log in seq order",
    description=(
        "Every item the session's turns and clients recorded (messages, tool "
        "calls and results, compactions, task notes), oldest first, a page of "
        "`limit` after the `seq` in `after`."
    ),
    responses=problem_responses(404, 422),
)
async def list_items(
    session_id: SessionId,
    db: SessionDep,
    tenant: CurrentTenant,
    limit: PageLimit,
    after: SeqCursor = None,
) -> ItemList:
    page, lineage = await service.list_items(db, tenant, session_id, limit=limit, after=after)
    data = [
        item_public(r, reverted=lineage is not None and not lineage.reads(r.seq)) for r in page.data
    ]
    return ItemList(data=data, next_cursor=page.next_cursor)


@router.post(
    "",
    status_code=201,
    name="append",
    summary="Append a user or system message to the log",
    description=(
        "For clients that drive their own agent loop: the item is only recorded, "
        "no agent turn is started."
    ),
    responses=problem_responses(404, 409, 413, 422),
)
async def append_item(
    session_id: SessionId,
    body: ItemCreate,
    database: DatabaseDep,
    tenant: CurrentTenant,
    settings: SettingsDep,
    response: Response,
) -> ItemPublic:
    payload: ItemPayload
    if body.kind == "user_message":
        blocks = await files.message_blocks(
            database, settings, tenant, body.text, files.parts_of(body.content)
        )
        payload = UserMessage(content=blocks)
    else:
        payload = SystemMessage(text=body.text or "")
    origin = Origin.user if body.kind == "user_message" else Origin.api
    row = await database.write(
        lambda db: service.append_client_item(db, tenant, session_id, payload, origin)
    )
    # items have no URL of their own: the one-item page that holds it
    response.headers["Location"] = f"/sessions/{session_id}/items?after={row.seq - 1}&limit=1"
    return item_public(row)
