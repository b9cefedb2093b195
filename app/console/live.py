"""Live pages: a public event stream, read as the signed-in user, turned into HTML.

The browser opens the console's stream (`/console/sessions/{id}/live`,
`/console/jobs/{id}/live`); the console opens the API's stream for the same session or
job with the user's key and the browser's `Last-Event-ID`, and answers each batch of
API events with one `console` event: HTML fragments, each naming the element of the
page it goes into (htmx out-of-band swaps). The id of that event is the id of the last
API event it reflects, so a browser that reconnects resumes where it was, with the
API's own replay. A batch is what has arrived when the reader catches up: a page that
opens replays the whole log at once and renders the task board, the usage and the
memory timeline once, not once per event.

Each page's feed knows only the elements it created or that every page of its kind has,
so no fragment ever names an element that is not there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from app.console.api import ApiError, PublicApi
from app.console.render import Renderer, oob, read_stamp
from app.console.sse import KEEPALIVE, Comment, SseReader, StreamEvent, frame
from app.domain.jobs import TERMINAL, JobKind, JobStatus
from app.domain.tool_ids import api_tool_id
from app.settings import Settings

logger = logging.getLogger("strata.console")

TASK_TOOLS = frozenset({"TaskCreate", "TaskUpdate"})
GONE = frozenset({403, 404})
"""What a region's read answers when its subject is gone or forbidden now."""
GAUGE_MARKS = (70, 85, 95, 99)


@dataclass(frozen=True)
class LastWord:
    """How a stream that ends tries the regions it could not read: `tries` times, `pause`
    seconds apart (`STRATA_CONSOLE_STREAM_LAST_TRIES`, `..._LAST_TRY_SECONDS`)."""

    tries: int
    pause: float

    @classmethod
    def of(cls, settings: Settings) -> LastWord:
        return cls(settings.console_stream_last_tries, settings.console_stream_last_try_seconds)


def q(value: str) -> str:
    return quote(value, safe="")


def digest(value: Any) -> str:
    """A short fingerprint of what a region shows: the page sends the one it was rendered
    with, and the stream renders the region again only when it changed."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def session_actions(api: PublicApi, session_id: str) -> list[dict[str, Any]]:
    """The session's held tool calls: the pending actions of its turns that wait."""
    waiting = await api.get(
        "/jobs", session_id=session_id, status=JobStatus.waiting_human.value, limit=200
    )
    return [action for job in reversed(waiting["data"]) for action in job["required_action"]]


def actions_digest(actions: list[dict[str, Any]]) -> str:
    """What the actions panel shows: the ids of the actions it offers decisions on."""
    return digest([action["id"] for action in actions])


@dataclass
class Feed:
    """What one page's stream has rendered, and what is still to render."""

    api: PublicApi
    renderer: Renderer
    resumed: bool  # the browser reconnected: the page holds what earlier events rendered
    csrf: str = ""  # for the forms of re-rendered regions
    page_size: int = 25  # rows of a re-rendered table (STRATA_CONSOLE_PAGE_SIZE)
    out: list[str] = field(default_factory=list)
    dirty: set[str] = field(default_factory=set)
    ended: bool = False

    async def take(self, event: StreamEvent) -> None:
        raise NotImplementedError

    async def refresh(self, region: str) -> str:
        """The fragment of a region marked dirty (rendered once per batch)."""
        raise NotImplementedError

    async def flush(self) -> str:
        """The fragments of this batch. A region whose read failed otherwise than gone
        (the API busy or away for a moment) stays to render at the next flush: rendered
        never, it would show what it showed before the event, for good."""
        failed: set[str] = set()
        for region in sorted(self.dirty):
            try:
                self.out.append(await self.refresh(region))
            except ApiError as exc:
                if exc.status in GONE:  # leave it as it was
                    continue
                logger.warning(
                    "console: could not read the %s region (%s): %s", region, exc.status, exc
                )
                failed.add(region)
        self.dirty = failed
        html, self.out = "".join(self.out), []
        return html

    def item(self, item: dict[str, Any], known_tools: set[str]) -> None:
        """An item of the log into the conversation; a tool result into its call."""
        kind = item.get("kind")
        if kind == "assistant_message":
            self.out.append(oob("draft", "", "innerHTML"))  # its text has arrived whole
            for block in item.get("content", []):
                if block.get("type") == "tool_use":
                    known_tools.add(str(block.get("id")))
        if kind == "tool_result":
            tool_id = str(item.get("tool_use_id"))
            if tool_id in known_tools or self.resumed:
                html = self.renderer.fragment("partials/tool_result.html", item=item)
                self.out.append(oob(f"result-{api_tool_id(tool_id)}", html, "innerHTML"))
                return
        html = self.renderer.fragment("partials/item.html", item=item)
        self.out.append(oob("conversation", html))

    def delta(self, data: dict[str, Any]) -> None:
        self.out.append(oob("draft", Markup("<span>{}</span>").format(data.get("text", ""))))

    def activity(self, text: str) -> None:
        self.out.append(oob("activity", text, "innerHTML"))


