"""Sessions: the list, a new session, and a session's page (conversation, message box,
task board, memory, usage) with its live stream."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from app.console import auth
from app.console.api import ApiError, PublicApi
from app.console.live import (
    SessionFeed,
    actions_digest,
    digest,
    q,
    relay,
    reverted_turns,
    session_actions,
)
from app.console.render import oob
from app.console.routes.memory import search_hits
from app.console.web import (
    Api,
    Form,
    LastWords,
    PageSize,
    Templates,
    done,
    fragment,
    is_htmx,
    text,
)

router = APIRouter(prefix="/console/sessions")

STATUSES = ("idle", "running", "waiting")
IF_BUSY = ("enqueue", "steer", "interrupt")
"""What the message box offers for a busy session (the API's `if_busy`; `reject` is for
programs: a person sees the session busy)."""
TASK_FIELDS = ("status", "subject", "description")
READS = (
    "Not a time the look-up reads: give HH:MM:SS or HH:MM (14:23:05, 14:23), a range "
    "(14:23-14:30), or either with its date (2026-12-03 14:23)."
)


@router.get("")
async def sessions(request: Request, api: Api, templates: Templates, page: PageSize) -> Response:
    filters = {
        "q": request.query_params.get("q", "").strip(),
        "status": request.query_params.get("status", ""),
    }
    if filters["status"] not in STATUSES:
        filters["status"] = ""
    listed = await api.get(
        "/sessions", limit=page, after=request.query_params.get("after"), **filters
    )
    tools = (await api.get("/tools"))["data"]
    return templates.page(
        request,
        "sessions.html",
        sessions=listed["data"],
        next_cursor=listed["next_cursor"],
        first_page=not request.query_params.get("after"),
        filters=filters,
        statuses=STATUSES,
        tools=tools,
    )


@router.post("")
async def create_session(request: Request, api: Api, form: Form) -> Response:
    body: dict[str, Any] = {
        name: text(form, name) for name in ("title", "system_prompt", "model") if text(form, name)
    }
    if text(form, "tools_mode") == "chosen":
        body["tools"] = [str(v) for v in form.getlist("tools")]
    created = await api.send("POST", "/sessions", body)
    return RedirectResponse(f"/console/sessions/{q(created['id'])}", status_code=303)


async def _item_at(api: PublicApi, session_id: str, seq: int) -> dict[str, Any] | None:
    """The item of the session's log at `seq` (a fork's log holds its parent's too)."""
    if seq < 1:
        return None
    found = await api.get(f"/sessions/{q(session_id)}/items", after=str(seq - 1), limit=1)
    items: list[dict[str, Any]] = found["data"]
    return items[0] if items and items[0]["seq"] == seq else None


async def _branch(api: PublicApi, session: dict[str, Any], page: int) -> dict[str, Any]:
    """Where the session branched: the turn its fork point ends (0: before any turn), and
    the last rewind among the log's latest `page` items (a rewind marker item)."""
    fork_turn = None
    if session.get("forked_from") and session.get("fork_seq") is not None:
        at = await _item_at(api, session["id"], int(session["fork_seq"]))
        fork_turn = at["turn"] if at else 0
    rewind = None
    count = int(session.get("item_count") or 0)
    if count:
        after = max(0, count - page)
        latest = await api.get(f"/sessions/{q(session['id'])}/items", after=str(after), limit=page)
        rewinds = [item for item in latest["data"] if item["kind"] == "rewind"]
        rewind = rewinds[-1] if rewinds else None
    return {"fork_turn": fork_turn, "rewind": rewind}


async def _panels(api: PublicApi, session_id: str, page: int) -> dict[str, Any]:
    path = f"/sessions/{q(session_id)}"
    session = await api.get(path)
    tasks = (await api.get(f"{path}/tasks"))["data"]
    actions = await session_actions(api, session_id)
    turns = await api.get(f"{path}/turns", limit=page)
    return {
        "session": session,
        "session_id": session_id,
        "tasks": tasks,
        "board": digest(tasks),
        "actions": actions,
        "actions_digest": actions_digest(actions),
        "memory": await api.get(f"{path}/memory"),
        "turns": turns,
        "reverted": ",".join(str(n) for n in sorted(reverted_turns(turns["data"], session_id))),
        "jobs": (await api.get("/jobs", session_id=session_id, limit=page))["data"],
        "tools": (await api.get(f"{path}/tools"))["data"],
        "branch": await _branch(api, session, page),
    }


