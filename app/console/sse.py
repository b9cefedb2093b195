"""Server-Sent Events both ways: reading the API's streams, writing the console's own.

The reader follows the WHATWG parsing rules the API's streams use (`id`, `event`,
`data` lines, comments, a blank line ending each event), across chunk boundaries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamEvent:
    id: str | None
    event: str
    data: str

    def json(self) -> dict[str, Any]:
        try:
            value = json.loads(self.data)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class Comment:
    text: str


class SseReader:
    """Feed it bytes as they arrive; it hands back each complete event and comment."""

    def __init__(self) -> None:
        self._buffer = ""
        self._id: str | None = None
        self._event = "message"
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[StreamEvent | Comment]:
        self._buffer += chunk.decode("utf-8", errors="replace")
        lines = self._buffer.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self._buffer = lines.pop()  # an unfinished line waits for the next chunk
        out: list[StreamEvent | Comment] = []
        for line in lines:
            message = self._line(line)
            if message is not None:
                out.append(message)
        return out

    def _line(self, line: str) -> StreamEvent | Comment | None:
        if line == "":
            event = None
            if self._data:
                event = StreamEvent(self._id, self._event, "\n".join(self._data))
            self._id, self._event, self._data = None, "message", []
            return event
        if line.startswith(":"):
            return Comment(line[1:].strip())
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "id":
            self._id = value
        elif field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None


def frame(event: str, data: str, event_id: str | None = None) -> bytes:
    """One event; a multi-line `data` is sent as one `data:` line per line (a carriage
    return would end a line too, so it becomes a line break)."""
    lines = [f"id: {event_id}"] if event_id is not None else []
    lines.append(f"event: {event}")
    text = data.replace("\r\n", "\n").replace("\r", "\n")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


KEEPALIVE = b": keep-alive\n\n"
