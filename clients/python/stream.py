"""Following a turn live: the generated client sends the message, `events.stream()` reads the
job's event stream as typed events (generated clients do not read Server-Sent Events), on the
same connection pool.

    python clients/python/stream.py --base-url http://127.0.0.1:8000 "Tell me a joke."

prints the answer as it is written (`text.delta` events) and the job's end. The job's stream
ends by itself once the job has ended; every event's `data` is a JSON object with its `type`,
`session_id` and `job_id` (see "Event streams" in the README).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from events import stream
from smoke import connect, expect
from strata_client.api.chat import chat_send
from strata_client.api.sessions import sessions_create
from strata_client.models import (
    MessageAccepted,
    MessageCreate,
    SessionCreate,
    SessionPublic,
    TextDelta,
)


@dataclass
class Followed:
    job_id: str
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def text(self) -> str:
        """The answer, from the durable `item.appended` events (replayed to a stream that
        opened late, unlike the live `text.delta` ones)."""
        return "".join(
            block["text"]
            for event in self.events
            if event["type"] == "item.appended" and event["kind"] == "assistant_message"
            for block in event["item"]["content"]
            if block["type"] == "text"
        )

    @property
    def status(self) -> str | None:
        ended = [e["status"] for e in self.events if e["type"] == "job.status"]
        return ended[-1] if ended else None


def stream_reply(
    base_url: str,
    token: str | None,
    message: str,
    *,
    on_text: Callable[[str], None] | None = None,
    timeout: float = 120.0,
) -> Followed:
    """Send `message` in a new session and follow its turn until the job ends."""
    with connect(base_url, token, timeout=timeout) as client:
        session = expect(
            sessions_create.sync_detailed(client=client, body=SessionCreate(title="Streaming")),
            SessionPublic,
            "create a session",
        )
        accepted = expect(
            chat_send.sync_detailed(session.id, client=client, body=MessageCreate(text=message)),
            MessageAccepted,
            "send the message",
        )
        followed = Followed(job_id=accepted.job_id)
        for received in stream(client, f"/jobs/{accepted.job_id}/events"):
            followed.events.append(received.event.to_dict())
            if isinstance(received.event, TextDelta) and on_text is not None:
                on_text(received.event.text)  # live, as the answer is written
        return followed  # the stream ended: so did the job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("message")
    parser.add_argument("--base-url", default=os.environ.get("STRATA_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", default=os.environ.get("STRATA_API_KEY"))
    args = parser.parse_args()
    followed = stream_reply(
        args.base_url, args.token, args.message, on_text=lambda t: print(t, end="", flush=True)
    )
    print(f"\n[job {followed.job_id}: {followed.status}] {followed.text}")


if __name__ == "__main__":
    main()