async def _detail(api: PublicApi, session_id: str, time: str) -> dict[str, Any]:
    """The look-up's answer, or what the API said about the time."""
    if not time:
        return {"time": "", "turns": None, "problem": None}
    try:
        found = await api.get(f"/sessions/{q(session_id)}/detail/{q(time)}")
    except ApiError as exc:
        if exc.status not in (404, 422):
            raise
        # a 422 names the path pattern the time failed: say what the look-up reads instead
        problem = READS if exc.status == 422 else exc.detail
        return {"time": time, "turns": None, "problem": problem}
    return {"time": time, "turns": found["data"], "problem": None}


@router.get("/{session_id}")
async def session_page(
    session_id: str, request: Request, api: Api, templates: Templates, page: PageSize
) -> Response:
    time = request.query_params.get("time", "").strip()
    words = request.query_params.get("q", "").strip()
    return templates.page(
        request,
        "session.html",
        detail=await _detail(api, session_id, time),
        search=await search_hits(api, f"/sessions/{q(session_id)}/memory/search", words),
        **await _panels(api, session_id, page),
    )


@router.get("/{session_id}/search")
async def search(session_id: str, request: Request, api: Api, templates: Templates) -> Response:
    """The memory panel's search of the session's chain: its hits as a fragment."""
    words = request.query_params.get("q", "").strip()
    if not is_htmx(request):  # the page itself is the link to a search
        return RedirectResponse(
            f"/console/sessions/{q(session_id)}?q={q(words)}#search", status_code=303
        )
    found = await search_hits(api, f"/sessions/{q(session_id)}/memory/search", words)
    html = templates.fragment("partials/search_hits.html", search=found, session_id=session_id)
    return fragment(html)


@router.get("/{session_id}/detail")
async def detail(session_id: str, request: Request, api: Api, templates: Templates) -> Response:
    time = request.query_params.get("time", "").strip()
    if not is_htmx(request):  # the page itself is the link to a look-up
        return RedirectResponse(
            f"/console/sessions/{q(session_id)}?time={q(time)}#detail", status_code=303
        )
    found = await _detail(api, session_id, time)
    html = templates.fragment("partials/detail.html", detail=found, session_id=session_id)
    return fragment(html)


