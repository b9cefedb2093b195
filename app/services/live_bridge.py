"""PostgreSQL LISTEN/NOTIFY under the live hub: what one process publishes reaches the
streams of every process sharing the database.

Each process has one listening connection and one sending connection (autocommit). A
published signal (a commit that streams should read, or a live text delta / tool progress)
is offered to this process's readers at once and sent as a NOTIFY on `strata_live` with the
process's id; the other processes' listeners offer it to their readers. Payloads over
PostgreSQL's limit are sent as a bare "read again", which the durable events then answer.
Neither loop ever ends on an error: a lost connection is reopened with growing pauses, and
while it is away streams still read the table at each keep-alive interval. A database that
cannot be reached is the process's outage, which the database's `Availability` logs once;
a sending connection that died while idle (a server restart) is replaced at once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from sqlalchemy.engine import make_url

from app.db.availability import Availability
from app.db.engine import sync_url
from app.services.live import LiveHub, LiveSignal

logger = logging.getLogger("strata.live")

CHANNEL = "strata_live"
MAX_PAYLOAD = 7900  # bytes; PostgreSQL refuses NOTIFY payloads of 8000 and more
_OUTBOX = 10_000  # signals waiting to be sent at most; past it the oldest are dropped
_MAX_PAUSE = 5.0
_BATCH = 64  # notifications sent by one statement at most


def libpq_url(database_url: str) -> str:
    url = make_url(sync_url(database_url)).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


def encode(origin: str, number: int, signal: LiveSignal) -> str:
    """`n` numbers the process's notifications: PostgreSQL delivers identical payloads of one
    transaction only once, and two deltas may well carry the same text."""
    payload = json.dumps(
        {
            "o": origin,
            "n": number,
            "t": signal.type,
            "s": signal.session_id,
            "j": signal.job_id,
            "d": signal.data,
            "e": signal.ended,
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    if len(payload.encode()) <= MAX_PAYLOAD:
        return payload
    # too big to carry: tell the readers to look at the table instead
    bare = {
        "o": origin,
        "n": number,
        "t": None,
        "s": signal.session_id,
        "j": signal.job_id,
        "e": signal.ended,
    }
    return json.dumps(bare)


def decode(payload: str) -> tuple[str, LiveSignal] | None:
    try:
        raw: dict[str, Any] = json.loads(payload)
        signal = LiveSignal(
            type=raw.get("t"),
            session_id=raw.get("s"),
            job_id=raw.get("j"),
            data=dict(raw.get("d") or {}),
            ended=bool(raw.get("e")),
        )
        return str(raw["o"]), signal
    except (ValueError, KeyError, TypeError):
        logger.warning("ignored a malformed %s notification", CHANNEL)
        return None


class PgLiveBridge:
    def __init__(
        self, database_url: str, hub: LiveHub, availability: Availability | None = None
    ) -> None:
        """`availability` hears of the database being unreachable."""
        self.url = libpq_url(database_url)
        self.hub = hub
        self.availability = availability
        self.origin = uuid.uuid4().hex
        self._outbox: asyncio.Queue[LiveSignal] = asyncio.Queue(maxsize=_OUTBOX)
        self.listening = asyncio.Event()  # set while the listener's LISTEN is in force
        self._sent = 0

    def publish(self, signal: LiveSignal) -> None:
        """Called by the hub for each signal of this process (on the event loop)."""
        if self._outbox.full():
            self._outbox.get_nowait()
        self._outbox.put_nowait(signal)

    async def run(self, stop: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(self._forever(self._listen, stop))
            group.create_task(self._forever(self._send, stop))

    async def _forever(self, loop_body: Any, stop: asyncio.Event) -> None:
        pause = 0.1
        while not stop.is_set():
            try:
                await _until(stop, loop_body())
                pause = 0.1
            except Exception as exc:
                self.listening.clear()
                self._lost(exc)
                await _until(stop, asyncio.sleep(pause))
                pause = min(pause * 2, _MAX_PAUSE)

    def _lost(self, exc: Exception) -> None:
        import psycopg

        if isinstance(exc, psycopg.OperationalError) and self.availability is not None:
            self.availability.failed(exc, f"{CHANNEL} connection")
            logger.debug("%s connection lost (%s); retrying", CHANNEL, type(exc).__name__)
        else:
            logger.warning("%s connection lost (%s); retrying", CHANNEL, type(exc).__name__)

    async def _listen(self) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            self.listening.set()
            async for notify in conn.notifies():
                decoded = decode(notify.payload)
                if decoded is not None and decoded[0] != self.origin:
                    self.hub.offer(decoded[1])

    async def _send(self) -> None:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        try:
            while True:
                batch = [await self._outbox.get()]
                while len(batch) < _BATCH and not self._outbox.empty():
                    batch.append(self._outbox.get_nowait())
                payloads = []
                for signal in batch:
                    self._sent += 1
                    payloads.append(encode(self.origin, self._sent, signal))
                # one round trip for all that queued up meanwhile, delivered in this order
                calls = ", ".join(["pg_notify(%s, %s)"] * len(payloads))
                params = [value for payload in payloads for value in (CHANNEL, payload)]
                try:
                    await conn.execute(f"SELECT {calls}", params)
                except psycopg.OperationalError:  # died while idle: once more on a new one
                    await conn.close()
                    conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
                    await conn.execute(f"SELECT {calls}", params)
        finally:
            await conn.close()


async def _until(stop: asyncio.Event, work: Any) -> None:
    """Runs `work` until it ends or `stop` is set (then it is cancelled)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
    finally:
        for pending in (task, stopper):
            pending.cancel()
        await asyncio.gather(task, stopper, return_exceptions=True)