def reverted_turns(turns: list[dict[str, Any]], session_id: str) -> frozenset[int]:
    """The numbers of the session's own turns among `turns` (`/turns` rows) that a rewind
    took back."""
    return frozenset(
        int(t["turn"]) for t in turns if t.get("reverted") and t.get("session_id") == session_id
    )


@dataclass
class SessionFeed(Feed):
    session_id: str = ""
    tools: set[str] = field(default_factory=set)
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    jobs_listed: bool = False
    board: str = ""  # the digest of the tasks the page's board shows
    actions: str = ""  # the digest of the actions the page's panel shows
    # the session's turns a rewind took back, which the stream's items do not say: the
    # page's as it was read, then each re-read of the timeline's (after `session.rewound`)
    reverted: frozenset[int] = frozenset()
    # the session as this batch's regions read it (a turn's end marks two that show it)
    _session: dict[str, Any] | None = field(default=None, init=False, repr=False)

    async def flush(self) -> str:
        try:
            return await super().flush()
        finally:
            self._session = None

    async def _session_now(self) -> dict[str, Any]:
        """The session, read once per batch."""
        if self._session is None:
            self._session = await self.api.get(f"/sessions/{q(self.session_id)}")
        return self._session

    async def take(self, event: StreamEvent) -> None:
        data = event.json()
        match event.event:
            case "item.appended":
                item = data.get("item")
                if isinstance(item, dict):
                    self.item({**item, "reverted": item.get("turn") in self.reverted}, self.tools)
            case "session.rewound":
                self.dirty.add("memory")
            case "action.required" | "action.resolved":
                self.dirty.add("actions")
            case "text.delta":
                self.delta(data)
            case "tool.started":
                self.activity(f"running {data.get('name', 'a tool')}…")
            case "tool.finished":
                self.activity(f"{data.get('name', 'a tool')} finished")
            case "job.status":
                await self._job_status(data)
            case "usage":
                self.dirty.add("usage")
            case "task.updated":
                self.dirty.add("tasks")
            case _:
                pass

    async def _job(self, job_id: str) -> dict[str, Any]:
        if job_id not in self.jobs and not self.jobs_listed:
            self.jobs_listed = True  # one page of the session's jobs covers most replays
            listed = await self.api.get("/jobs", session_id=self.session_id, limit=200)
            self.jobs.update({j["id"]: j for j in listed["data"]})
        if job_id not in self.jobs:
            self.jobs[job_id] = await self.api.get(f"/jobs/{q(job_id)}")
        return self.jobs[job_id]

    async def _job_status(self, data: dict[str, Any]) -> None:
        job_id, status = str(data.get("job_id", "")), str(data.get("status", ""))
        try:
            job = await self._job(job_id)
        except ApiError:
            return
        if job.get("kind") == JobKind.summary:  # background memory work: not the agent's
            return
        self.dirty.add("status")  # the header's badge: running, waiting or idle
        what = f"turn {job['turn']}" if job.get("kind") == JobKind.chat else str(job.get("kind"))
        problem = data.get("error") or {}
        detail = f": {problem.get('detail')}" if problem.get("detail") else ""
        self.activity(f"{what}: {status}{detail}")
        if status in TERMINAL:
            self.dirty.update({"usage", "memory"})

    async def refresh(self, region: str) -> str:
        path = f"/sessions/{q(self.session_id)}"
        if region == "tasks":
            # the board holds forms (a move chosen, an edit typed): it is rendered again
            # only when the tasks changed, never because a replay named them
            tasks = (await self.api.get(f"{path}/tasks"))["data"]
            shown, self.board = self.board, digest(tasks)
            if shown == self.board:
                return ""
            html = self.renderer.fragment("partials/task_board.html", tasks=tasks, **self._ids())
            return oob("task-board", html, "innerHTML")
        if region == "actions":
            # the panel holds forms (an input being edited): rendered again only when
            # the actions it offers changed
            pending = await session_actions(self.api, self.session_id)
            shown, self.actions = self.actions, actions_digest(pending)
            if shown == self.actions:
                return ""
            html = self.renderer.fragment(
                "partials/actions.html", actions=pending, panel="session", csrf=self.csrf
            )
            return oob("actions", html, "innerHTML")
        if region == "status":
            session = await self._session_now()
            html = self.renderer.fragment("partials/session_status.html", session=session)
            control = self.renderer.fragment(
                "partials/turn_control.html", session=session, **self._ids()
            )
            return oob("session-status", html, "innerHTML") + oob(
                "turn-control", control, "innerHTML"
            )
        if region == "usage":
            session = await self._session_now()
            turns = await self.api.get("/jobs", session_id=self.session_id, limit=self.page_size)
            html = self.renderer.fragment(
                "partials/usage.html", session=session, jobs=turns["data"]
            )
            return oob("usage", html, "innerHTML")
        turns = await self.api.get(f"{path}/turns", limit=self.page_size)
        self.reverted = reverted_turns(turns["data"], self.session_id)
        html = self.renderer.fragment("partials/timeline.html", turns=turns, **self._ids())
        return oob("timeline", html, "innerHTML")

    def _ids(self) -> dict[str, Any]:
        return {"session_id": self.session_id, "csrf": self.csrf}