@router.get("/{session_id}/live")
async def live(
    session_id: str,
    request: Request,
    api: Api,
    templates: Templates,
    page: PageSize,
    last_word: LastWords,
) -> Response:
    await api.get(f"/sessions/{q(session_id)}")  # a 404 (or 401) before the stream starts
    last = request.headers.get("last-event-id")
    feed = SessionFeed(
        api,
        templates,
        resumed=bool(last),
        csrf=auth.csrf_token(request),
        page_size=page,
        session_id=session_id,
        board=request.query_params.get("board", ""),
        actions=request.query_params.get("actions", ""),
        reverted=frozenset(
            int(n) for n in request.query_params.get("reverted", "").split(",") if n.isdigit()
        ),
    )
    return StreamingResponse(
        relay(api, f"/sessions/{q(session_id)}/events", last, feed, last_word),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


@router.post("/{session_id}/messages")
async def send_message(
    session_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    if_busy = text(form, "if_busy")
    accepted = await api.send(
        "POST",
        f"/sessions/{q(session_id)}/messages",
        {"text": text(form, "text")},
        if_busy=if_busy if if_busy in IF_BUSY else "enqueue",
    )
    job = accepted["job"]
    status = f"turn {job['turn']}: {job['status']}" if job.get("turn") else str(job["status"])
    html = templates.fragment(
        "partials/message_form.html", session_id=session_id, csrf=auth.csrf_token(request)
    ) + oob("activity", status, "innerHTML")
    return done(request, f"/console/sessions/{q(session_id)}", html)


@router.post("/{session_id}/interrupt")
async def interrupt(session_id: str, request: Request, api: Api, form: Form) -> Response:
    """Stop the session's turn now (`POST /sessions/{id}/interrupt`). The button goes;
    the page's live stream says when the turn has ended (a running one ends moments
    after the answer)."""
    await api.send("POST", f"/sessions/{q(session_id)}/interrupt")
    return done(request, f"/console/sessions/{q(session_id)}")


async def _board(api: PublicApi, templates: Templates, request: Request, session_id: str) -> str:
    tasks = (await api.get(f"/sessions/{q(session_id)}/tasks"))["data"]
    return templates.fragment(
        "partials/task_board.html",
        tasks=tasks,
        session_id=session_id,
        csrf=auth.csrf_token(request),
    )


@router.post("/{session_id}/tasks")
async def add_task(
    session_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    body = {"subject": text(form, "subject"), "description": text(form, "description")}
    await api.send("POST", f"/sessions/{q(session_id)}/tasks", body)
    html = await _board(api, templates, request, session_id)
    return done(request, f"/console/sessions/{q(session_id)}#tasks", html)


@router.post("/{session_id}/tasks/{taskid}")
async def change_task(
    session_id: str, taskid: int, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    """Move (status) or edit (subject, description): the fields the form has."""
    body = {name: text(form, name) for name in TASK_FIELDS if name in form}
    await api.send("PATCH", f"/sessions/{q(session_id)}/tasks/{taskid}", body)
    html = await _board(api, templates, request, session_id)
    return done(request, f"/console/sessions/{q(session_id)}#tasks", html)


def _point(form_or_query: Any, names: tuple[str, ...]) -> dict[str, int]:
    """The one point (`to_turn`, `to_seq`, …) a form or a query names, as the API takes it;
    a value that is not a number is left for the API to refuse (a 422 it explains)."""
    point: dict[str, Any] = {}
    for name in names:
        value = str(form_or_query.get(name) or "").strip()
        if value:
            point[name] = int(value) if value.isdigit() else value
    return point


@router.post("/{session_id}/fork")
async def fork_session(session_id: str, api: Api, form: Form) -> Response:
    """A fork at the turn the form names (`POST …/fork`); the browser goes to it."""
    body: dict[str, Any] = _point(form, ("at_turn", "before_turn", "at_seq"))
    if text(form, "title"):
        body["title"] = text(form, "title")
    created = await api.send("POST", f"/sessions/{q(session_id)}/fork", body)
    return RedirectResponse(f"/console/sessions/{q(created['id'])}", status_code=303)


@router.get("/{session_id}/rewind")
async def rewind_preview(
    session_id: str, request: Request, api: Api, templates: Templates
) -> Response:
    """What a rewind to the point would change (`GET …/rewind-preview`, which changes
    nothing), with the form that does it."""
    point = _point(request.query_params, ("to_turn", "to_seq"))
    session = await api.get(f"/sessions/{q(session_id)}")
    preview = await api.get(f"/sessions/{q(session_id)}/rewind-preview", **point)
    return templates.page(
        request,
        "rewind.html",
        session=session,
        session_id=session_id,
        point=point,
        preview=preview,
    )


@router.post("/{session_id}/rewind")
async def rewind_session(
    session_id: str, request: Request, api: Api, templates: Templates, form: Form
) -> Response:
    """The rewind the preview page confirms (`POST …/rewind`). A 409 (a turn queued or
    running) shows the preview again with the API's words, to try once the turn ends."""
    point = _point(form, ("to_seq",))
    try:
        await api.send("POST", f"/sessions/{q(session_id)}/rewind", point)
    except ApiError as exc:
        if exc.status != 409:
            raise
        session = await api.get(f"/sessions/{q(session_id)}")
        preview = await api.get(f"/sessions/{q(session_id)}/rewind-preview", **point)
        return templates.page(
            request,
            "rewind.html",
            status_code=409,
            session=session,
            session_id=session_id,
            point=point,
            preview=preview,
            problem=exc.detail,
        )
    return RedirectResponse(f"/console/sessions/{q(session_id)}", status_code=303)


CONTINUED_FIELDS = ("model", "system_prompt", "tools")
"""What a session continued from the console keeps of the one it continues."""


@router.post("/{session_id}/continue")
async def continue_session(session_id: str, api: Api) -> Response:
    """A new session that continues this one: it starts with this one's memory."""
    session = await api.get(f"/sessions/{q(session_id)}")
    body: dict[str, Any] = {
        name: session[name] for name in CONTINUED_FIELDS if session.get(name) is not None
    }
    body["continues_from"] = session_id
    if session.get("title"):
        body["title"] = f"{session['title']} (continued)"
    created = await api.send("POST", "/sessions", body)
    return RedirectResponse(f"/console/sessions/{q(created['id'])}", status_code=303)


@router.post("/{session_id}/compact")
async def compact_session(session_id: str, api: Api) -> Response:
    await api.send("POST", f"/sessions/{q(session_id)}/compact")
    return RedirectResponse(f"/console/sessions/{q(session_id)}", status_code=303)


@router.post("/{session_id}/delete")
async def delete_session(session_id: str, api: Api, form: Form) -> Response:
    """Deletes only with the form's confirmation ticked (the browser requires it too)."""
    if text(form, "confirm") != "yes":
        return RedirectResponse(f"/console/sessions/{q(session_id)}", status_code=303)
    await api.send("DELETE", f"/sessions/{q(session_id)}")
    return RedirectResponse("/console/sessions", status_code=303)