@dataclass
class JobFeed(Feed):
    job_id: str = ""
    movement: str | None = None
    tools: set[str] = field(default_factory=set)
    crossed: list[dict[str, Any]] = field(default_factory=list)
    actions: str = ""  # the digest of the actions the page's panel shows

    async def take(self, event: StreamEvent) -> None:
        data = event.json()
        match event.event:
            case "action.required" | "action.resolved":
                self.dirty.add("actions")
            case "item.appended":
                item = data.get("item")
                if isinstance(item, dict):
                    self._transitions(item)
                    self.item(item, self.tools)
            case "text.delta":
                self.delta(data)
            case "job.status":
                status = str(data.get("status", ""))
                html = self.renderer.fragment(
                    "partials/timeline_status.html", status=status, data=data
                )
                self.out.append(oob("timeline", html))
                self.dirty.update({"summary", "files", "subtasks", "comments"})
                self.ended = status in TERMINAL
            case "job.comment":
                self.dirty.add("comments")
            case "job.subtask_waiting":
                self.dirty.update({"subtasks", "summary"})
            case "usage":
                self.dirty.add("summary")
            case name if name.startswith("context."):
                self._context(name.removeprefix("context."), data)
            case _:
                pass

    def _transitions(self, item: dict[str, Any]) -> None:
        if item.get("kind") != "assistant_message":
            return
        for block in item.get("content", []):
            if block.get("type") != "tool_use" or block.get("name") != "transition":
                continue
            step = block.get("input", {})
            html = self.renderer.fragment(
                "partials/transition.html", source=self.movement, step=step, item=item
            )
            self.out.append(oob("timeline", html))
            target = str(step.get("next_step", ""))
            if target and not target.isupper():  # another movement, not COMPLETE/ASK/…
                self.movement = target

    def _context(self, action: str, data: dict[str, Any]) -> None:
        self.crossed.append({"action": action, **data})
        html = self.renderer.fragment(
            "partials/gauge.html", crossed=self.crossed, marks=GAUGE_MARKS
        )
        self.out.append(oob("context-gauge", html, "innerHTML"))
        line = self.renderer.fragment("partials/timeline_context.html", action=action, data=data)
        self.out.append(oob("timeline", line))

    async def refresh(self, region: str) -> str:
        path = f"/jobs/{q(self.job_id)}"
        as_of = read_stamp()
        job = await self.api.get(path)
        if region == "summary":
            html = self.renderer.fragment("partials/job_summary.html", job=job, csrf=self.csrf)
            return oob("job-summary", html, "innerHTML")
        if region == "actions":
            pending = job.get("required_action") or []
            shown, self.actions = self.actions, actions_digest(pending)
            if shown == self.actions:
                return ""
            html = self.renderer.fragment(
                "partials/actions.html", actions=pending, panel="job", csrf=self.csrf
            )
            return oob("actions", html, "innerHTML")
        # the lists only: a form the person may be filling in is never rendered again
        if region == "comments":
            comments = (await self.api.get(f"{path}/comments"))["data"]
            html = self.renderer.fragment("partials/comments.html", comments=comments, as_of=as_of)
            return oob("comment-list", html, "innerHTML")
        if region == "files":
            files = await self.api.get(f"{path}/files")
            html = self.renderer.fragment("partials/files.html", files=files, job=job, as_of=as_of)
            listed = oob("files", html, "innerHTML")
            if job.get("status") != JobStatus.draft:  # files go into input/ before the start only
                return listed + oob("upload-area", "", "innerHTML")
            return listed
        children = await self.api.get("/jobs", parent_job_id=self.job_id, limit=200)
        html = self.renderer.fragment("partials/subtasks.html", children=children["data"])
        return oob("subtasks", html, "innerHTML")


async def relay(
    api: PublicApi, path: str, last_event_id: str | None, feed: Feed, last_word: LastWord
) -> AsyncIterator[bytes]:
    """The console's stream: the API's stream at `path`, as HTML for the page."""
    headers = {"last-event-id": last_event_id} if last_event_id else {}
    async with api.stream("GET", path, headers=headers) as upstream:
        if upstream.status != 200:
            yield frame("end", f"the event stream answered {upstream.status}")
            return
        reader = SseReader()
        last_id: str | None = None
        async for chunk in upstream.chunks():
            for message in reader.feed(chunk):
                if isinstance(message, Comment):
                    if not feed.out and not feed.dirty:
                        yield KEEPALIVE
                    continue
                await feed.take(message)
                last_id = message.id or last_id
            if upstream.more_waiting():
                continue  # render once the reader has caught up
            if feed.out or feed.dirty:
                yield frame("console", await feed.flush(), last_id)
            if feed.ended:
                break
        tries = 0  # the stream's last word: its regions as they end
        while (feed.out or feed.dirty) and tries < last_word.tries:
            if tries:
                await asyncio.sleep(last_word.pause)
            yield frame("console", await feed.flush(), last_id)
            tries += 1
    if feed.ended or isinstance(feed, JobFeed):
        yield frame("end", "the job has ended")
